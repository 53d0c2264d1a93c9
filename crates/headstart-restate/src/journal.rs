//! What the journal of a `Session` invocation holds, one [`Step`] per entry, and what crosses to the `Tools`
//! service: pure data, no I/O.
//!
//! The journal is a log of what the engine made durable, in the engine's order. A replay reads it back to issue the
//! same durable calls again (Restate requires a replayed invocation to repeat its commands) without re-asking the
//! model: the stream that produced the seals died with its attempt.

use headstart::core::model::{AssistantMessage, ContentBlock};
use headstart::store::{RunOutcome, SessionEnd};
use headstart::{AgentStop, Arguments, ToolError, ToolOutput, ToolResult, INTERRUPTED};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// What a call returned, as it crosses from `Tools` back to the session's engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CallOutcome {
    /// The body returned an output.
    Output {
        /// The output's content.
        content: Vec<ContentBlock>,
        /// The output's details.
        #[serde(default)]
        details: Value,
        /// Whether the output asks the loop to stop.
        #[serde(default)]
        terminate: bool,
    },
    /// The body failed, or the tool is unknown to the deployment that ran it.
    Failed {
        /// The error's text.
        message: String,
        /// How the body was stopped when it did not fail on its own (timed out, panicked, cancelled), as the
        /// engine's body runner says ([`headstart::run_body`]); absent for an ordinary failure.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stopped: Option<RunOutcome>,
    },
    /// An earlier attempt of this call may have run the body and died: it is not run again (at most once), and the
    /// call's result is the interrupted error of contract §7.4.
    Interrupted,
}

impl From<ToolResult> for CallOutcome {
    fn from(result: ToolResult) -> Self {
        match result {
            Ok(output) => CallOutcome::Output {
                content: output.content,
                details: output.details,
                terminate: output.terminate,
            },
            Err(error) => CallOutcome::Failed {
                message: error.message,
                stopped: error.stopped,
            },
        }
    }
}

impl From<CallOutcome> for ToolResult {
    fn from(outcome: CallOutcome) -> Self {
        match outcome {
            CallOutcome::Output {
                content,
                details,
                terminate,
            } => Ok(ToolOutput {
                content,
                details,
                terminate,
            }),
            CallOutcome::Failed { message, stopped } => Err(ToolError { message, stopped }),
            CallOutcome::Interrupted => Err(ToolError::new(INTERRUPTED)),
        }
    }
}

impl From<CallOutcome> for headstart::BodyEnd {
    fn from(outcome: CallOutcome) -> Self {
        match outcome {
            CallOutcome::Interrupted => headstart::BodyEnd::Interrupted,
            returned => headstart::BodyEnd::Returned(returned.into()),
        }
    }
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
    use headstart::core::model::ContentBlock;

    #[test]
    fn outcomes_round_trip_through_json_and_back_to_tool_results() {
        let cases = [
            CallOutcome::from(Ok::<_, ToolError>(ToolOutput::text("42").with_terminate(true))),
            CallOutcome::from(Err::<ToolOutput, _>(ToolError::new("no such file"))),
            CallOutcome::Interrupted,
        ];
        let stopped = [RunOutcome::Cancelled, RunOutcome::TimedOut, RunOutcome::Panicked]
            .map(|how| CallOutcome::from(Err::<ToolOutput, _>(ToolError::stopped(how, format!("{how:?}")))));
        for outcome in cases.into_iter().chain(stopped.clone()) {
            let json = serde_json::to_string(&outcome).expect("serialize");
            let back: CallOutcome = serde_json::from_str(&json).expect("deserialize");
            assert_eq!(back, outcome);
        }
        // How a body was stopped crosses the journal whole, so the engine stores it as it would a live call's.
        for outcome in stopped {
            assert_eq!(CallOutcome::from(ToolResult::from(outcome.clone())), outcome);
        }
        let output = ToolResult::from(CallOutcome::Output {
            content: vec![ContentBlock::Text { text: "42".into() }],
            details: Value::Null,
            terminate: true,
        });
        assert_eq!(output, Ok(ToolOutput::text("42").with_terminate(true)));
        assert_eq!(
            ToolResult::from(CallOutcome::Interrupted),
            Err(ToolError::new(INTERRUPTED))
        );
    }

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
