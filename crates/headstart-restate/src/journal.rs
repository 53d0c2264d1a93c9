//! What the journal of a `Session` invocation holds, one [`Step`] per entry, and what crosses to the `Tools`
//! service: pure data, no I/O.
//!
//! The journal is a log of what the engine made durable, in the engine's order. A replay reads it back to issue the
//! same durable calls again (Restate requires a replayed invocation to repeat its commands) without re-asking the
//! model: the stream that produced the seals died with its attempt.

use headstart::core::model::AssistantMessage;
use headstart::store::SessionEnd;
use headstart::{AgentStop, Arguments};
use serde::{Deserialize, Serialize};

/// One journal entry of a `Session` invocation (every entry is named `step`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// A fragment about to be committed (contract §1): the store commit follows the entry's acknowledgement, and
    /// the engine admits the fragment's calls only after both.
    Seal(Seal),
    /// The engine started a call: the durable call to `Tools` that follows this entry runs it.
    Issue(CallSpec),
    /// A replay reached the end of the journal: the model stream of the attempt that wrote the entries before is
    /// gone. The invocation recovers the session (contract §7.4) and goes on from the stored transcript.
    Lost,
    /// The invocation's agent loop ended.
    Done(TurnReport),
}

/// A committed fragment, as journaled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Seal {
    /// The model request whose response the fragment belongs to.
    pub request: u32,
    /// The fragment.
    pub fragment: AssistantMessage,
    /// The calls the commit admitted, in admission order.
    pub admitted: Vec<String>,
}

/// One call for the `Tools` service: everything it needs to run the tool's body on any deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallSpec {
    /// The session.
    pub session: String,
    /// The call id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The call's arguments, as the engine prepared them.
    pub arguments: Arguments,
    /// headstart's idempotency key of the call (stable across retries and recovery).
    pub idempotency_key: String,
    /// When the seal that admitted the call was asked for (µs since the Unix epoch, the session's deployment's
    /// wall clock), for the seal→body figure; absent when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed_at_us: Option<i64>,
}

impl TurnReport {
    /// How the turn ends its hold on the session in the store: `completed` when its loop stopped as a finished
    /// agent does (completed, terminated by a tool, or at its request limit), else `failed` with the stop.
    pub fn session_end(&self) -> SessionEnd {
        if self.stop.is_finished() {
            return SessionEnd::Completed;
        }
        let stop = serde_json::to_string(&self.stop).unwrap_or_else(|_| format!("{:?}", self.stop));
        SessionEnd::Failed(format!("the turn stopped: {stop}"))
    }
}

/// What a `turn` answers: the session, how its agent loop stopped, and how often a crash cut a response short.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnReport {
    /// The session (the object's key).
    pub session: String,
    /// How the last agent loop stopped (as JSON: `{"reason": "completed"}`, `{"reason": "error", "message": "…"}`,
    /// …).
    pub stop: AgentStop,
    /// Responses lost with a crashed attempt and recovered (contract §7.4).
    pub recoveries: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_agent_ends_its_session_completed_and_any_other_stop_failed() {
        let end = |stop: AgentStop| {
            TurnReport {
                session: "s".into(),
                stop,
                recoveries: 0,
            }
            .session_end()
        };
        for stop in [AgentStop::Completed, AgentStop::Terminated, AgentStop::MaxRequests] {
            assert_eq!(end(stop.clone()), SessionEnd::Completed, "{stop:?}");
        }
        for stop in [
            AgentStop::ResponseFailed,
            AgentStop::Cancelled,
            AgentStop::Error("store down".into()),
            AgentStop::Fenced("gone".into()),
        ] {
            assert!(matches!(end(stop.clone()), SessionEnd::Failed(_)), "{stop:?}");
        }
    }

    #[test]
    fn a_step_names_its_kind() {
        let json = serde_json::to_value(Step::Lost).expect("serialize");
        assert_eq!(json, serde_json::json!({"step": "lost"}));
        let done = Step::Done(TurnReport {
            session: "s".into(),
            stop: AgentStop::Error("store down".into()),
            recoveries: 1,
        });
        let json = serde_json::to_value(&done).expect("ser");
        assert_eq!(
            json["stop"],
            serde_json::json!({"reason": "error", "message": "store down"}),
            "the form journals and reports held before the stop was typed"
        );
        let back: Step = serde_json::from_value(json).expect("de");
        assert_eq!(back, done);
        let old: TurnReport = serde_json::from_value(
            serde_json::json!({"session": "s", "stop": {"reason": "max_turns"}, "recoveries": 0}),
        )
        .expect("a report written before");
        assert_eq!(old.stop, AgentStop::MaxRequests);
    }
}
