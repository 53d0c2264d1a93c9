//! `headstart replay SCENARIO.json [--report R] [--db PATH] [--clock virtual|wall] [--touch-dir DIR]
//! [--durability full|normal] [--consumer-delay-ms N] [--drop-after-events K]` (docs/scenario-format.md).
//!
//! With the environment variable `HEADSTART_TRACE_COMMITS=1`, every durable fragment commit is traced to standard
//! error as it returns (`headstart_sim::commit_trace`); the crash test reads the trace of a killed replay.

use std::path::PathBuf;

use clap::ValueEnum;
use headstart_sim::{replay_file, ClockMode, ReplayOptions};

use crate::durability::DurabilityArg;

/// Arguments of `headstart replay`.
#[derive(clap::Args)]
pub struct Args {
    /// The scenario file.
    scenario: PathBuf,
    /// Where the report goes (default: standard output).
    #[arg(long)]
    report: Option<PathBuf>,
    /// The SQLite transcript file to use (default: a temporary file, deleted afterwards).
    #[arg(long)]
    db: Option<PathBuf>,
    /// virtual: tokio's paused clock, deterministic; wall: real time.
    #[arg(long, value_enum, default_value_t = Clock::Virtual)]
    clock: Clock,
    /// Where tools with `touch: true` create `<call id>` files.
    #[arg(long)]
    touch_dir: Option<PathBuf>,
    /// The SQLite durability of the replay's store.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Full)]
    durability: DurabilityArg,
    /// The consumer waits N ms (of the replay's clock) after taking each event; the engine does not wait for it.
    #[arg(long, value_name = "N", default_value_t = 0)]
    consumer_delay_ms: u64,
    /// The consumer drops the event stream after taking K events; the report is then written from the store once
    /// the engine has settled every admitted call.
    #[arg(long, value_name = "K")]
    drop_after_events: Option<usize>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Clock {
    Virtual,
    Wall,
}

/// The environment variable that turns the commit trace on.
const TRACE_COMMITS: &str = "HEADSTART_TRACE_COMMITS";

/// Runs the replay; exit status 0 when the scenario ran, 2 when it could not be run.
pub fn run(args: &Args) -> u8 {
    let options = ReplayOptions {
        clock: match args.clock {
            Clock::Virtual => ClockMode::Virtual,
            Clock::Wall => ClockMode::Wall,
        },
        db: args.db.clone(),
        touch_dir: args.touch_dir.clone(),
        trace_commits: std::env::var_os(TRACE_COMMITS).is_some_and(|value| !value.is_empty() && value != "0"),
        durability: args.durability.into(),
        consumer_delay_ms: args.consumer_delay_ms,
        drop_after_events: args.drop_after_events,
    };
    let outcome = replay_file(&args.scenario, &options);
    let text = outcome.report.to_json();
    match &args.report {
        None => print!("{text}"),
        Some(path) => {
            if let Err(error) = std::fs::write(path, text) {
                eprintln!("headstart replay: cannot write {}: {error}", path.display());
                return 2;
            }
        }
    }
    if let Some(error) = &outcome.report.error {
        eprintln!("headstart replay: {error}");
    }
    u8::try_from(outcome.exit_code).unwrap_or(2)
}
