//! `headstart inspect DB [--session ID] [--json]`: print a stored transcript.

mod human;

use std::path::PathBuf;

use headstart::store::{SessionId, SqliteStore, TranscriptStore};
use headstart_sim::report::TranscriptEntry;

/// Arguments of `headstart inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// The SQLite transcript file.
    db: PathBuf,
    /// Only this session (default: every session).
    #[arg(long)]
    session: Option<String>,
    /// Print JSON: one object per session with the report's `transcript` shape.
    #[arg(long)]
    json: bool,
}

/// Prints the transcript; exit status 1 when the database cannot be read.
pub fn run(args: &Args) -> u8 {
    match inspect(args) {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(error) => {
            eprintln!("headstart inspect: {error}");
            1
        }
    }
}

fn inspect(args: &Args) -> Result<String, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start a runtime: {error}"))?;
    runtime.block_on(async {
        let store = SqliteStore::open_read_only(&args.db).map_err(|error| error.to_string())?;
        let sessions: Vec<SessionId> = match &args.session {
            Some(id) => vec![SessionId(id.clone())],
            None => store
                .sessions()
                .await
                .map_err(|error| error.to_string())?
                .into_iter()
                .map(|info| info.id)
                .collect(),
        };
        let mut out = String::new();
        let mut json = Vec::new();
        for session in sessions {
            let log = store.load_log(&session).await.map_err(|error| error.to_string())?;
            if args.json {
                let transcript: Vec<TranscriptEntry> = log
                    .iter()
                    .map(|stored| TranscriptEntry::from_stored(stored, false))
                    .collect();
                json.push(serde_json::json!({"session": session.0, "transcript": transcript}));
            } else {
                let runs = store.tool_runs(&session).await.map_err(|error| error.to_string())?;
                let unfinished = store
                    .unfinished_calls(&session)
                    .await
                    .map_err(|error| error.to_string())?;
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&format!("session {session}\n"));
                out.push_str(&human::render(&log, &runs, &unfinished));
            }
        }
        if args.json {
            out = serde_json::to_string_pretty(&json).map_err(|error| error.to_string())?;
            out.push('\n');
        }
        Ok(out)
    })
}
