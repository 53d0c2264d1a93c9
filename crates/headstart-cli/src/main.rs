//! `headstart`: run an agent on a real model, resume it after a crash, replay scenarios, inspect transcripts, run
//! a fleet's workers.

mod agent;
mod bench;
mod builtin_tools;
mod convert;
mod demo;
mod durability;
mod failure;
mod inspect;
mod mcp;
mod metrics_endpoint;
mod owner;
mod recover;
mod replay;
#[cfg(feature = "restate")]
mod restate;
mod restate_turns;
mod run;
mod serve;
mod store_url;
mod submit;
mod timeline;
mod view;
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
    /// Run the demo: a simulated model streaming on the wall clock, early lookups overlapping it.
    Demo(demo::Args),
    /// Run an agent on a real model (OpenAI, Anthropic, Gemini or a compatible server) with built-in read-only
    /// tools, and show what early execution saved.
    Run(run::RunArgs),
    /// Resume a session after a crash: recover its unfinished calls, then continue the agent loop.
    Resume(run::ResumeArgs),
    /// Replay a scenario (docs/scenario-format.md) and write its report.
    Replay(replay::Args),
    /// Print a stored transcript.
    Inspect(inspect::Args),
    /// Serve a read-only, live web view of a store: sessions, transcripts beside their timelines, the fleet.
    Serve(serve::Args),
    /// Draw a stored session (or a replay report) as an SVG timeline, with the time saved over batching.
    Timeline(timeline::Args),
    /// Give every unfinished call (admitted, no result) the interrupted result (contract §7.4).
    Recover(recover::Args),
    /// Put sessions in a fleet's queue (a SQLite file or a PostgreSQL URL); workers claim them.
    Submit(submit::Args),
    /// Run a worker of a fleet: claim sessions, keep their leases, recover and run them (docs/fleet.md).
    Worker(worker::Args),
    /// Run headstart on a Restate server: `restate serve` a deployment, `restate register` it (docs/restate.md).
    #[cfg(feature = "restate")]
    Restate(restate::Args),
    /// Measure overlap, per-delta cost, admission latency and scale (docs/performance.md).
    Bench(bench::Args),
    /// Look at MCP servers as headstart sees them: `headstart mcp tools [--trusted] -- COMMAND ARGS…`.
    Mcp(mcp::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Convert(args) => convert::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Resume(args) => run::resume(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Inspect(args) => inspect::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Timeline(args) => timeline::run(&args),
        Command::Recover(args) => recover::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Mcp(args) => mcp::run(&args),
        Command::Submit(args) => submit::run(&args),
        Command::Worker(args) => worker::run(&args),
        #[cfg(feature = "restate")]
        Command::Restate(args) => restate::run(&args),
    };
    ExitCode::from(code)
}
