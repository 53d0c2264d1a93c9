//! `headstart demo [--db headstart.db] [--out-dir DIR] [--no-progress] [--serve [ADDR]]`: the simulated agent run
//! on the wall clock, with a live view (indicatif) or plain lines, and a summary of the time early execution
//! saved; with `--serve`, the web view of the store too (`headstart serve`), live while the demo runs.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use headstart::AgentStop;
use headstart_sim::demo::{self, DemoOutcome};

use crate::serve::ServeFlags;
use crate::store_url::{Access, StoreUrl};
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
    #[command(flatten)]
    serve: ServeFlags,
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
    let served = runtime.block_on(async {
        let store = StoreUrl::Sqlite(args.db.clone());
        if args.serve.serve.is_some() {
            // The server opens the file read-only: it must exist, with its schema, before the demo writes.
            store.open(Access::Create).await?;
        }
        args.serve.start(&store).await
    });
    let url = match served {
        Ok(url) => url,
        Err(error) => {
            eprintln!("headstart demo: {error}");
            return 1;
        }
    };
    if let Some(url) = &url {
        println!("headstart demo: the live view is at {url}");
        if std::io::stdin().is_terminal() {
            println!("Open it, then press Enter to start the demo.");
            let _ = std::io::stdin().lock().read_line(&mut String::new());
        }
    }
    println!("headstart demo: {}", demo::PROMPT);
    println!("(simulated model at 40 tokens/s; lookup_crate is early and runs while the model streams; write_file is sync)\n");
    let mut view = View::new(live);
    let outcome = runtime.block_on(demo::run(&args.db, out_dir.clone(), |event, at_ms| {
        view.event(event, at_ms)
    }));
    view.finish();
    let code = match outcome {
        Ok(outcome) => {
            print_summary(&outcome, args, &out_dir);
            0
        }
        Err(error) => {
            eprintln!("headstart demo: {error}");
            1
        }
    };
    runtime.block_on(args.serve.linger(url.as_deref()));
    code
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
