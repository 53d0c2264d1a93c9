//! `headstart inspect STORE [--session ID] [--json] [--stats] [--restate ADMIN_URL]`: print a stored transcript, or
//! the figures of every session summarized per model (STORE: a SQLite file or a PostgreSQL URL); with `--restate`,
//! each session's turns as a Restate server sees them beside it.

mod human;
mod stats;

use headstart::store::{SessionId, SessionInfo, SessionSettings, SessionState};
use headstart_serve::data::{inspect_json, queue_state};
use headstart_serve::restate::RestateTurn;
use serde_json::json;

use crate::restate_turns::{self, SessionTurns};
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
    /// Print JSON: one object per session with its queue state (`state`, `owner`, `epoch`, `failure`, `queue`,
    /// `attempts`: releases for a provider outage, `not_before_us`: the end of such a release's backoff), the
    /// settings it was submitted with (`settings`: `system`, `model`, null when not given) and its transcript in the
    /// report's `transcript` shape, and its `figures`: per call its seal time, headroom, seal-to-start, run time and
    /// overlap, per response its tool-round time beside end-of-stream batching's (ms, null when unknown).
    #[arg(long)]
    json: bool,
    /// Print the figures of every session (or of `--session`) summarized per model: responses, calls, and the
    /// median and p95 of tool-round time, batching's round time, overlap and headroom.
    #[arg(long)]
    stats: bool,
    /// Also show each session's turns as the Restate server whose admin API is here sees them (status, retries,
    /// last failure, and under a turn the `Tools` calls it waits on whose attempts fail), and the sessions submitted
    /// to it that the store has not seen yet, e.g. `--restate
    /// http://127.0.0.1:9070`. The store stays the record of the transcript (docs/restate.md).
    #[arg(long, value_name = "ADMIN_URL", conflicts_with = "stats")]
    restate: Option<String>,
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
        let (sessions, mut restate) = match &args.restate {
            None => (url.sessions(store.as_ref(), args.session.as_deref()).await?, None),
            Some(admin) => {
                let restate = restate_turns::by_session(admin, args.session.as_deref()).await?;
                let mut sessions = url.sessions(store.as_ref(), None).await?;
                if let Some(only) = &args.session {
                    sessions.retain(|info| &info.id.0 == only);
                    if sessions.is_empty() && restate.is_empty() {
                        return Err(format!("neither {url} nor the Restate server has a session {only}"));
                    }
                }
                (sessions, Some(restate))
            }
        };
        let mut out = String::new();
        let mut json = Vec::new();
        let mut stats = stats::Groups::default();
        for info in sessions {
            let session: SessionId = info.id.clone();
            // This session's turns, taken out: what is left at the end, the store has not seen.
            let turns = restate.as_mut().map(|restate| restate.take(&session.0));
            let log = store.load_log(&session).await.map_err(|error| error.to_string())?;
            let runs = store.tool_runs(&session).await.map_err(|error| error.to_string())?;
            if args.stats {
                stats.add(&log, &runs);
            } else if args.json {
                let mut object = inspect_json(&info, &log, &runs);
                if let Some(turns) = &turns {
                    object["restate"] = json!(turns);
                }
                json.push(object);
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
                if let Some(turns) = &turns {
                    out.push_str(&turn_lines(turns));
                }
                out.push_str(&human::render(&log, &runs, &unfinished));
            }
        }
        for (session, turns) in restate.map(SessionTurns::rest).unwrap_or_default() {
            if args.json {
                let mut object = inspect_json(&not_begun(&session), &[], &[]);
                object["state"] = json!(SUBMITTED);
                object["restate"] = json!(turns);
                json.push(object);
            } else {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&format!(
                    "session {} ({SUBMITTED} to Restate, not begun)\n",
                    visible(&session, Lines::Escape)
                ));
                out.push_str(&turn_lines(&turns));
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

/// The state `inspect --restate` gives a session the Restate server holds and the store has not seen: its turn
/// was submitted and has not begun (it waits behind others, or for a deployment).
const SUBMITTED: &str = "submitted";

/// The listing entry of a session the store has not seen.
fn not_begun(session: &str) -> SessionInfo {
    SessionInfo {
        id: session.into(),
        created_at_us: 0,
        messages: 0,
        state: SessionState::Pending,
        owner: None,
        epoch: 0,
        lease_expires_at_us: None,
        failure: None,
        settings: SessionSettings::default(),
        attempts: 0,
        not_before_us: None,
    }
}

/// A session's turns on Restate, one line each: `restate turn inv_… running`, with its retries and last failure.
fn turn_lines(turns: &[RestateTurn]) -> String {
    if turns.is_empty() {
        return "restate: no turn kept by the server\n".to_owned();
    }
    let mut lines = String::new();
    for turn in turns {
        lines.push_str(&format!(
            "restate turn {}: {}",
            visible(&turn.invocation, Lines::Escape),
            visible(&turn.status, Lines::Escape)
        ));
        if turn.retries > 0 {
            lines.push_str(&format!(" after {} retries", turn.retries));
        }
        if let Some(failure) = &turn.last_failure {
            lines.push_str(&format!(" (last failure: {})", visible(failure, Lines::Escape)));
        }
        lines.push('\n');
        for call in &turn.failing_calls {
            lines.push_str(&format!(
                "  waits on Tools/run_call {}: {} after {} retries",
                visible(&call.invocation, Lines::Escape),
                visible(&call.status, Lines::Escape),
                call.retries
            ));
            if let Some(failure) = &call.last_failure {
                lines.push_str(&format!(" (last failure: {})", visible(failure, Lines::Escape)));
            }
            lines.push('\n');
        }
    }
    lines
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
