//! Agent events: what the engine tells its consumer, as one ordered stream (contract §6).
//!
//! Guarantees, for one stream:
//! 1. a `MessageEnd` is emitted only after its message is durable;
//! 2. per fragment: `MessageStart` → `MessageUpdate`* → `MessageEnd`, and fragment k ends before k+1 starts;
//! 3. a prefix's `MessageEnd` precedes its calls' `ToolExecutionStart`;
//! 4. per call: `ToolExecutionStart` → `ToolExecutionUpdate`* → `ToolExecutionEnd` → its result's
//!    `MessageStart`/`MessageEnd`;
//! 5. tool events interleave with later model events; results become durable in completion order;
//! 6. `ResponseEnd` follows every result of the response; `AgentEnd` is last and appears once.
//!
//! Reports and the contract name events by their wire names ([`AgentEvent::type_name`]): `ResponseStart` and
//! `ResponseEnd` are `turn_start` and `turn_end` there, names kept so that stored reports stay byte-identical.
//!
//! Events are observation: the engine never waits for its consumer (contract §6); events queue in order, none lost.
//! `MessageEnd` follows the message's durable write; when that write failed, its `seq` is `None` and the message is
//! shown but not durable.

use std::sync::Arc;

use headstart_core::{DeltaEvent, Message, StopReason, ToolCall};
use headstart_store::{RunOutcome, SessionId};
use serde::{Deserialize, Serialize};

use crate::tools::output::ToolOutput;

/// Who a message is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A user prompt.
    User,
    /// An assistant fragment.
    Assistant,
    /// A tool result.
    ToolResult,
}

impl Role {
    /// The role of a message.
    pub fn of(message: &Message) -> Role {
        match message {
            Message::User(_) => Role::User,
            Message::Assistant(_) => Role::Assistant,
            Message::ToolResult(_) => Role::ToolResult,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::ToolResult => "tool_result",
        }
    }
}

/// How a response ended, as the loop sees it (carried by [`AgentEvent::ResponseEnd`]). Non-exhaustive: it grows with
/// what the loop decides on; outside this crate, make one with [`ResponseOutcome::new`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ResponseOutcome {
    /// The response's stop reason.
    pub stop_reason: StopReason,
    /// The error message of an `error`/`aborted` response.
    pub error: Option<String>,
    /// Number of calls admitted (they executed or failed in preparation).
    pub admitted: usize,
    /// Every non-empty batch terminated (contract §5.6).
    pub terminated: bool,
    /// A store write failed during the response; the loop must stop.
    pub store_failure: Option<String>,
    /// Prefix fragments committed before the terminal one (contract §3.3): work that a failed stream leaves behind.
    pub committed_prefixes: usize,
    /// That failure was a fenced write (contract §7.5.2): the worker no longer holds the session's lease.
    pub fenced: bool,
    /// Provider-async calls still running when the response ended, by id in source order (contract §3.7.5): the
    /// agent loop delivers each result in the first request after it is ready.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
}

impl ResponseOutcome {
    /// A response that ended with `stop_reason` after admitting `admitted` calls, without error, termination or
    /// store failure (set those fields afterwards).
    pub fn new(stop_reason: StopReason, admitted: usize) -> Self {
        ResponseOutcome {
            stop_reason,
            error: None,
            admitted,
            terminated: false,
            store_failure: None,
            committed_prefixes: 0,
            fenced: false,
            pending: Vec::new(),
        }
    }

    /// contract §3.6: another request follows when a call was admitted, unless every batch terminated or the response
    /// ended in `error`/`aborted`.
    pub fn wants_continuation(&self) -> bool {
        self.admitted > 0 && !self.terminated && !self.stop_reason.is_abnormal() && self.store_failure.is_none()
    }

    /// contract §3.6.4: the response failed (`error`, not a cancellation nor a store failure) after at least one prefix
    /// was committed, so a policy that continues after failed streams may make another request.
    pub fn failed_after_progress(&self) -> bool {
        self.stop_reason == StopReason::Error
            && self.store_failure.is_none()
            && self.committed_prefixes > 0
            && !self.terminated
    }
}

/// Why the agent loop stopped. It serializes as `{"reason": "completed"}` or `{"reason": "error", "message": "…"}`
/// and reads back from that form (a journal or a report that carries it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", content = "message", rename_all = "snake_case")]
pub enum AgentStop {
    /// The model answered without needing tools (no continuation).
    Completed,
    /// Every batch of the last response asked to terminate.
    Terminated,
    /// The last response ended in `error`/`aborted`.
    ResponseFailed,
    /// The caller cancelled.
    Cancelled,
    /// [`EngineConfig::max_requests`](crate::EngineConfig::max_requests) requests were made. Reported as
    /// `max_turns`, its name before issue 20.
    #[serde(rename = "max_turns")]
    MaxRequests,
    /// The run could not go on: a store failure, or a model request that could not be made.
    Error(String),
    /// A write was fenced (contract §7.5.2): another worker holds the session now, or it was finished. This worker
    /// must stop the session without retrying; nothing of the refused write was stored.
    Fenced(String),
}

impl AgentStop {
    /// Whether the loop stopped as a finished agent does: the model answered, a tool ended the loop, or it reached
    /// its request limit. A host that runs sessions for a queue (a fleet's worker, a Restate turn) completes the
    /// session on these, and on these alone; the one definition both use.
    pub fn is_finished(&self) -> bool {
        matches!(
            self,
            AgentStop::Completed | AgentStop::Terminated | AgentStop::MaxRequests
        )
    }

    /// The name [`AgentStop::MaxRequests`] had before issue 20.
    #[deprecated(note = "renamed to `AgentStop::MaxRequests`: the limit counts model requests")]
    #[allow(non_upper_case_globals)]
    pub const MaxTurns: AgentStop = AgentStop::MaxRequests;
}

/// The name [`ResponseOutcome`] had before issue 20.
#[deprecated(note = "renamed to `ResponseOutcome`")]
pub type TurnOutcome = ResponseOutcome;

/// One event of an agent run. Non-exhaustive: new kinds of events may be added, so a `match` needs a `_` arm.
///
/// It serializes as one JSON object: `type` is its wire name ([`AgentEvent::type_name`]) and the variant's fields
/// sit beside it under their own names (`{"type": "tool_execution_start", "call": {...}}`). The Python package's
/// events (`Event.to_dict()`) are this serialization.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// The run began.
    AgentStart {
        /// The session.
        session: SessionId,
    },
    /// The response to a model request began (`turn_start` in reports).
    #[serde(rename = "turn_start")]
    ResponseStart {
        /// The 0-based number of the request it answers.
        request: u32,
    },
    /// A message began: a user prompt, an assistant fragment, or a tool result.
    MessageStart {
        /// Its role.
        role: Role,
    },
    /// A delta of the current assistant fragment, re-based to the fragment (contract §3.4).
    MessageUpdate {
        /// Fragment-relative content index.
        index: usize,
        /// The delta event, with its index re-based.
        delta: DeltaEvent,
    },
    /// A message is complete: durable, with its sequence number, when `seq` is `Some`. `None` means the store
    /// failed to write it (the run then stops with an error): it is shown, not stored.
    MessageEnd {
        /// Its per-session sequence number, or `None` if the store failed to write it.
        seq: Option<u64>,
        /// The message as stored.
        #[serde(serialize_with = "shared")]
        message: Arc<Message>,
    },
    /// A call starts executing (or, for a call that never executes, is about to get its result).
    ToolExecutionStart {
        /// The call.
        #[serde(serialize_with = "shared")]
        call: Arc<ToolCall>,
    },
    /// A partial result of a running call.
    ToolExecutionUpdate {
        /// The call id.
        tool_call_id: String,
        /// The partial result.
        update: ToolOutput,
    },
    /// A call ended.
    ToolExecutionEnd {
        /// The call id.
        tool_call_id: String,
        /// Whether the result is an error.
        is_error: bool,
        /// How it ended; `None` for calls never admitted ("not executed", contract §3.5).
        outcome: Option<RunOutcome>,
    },
    /// A response and all its calls are done (`turn_end` in reports).
    #[serde(rename = "turn_end")]
    ResponseEnd {
        /// The 0-based number of the request it answers.
        request: u32,
        /// How it ended.
        outcome: ResponseOutcome,
    },
    /// The run is over; always the last event.
    AgentEnd {
        /// Why.
        stop: AgentStop,
    },
}

/// Serializes what an `Arc` points to (serde's own `Arc` support needs its `rc` feature, which the workspace leaves
/// off).
fn shared<T: Serialize, S: serde::Serializer>(value: &Arc<T>, serializer: S) -> Result<S::Ok, S::Error> {
    value.as_ref().serialize(serializer)
}

impl AgentEvent {
    /// The event's name (`agent_start`, `message_update`, …), as in reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            AgentEvent::AgentStart { .. } => "agent_start",
            AgentEvent::ResponseStart { .. } => "turn_start",
            AgentEvent::MessageStart { .. } => "message_start",
            AgentEvent::MessageUpdate { .. } => "message_update",
            AgentEvent::MessageEnd { .. } => "message_end",
            AgentEvent::ToolExecutionStart { .. } => "tool_execution_start",
            AgentEvent::ToolExecutionUpdate { .. } => "tool_execution_update",
            AgentEvent::ToolExecutionEnd { .. } => "tool_execution_end",
            AgentEvent::ResponseEnd { .. } => "turn_end",
            AgentEvent::AgentEnd { .. } => "agent_end",
        }
    }

    /// The call id a tool event is about.
    pub fn tool_call_id(&self) -> Option<&str> {
        match self {
            AgentEvent::ToolExecutionStart { call } => Some(&call.id),
            AgentEvent::ToolExecutionUpdate { tool_call_id, .. }
            | AgentEvent::ToolExecutionEnd { tool_call_id, .. } => Some(tool_call_id),
            _ => None,
        }
    }

    /// The role a message event is about.
    pub fn role(&self) -> Option<Role> {
        match self {
            AgentEvent::MessageStart { role } => Some(*role),
            AgentEvent::MessageEnd { message, .. } => Some(Role::of(message)),
            AgentEvent::MessageUpdate { .. } => Some(Role::Assistant),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use headstart_core::StopReason;

    use super::*;

    #[test]
    #[allow(deprecated)]
    fn the_names_before_issue_20_still_work_and_reports_keep_their_words() {
        assert!(matches!(AgentStop::MaxRequests, AgentStop::MaxTurns));
        let outcome: TurnOutcome = ResponseOutcome::new(StopReason::Stop, 0);
        assert!(!outcome.wants_continuation());
        let stop = serde_json::to_value(AgentStop::MaxRequests).expect("serializes");
        assert_eq!(stop["reason"], "max_turns");
        let start = AgentEvent::ResponseStart { request: 0 };
        let end = AgentEvent::ResponseEnd { request: 0, outcome };
        assert_eq!((start.type_name(), end.type_name()), ("turn_start", "turn_end"));
    }

    #[test]
    fn a_stop_reads_back_from_its_json_and_only_finished_stops_finish() {
        let stops = [
            AgentStop::Completed,
            AgentStop::Terminated,
            AgentStop::ResponseFailed,
            AgentStop::Cancelled,
            AgentStop::MaxRequests,
            AgentStop::Error("store down".into()),
            AgentStop::Fenced("gone".into()),
        ];
        for stop in stops {
            let json = serde_json::to_value(&stop).expect("serializes");
            let back: AgentStop = serde_json::from_value(json.clone()).expect("deserializes");
            assert_eq!(back, stop, "{json}");
            let finished = matches!(
                stop,
                AgentStop::Completed | AgentStop::Terminated | AgentStop::MaxRequests
            );
            assert_eq!(stop.is_finished(), finished, "{stop:?}");
        }
        let refused: Result<AgentStop, _> = serde_json::from_value(serde_json::json!({"reason": "exploded"}));
        assert!(refused.is_err(), "an unknown stop is refused, not guessed");
    }

    #[test]
    fn an_event_serializes_as_its_wire_name_beside_its_fields() {
        let start = serde_json::to_value(AgentEvent::ResponseStart { request: 2 }).expect("serializes");
        assert_eq!(start, serde_json::json!({"type": "turn_start", "request": 2}));
        let end = AgentEvent::ToolExecutionEnd {
            tool_call_id: "c1".into(),
            is_error: true,
            outcome: Some(headstart_store::RunOutcome::TimedOut),
        };
        let end = serde_json::to_value(end).expect("serializes");
        assert_eq!(
            end,
            serde_json::json!({"type": "tool_execution_end", "tool_call_id": "c1", "is_error": true, "outcome": "timed_out"})
        );
        let stop = serde_json::to_value(AgentEvent::AgentEnd {
            stop: AgentStop::Cancelled,
        })
        .expect("serializes");
        assert_eq!(
            stop,
            serde_json::json!({"type": "agent_end", "stop": {"reason": "cancelled"}})
        );
    }
}
