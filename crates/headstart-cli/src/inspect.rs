//! `headstart inspect DB [--session ID] [--json]`: print a stored transcript.

use std::path::PathBuf;

use headstart::store::{SessionId, SqliteStore, StoredMessage, TranscriptStore};
use headstart::Message;
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
                out.push_str(&format!("session {session}\n"));
                for stored in &log {
                    out.push_str(&human_line(stored));
                }
            }
        }
        if args.json {
            out = serde_json::to_string_pretty(&json).map_err(|error| error.to_string())?;
            out.push('\n');
        }
        Ok(out)
    })
}

fn human_line(stored: &StoredMessage) -> String {
    let body = match &stored.message {
        Message::User(user) => format!("user: {}", user.text),
        Message::Assistant(assistant) => {
            let calls: Vec<String> = assistant
                .tool_calls()
                .map(|call| format!("{}({})", call.name, call.id))
                .collect();
            let text = headstart::core::model::joined_text(&assistant.content);
            format!(
                "assistant [{} {}] {}{}",
                assistant.turn_id,
                assistant.stop_reason,
                text.replace('\n', " "),
                if calls.is_empty() {
                    String::new()
                } else {
                    format!(" calls: {}", calls.join(", "))
                }
            )
        }
        Message::ToolResult(result) => format!(
            "tool_result {} {}{}",
            result.tool_call_id,
            if result.is_error { "(error) " } else { "" },
            result.text().replace('\n', " ")
        ),
    };
    format!("  #{:<4} {body}\n", stored.seq)
}
