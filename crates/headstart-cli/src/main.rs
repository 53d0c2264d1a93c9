//! `headstart`: replay scenarios, inspect transcripts.

mod demo;
mod inspect;
mod recover;
mod replay;

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
    /// Run the demo: a simulated model streaming on the wall clock, async lookups overlapping it.
    Demo(demo::Args),
    /// Replay a scenario (scenarios/FORMAT.md) and write its report.
    Replay(replay::Args),
    /// Print a stored transcript.
    Inspect(inspect::Args),
    /// Give every unfinished call (admitted, no result) the interrupted result (SPEC §7.4).
    Recover(recover::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Inspect(args) => inspect::run(&args),
        Command::Recover(args) => recover::run(&args),
    };
    ExitCode::from(code)
}
