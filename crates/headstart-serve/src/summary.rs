//! A session in one line of the listing: its requests, its calls by kind, the time early execution saved, its
//! last activity.

use std::collections::HashMap;

use headstart::store::RunOutcome;
use headstart::Message;
use serde::Serialize;

use crate::data::SessionData;

/// The listing's numbers for one session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The session id.
    pub session: String,
    /// Its queue state (`unqueued`, `pending`, …).
    pub state: String,
    /// The state in words, with the worker, its epoch and a failure's reason.
    pub state_words: String,
    /// The first line of its first prompt.
    pub prompt: String,
    /// Model requests made.
    pub requests: usize,
    /// Calls admitted while their response still streamed (by a fragment before the response's last).
    pub early: usize,
    /// Calls admitted when their response's stream ended (by its last fragment so far).
    pub after_stream: usize,
    /// Calls that ended in an error (error, panic, timeout, invalid arguments, unknown tool, blocked).
    pub failed: usize,
    /// Calls a stopped process interrupted (recovery gave them the interrupted result, contract §7.4).
    pub interrupted: usize,
    /// Calls admitted and still without a result: running, or left by a crash not yet recovered.
    pub unfinished: usize,
    /// Time saved over end-of-stream batching (ms).
    pub saved_ms: f64,
    /// When anything was last written (µs, the writer's clock).
    pub last_activity_us: i64,
}

impl Summary {
    /// The summary of a loaded session.
    pub fn of(data: &SessionData) -> Summary {
        let timeline = data.timeline();
        // The last fragment of each request: a call it admitted waited for the stream's end.
        let mut last_fragment: HashMap<u32, u64> = HashMap::new();
        for stored in &data.log {
            if let (Message::Assistant(_), Some(request)) = (&stored.message, stored.request) {
                last_fragment.insert(request, stored.seq);
            }
        }
        let early = data
            .runs
            .iter()
            .filter(|run| {
                last_fragment
                    .get(&run.request)
                    .is_some_and(|&last| run.fragment_seq < last)
            })
            .count();
        let failed = data
            .runs
            .iter()
            .filter(|run| {
                matches!(
                    run.outcome,
                    Some(
                        RunOutcome::Error
                            | RunOutcome::Panicked
                            | RunOutcome::TimedOut
                            | RunOutcome::Invalid
                            | RunOutcome::NotFound
                            | RunOutcome::Blocked
                    )
                )
            })
            .count();
        let interrupted = data
            .runs
            .iter()
            .filter(|run| run.outcome == Some(RunOutcome::Interrupted))
            .count();
        Summary {
            session: data.info.id.0.clone(),
            state: data.info.state.as_str().to_owned(),
            state_words: data.state_words(),
            prompt: data.prompt_line().to_owned(),
            requests: timeline.requests.len(),
            early,
            after_stream: data.runs.len() - early,
            failed,
            interrupted,
            unfinished: data.unfinished.len(),
            // To the µs the store keeps: no float noise in the JSON.
            saved_ms: (timeline.savings().saved_ms() * 1000.0).round() / 1000.0,
            last_activity_us: data.last_activity_us(),
        }
    }
}
