//! `headstart recover DB [--json]`: give every unfinished call (admitted, no result) the interrupted result
//! (SPEC §7.4), and print what was done.

use std::path::PathBuf;

use headstart::store::{SqliteOptions, SqliteStore};
use headstart::{recover_all, Clock, SystemClock};

/// Arguments of `headstart recover`.
#[derive(clap::Args)]
pub struct Args {
    /// The SQLite transcript file.
    db: PathBuf,
    /// Print JSON: an array with one object per recovered call.
    #[arg(long)]
    json: bool,
}

/// Runs recovery; exit status 1 when the database cannot be recovered.
pub fn run(args: &Args) -> u8 {
    let recovered = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start a runtime: {error}"))
        .and_then(|runtime| {
            runtime.block_on(async {
                if !args.db.exists() {
                    return Err(format!("{} does not exist", args.db.display()));
                }
                let store = SqliteStore::open(&args.db, SqliteOptions::default()).map_err(|error| error.to_string())?;
                recover_all(&store, SystemClock.now_us())
                    .await
                    .map_err(|error| error.to_string())
            })
        });
    let recovered = match recovered {
        Ok(recovered) => recovered,
        Err(error) => {
            eprintln!("headstart recover: {error}");
            return 1;
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&recovered) {
            Ok(text) => println!("{text}"),
            Err(error) => {
                eprintln!("headstart recover: {error}");
                return 1;
            }
        }
        return 0;
    }
    if recovered.is_empty() {
        println!(
            "nothing to recover: every admitted call in {} has a result",
            args.db.display()
        );
    }
    for call in &recovered {
        println!(
            "session {}: {} ({}) owned by fragment #{}, {} → interrupted result #{}",
            call.session,
            call.call_id,
            call.tool_name,
            call.fragment_seq,
            if call.had_started {
                "had started"
            } else {
                "had not started"
            },
            call.result_seq
        );
    }
    if !recovered.is_empty() {
        println!("recovered {} call(s)", recovered.len());
    }
    0
}
