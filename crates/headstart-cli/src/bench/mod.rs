//! `headstart bench <mode> [--json] [options]`: the measurements of issues 6 and 32 (docs/performance.md explains
//! each figure). One subcommand per mode, each with its own options, measuring through the `headstart-bench` crate
//! and printing its own report.

mod fleet;
mod modes;

use serde::Serialize;

use headstart_bench::BenchError;

pub(crate) use modes::SessionsArgs;
use modes::{AdmissionArgs, DeltasArgs, HeadroomArgs, HistoryArgs, OverlapArgs, ProviderAsyncArgs, SchedulerArgs};

/// Arguments of `headstart bench`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    mode: Mode,
}

/// What to measure.
#[derive(clap::Subcommand)]
enum Mode {
    /// Early execution vs end-of-stream batching vs the lower bound, on the wall clock.
    Overlap(OverlapArgs),
    /// The per-delta cost of the adapter vs a bare loop.
    Deltas(DeltasArgs),
    /// Sealed toolcall_end -> execute, vs a bare SQLite commit, and the sequential gap.
    Admission(AdmissionArgs),
    /// Many concurrent sessions: throughput and peak memory; with --store, a fleet of worker processes.
    Sessions(SessionsArgs),
    /// The pure scheduler's cost per call on one response of many keyed calls.
    Scheduler(SchedulerArgs),
    /// Recordings replayed through each Chat Completions sealing rule: when each call is sealed, and its headroom.
    Headroom(HeadroomArgs),
    /// One long session: the step from a response's last write to the next request, at its start and at its end.
    History(HistoryArgs),
    /// Two independent calls with OpenAI's async tool calling on and off, and against end-of-stream batching.
    ProviderAsync(ProviderAsyncArgs),
}

/// How a report is printed, shared by every mode.
#[derive(clap::Args)]
struct Output {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

impl Output {
    fn print(&self, report: &impl Serialize, table: String) -> Result<(), BenchError> {
        if self.json {
            let text = serde_json::to_string(report).map_err(|error| BenchError::new(error.to_string()))?;
            println!("{text}");
        } else {
            print!("{table}");
        }
        Ok(())
    }
}

/// Runs the benchmark; exit status 0 when it ran, 2 when it could not run.
pub fn run(args: &Args) -> u8 {
    let printed = match &args.mode {
        Mode::Overlap(mode) => mode.run(),
        Mode::Deltas(mode) => mode.run(),
        Mode::Admission(mode) => mode.run(),
        Mode::Sessions(mode) => mode.run(),
        Mode::Scheduler(mode) => mode.run(),
        Mode::Headroom(mode) => mode.run(),
        Mode::History(mode) => mode.run(),
        Mode::ProviderAsync(mode) => mode.run(),
    };
    match printed {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("headstart bench: {error}");
            2
        }
    }
}

#[cfg(test)]
impl Args {
    /// The arguments of `bench sessions`, for a test that parsed them.
    pub(crate) fn sessions(&self) -> Option<&SessionsArgs> {
        match &self.mode {
            Mode::Sessions(args) => Some(args),
            _ => None,
        }
    }
}
