//! `headstart`: run an agent on a real model, resume it after a crash, replay scenarios, inspect transcripts.

mod bench;
mod builtin_tools;
mod convert;
mod demo;
mod durability;
mod inspect;
mod mcp;
mod recover;
mod replay;
mod run;
mod timeline;
mod view;

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
    /// Run an agent on a real model (OpenAI, Anthropic, Gemini or a compatible server) with built-in read-only
    /// tools, and show what early execution saved.
    Run(run::RunArgs),
    /// Resume a session after a crash: recover its unfinished calls, then continue the agent loop.
    Resume(run::ResumeArgs),
    /// Replay a scenario (docs/scenario-format.md) and write its report.
    Replay(replay::Args),
    /// Print a stored transcript.
    Inspect(inspect::Args),
    /// Draw a stored session (or a replay report) as an SVG timeline, with the time saved over batching.
    Timeline(timeline::Args),
    /// Give every unfinished call (admitted, no result) the interrupted result (SPEC §7.4).
    Recover(recover::Args),
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
        Command::Timeline(args) => timeline::run(&args),
        Command::Recover(args) => recover::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Mcp(args) => mcp::run(&args),
    };
    ExitCode::from(code)
}
