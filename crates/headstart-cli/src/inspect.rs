//! `headstart inspect STORE [--session ID] [--json] [--stats]`: print a stored transcript, or the figures of every
//! session summarized per model (STORE: a SQLite file or a PostgreSQL URL).

mod human;
mod stats;

use headstart::store::{SessionId, SessionInfo, SessionSettings, SessionState};
use headstart_serve::data::{inspect_json, queue_state};

use crate::store_url::{runtime, Access, StoreUrl};
use headstart_timeline::visible::{visible, Lines};

/// Arguments of `headstart inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// The store: a SQLite file, or a PostgreSQL connection string (postgresql://… or host=… dbname=…).
    db: String,
    /// Only this session (default: every session).
    #[arg(long)]
    session: Option<String>,
    /// Print JSON: one object per session with its queue state (`state`, `owner`, `epoch`, `failure`), the
    /// settings it was submitted with (`settings`: `system`, `model`, null when not given) and its transcript in the
    /// report's `transcript` shape, and its `figures`: per call its seal time, headroom, seal-to-start, run time and
    /// overlap, per response its tool-round time beside end-of-stream batching's (ms, null when unknown).
    #[arg(long)]
    json: bool,
    /// Print the figures of every session (or of `--session`) summarized per model: responses, calls, and the
    /// median and p95 of tool-round time, batching's round time, overlap and headroom.
    #[arg(long)]
    stats: bool,
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
    runtime()?.block_on(async {
        let url = StoreUrl::parse(&args.db);
        let store = url.open(Access::Read).await?;
        let sessions: Vec<SessionInfo> = url.sessions(store.as_ref(), args.session.as_deref()).await?;
        let mut out = String::new();
        let mut json = Vec::new();
        let mut stats = stats::Groups::default();
        for info in sessions {
            let session: SessionId = info.id.clone();
            let log = store.load_log(&session).await.map_err(|error| error.to_string())?;
            let runs = store.tool_runs(&session).await.map_err(|error| error.to_string())?;
            if args.stats {
                stats.add(&log, &runs);
            } else if args.json {
                json.push(inspect_json(&info, &log, &runs));
            } else {
                let unfinished = store
                    .unfinished_calls(&session)
                    .await
                    .map_err(|error| error.to_string())?;
                if !out.is_empty() {
                    out.push('\n');
                }
                match info.state {
                    // Single-process sessions have no queue state worth a word.
                    SessionState::Unqueued => out.push_str(&format!("session {session}\n")),
                    _ => out.push_str(&format!("session {session} ({})\n", queue_state(&info))),
                }
                out.push_str(&settings_lines(&info.settings));
                out.push_str(&human::render(&log, &runs, &unfinished));
            }
        }
        if args.stats {
            out = match args.json {
                true => {
                    let mut text = serde_json::to_string_pretty(&stats.to_json()).map_err(|error| error.to_string())?;
                    text.push('\n');
                    text
                }
                false => stats.to_text(),
            };
        } else if args.json {
            out = serde_json::to_string_pretty(&json).map_err(|error| error.to_string())?;
            out.push('\n');
        }
        Ok(out)
    })
}

/// The settings a session was submitted with, one line each (none when it has none), made visible: a system
/// prompt may hold any character.
fn settings_lines(settings: &SessionSettings) -> String {
    let mut lines = String::new();
    if let Some(model) = &settings.model {
        lines.push_str(&format!("model: {}\n", visible(model, Lines::Escape)));
    }
    if let Some(system) = &settings.system {
        lines.push_str(&format!("system prompt: {}\n", visible(system, Lines::Escape)));
    }
    lines
}
