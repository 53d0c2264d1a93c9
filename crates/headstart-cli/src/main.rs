//! `headstart`: replay scenarios, inspect transcripts.

mod inspect;
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
    /// Replay a scenario (scenarios/FORMAT.md) and write its report.
    Replay(replay::Args),
    /// Print a stored transcript.
    Inspect(inspect::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Replay(args) => replay::run(&args),
        Command::Inspect(args) => inspect::run(&args),
    };
    ExitCode::from(code)
}
