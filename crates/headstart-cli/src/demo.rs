//! `headstart demo [--db headstart.db] [--out-dir DIR] [--no-progress]`: the simulated agent run on the wall
//! clock, with a live view (indicatif) or plain lines, and a summary of the time early execution saved.

use std::io::IsTerminal;
use std::path::PathBuf;

use headstart::AgentStop;
use headstart_sim::demo::{self, DemoOutcome};

use crate::view::{print_savings, View};

/// Arguments of `headstart demo`.
#[derive(clap::Args)]
pub struct Args {
    /// The SQLite transcript file (created if missing; each run adds a session).
    #[arg(long, default_value = "headstart.db")]
    db: PathBuf,
    /// Where the demo's `write_file` tool writes (default: a `headstart-demo` folder in the system temp dir).
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Print plain lines instead of the live view (the default when stdout is not a terminal).
    #[arg(long)]
    no_progress: bool,
}

/// Runs the demo; exit status 1 if it could not run.
pub fn run(args: &Args) -> u8 {
    let out_dir = args
        .out_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("headstart-demo"));
    let live = !args.no_progress && std::io::stdout().is_terminal();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("headstart demo: cannot start a runtime: {error}");
            return 1;
        }
    };
    println!("headstart demo: {}", demo::PROMPT);
    println!("(simulated model at 40 tokens/s; lookup_crate is early and runs while the model streams; write_file is sync)\n");
    let mut view = View::new(live);
    let outcome = runtime.block_on(demo::run(&args.db, out_dir.clone(), |event, at_ms| {
        view.event(event, at_ms)
    }));
    view.finish();
    match outcome {
        Ok(outcome) => {
            print_summary(&outcome, args, &out_dir);
            0
        }
        Err(error) => {
            eprintln!("headstart demo: {error}");
            1
        }
    }
}

fn print_summary(outcome: &DemoOutcome, args: &Args, out_dir: &std::path::Path) {
    print_savings(&outcome.timeline, &format!("{:?}", outcome.stop));
    let db = args.db.display();
    println!("Transcript: {db} (session {}). Look at it with:", outcome.session);
    println!("  headstart inspect {db}");
    println!("  headstart timeline {db} --out timeline.svg");
    println!("Files written by the agent: {}", out_dir.display());
    if !matches!(outcome.stop, AgentStop::Completed) {
        println!("note: the run ended with {:?}", outcome.stop);
    }
}
