//! `headstart`: replay scenarios, inspect transcripts, run a fleet's workers.

mod bench;
mod bench_fleet;
mod convert;
mod demo;
mod durability;
mod inspect;
mod recover;
mod replay;
mod store_url;
mod submit;
mod timeline;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Streaming early execution for LLM agents.
#[derive(Parser)]
#[command(name = "headstart", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Turn a recorded provider stream (SSE text or a YAML cassette) into delta logs.
    Convert(convert::Args),
    /// Run the demo: a simulated model streaming on the wall clock, async lookups overlapping it.
    Demo(demo::Args),
    /// Replay a scenario (scenarios/FORMAT.md) and write its report.
    Replay(replay::Args),
    /// Print a stored transcript.
    Inspect(inspect::Args),
    /// Draw a stored session (or a replay report) as an SVG timeline, with the time saved over batching.
    Timeline(timeline::Args),
    /// Give every unfinished call (admitted, no result) the interrupted result (SPEC §7.4).
    Recover(recover::Args),
    /// Put sessions in a fleet's queue (a SQLite file or a PostgreSQL URL); workers claim them.
    Submit(submit::Args),
    /// Run a worker of a fleet: claim sessions, keep their leases, recover and run them (docs/fleet.md).
    Worker(worker::Args),
    /// Measure overlap, per-delta cost, admission latency and scale (docs/performance.md).
    Bench(bench::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Convert(args) => convert::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Inspect(args) => inspect::run(&args),
        Command::Timeline(args) => timeline::run(&args),
        Command::Recover(args) => recover::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Submit(args) => submit::run(&args),
        Command::Worker(args) => worker::run(&args),
    };
    ExitCode::from(code)
}
