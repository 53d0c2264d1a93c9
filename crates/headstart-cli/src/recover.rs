//! `headstart recover STORE [--json]`: give every unfinished call (admitted, no result) the interrupted result
//! (contract §7.4), and print what was done. STORE is a SQLite file or a PostgreSQL URL.
//!
//! Sessions a worker of a fleet holds (`running`) are left alone: their writes are the worker's (contract §7.5.2),
//! and the worker, or the one that takes them over, recovers them.

use headstart::store::SessionState;
use headstart::{recover_session, Clock, RecoveredCall, SystemClock};

use crate::store_url::{runtime, Access, StoreUrl};

/// Arguments of `headstart recover`.
#[derive(clap::Args)]
pub struct Args {
    /// The store: a SQLite file, or a PostgreSQL connection string (postgresql://… or host=… dbname=…).
    db: String,
    /// Print JSON: an array with one object per recovered call.
    #[arg(long)]
    json: bool,
}

/// Runs recovery; exit status 1 when the database cannot be recovered.
pub fn run(args: &Args) -> u8 {
    let url = StoreUrl::parse(&args.db);
    let recovered = runtime().and_then(|runtime| {
        runtime.block_on(async {
            let store = url.open(Access::WriteExisting).await?;
            let mut recovered: Vec<RecoveredCall> = Vec::new();
            for info in store.sessions().await.map_err(|error| error.to_string())? {
                if info.state == SessionState::Running {
                    continue;
                }
                let calls = recover_session(store.as_ref(), &info.id, SystemClock.now_us())
                    .await
                    .map_err(|error| error.to_string())?;
                recovered.extend(calls);
            }
            Ok::<_, String>(recovered)
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
        println!("nothing to recover: every admitted call in {url} has a result (sessions a worker holds aside)");
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
