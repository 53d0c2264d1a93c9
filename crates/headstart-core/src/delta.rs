//! Delta events: the normalized stream a model produces (contract §2).
//!
//! Provider wire formats are converted into these by adapters; the engine only ever sees delta events. The serde
//! representation is one JSON object per event with a `type` tag, exactly as in the delta-log format of
//! `docs/scenario-format.md`; unknown fields are rejected so a typo never passes silently.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{StopReason, Usage};
pub use crate::model_error::{ModelError, ModelErrorKind};

/// The stop reasons a normal `done` may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DoneReason {
    /// The model finished.
    Stop,
    /// The output limit was hit.
    Length,
    /// The model wants its tool calls executed.
    ToolUse,
}

/// The stop reasons an abnormal `error` end may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorReason {
    /// The response failed.
    Error,
    /// The response was aborted.
    Aborted,
}

impl From<DoneReason> for StopReason {
    fn from(reason: DoneReason) -> Self {
        match reason {
            DoneReason::Stop => StopReason::Stop,
            DoneReason::Length => StopReason::Length,
            DoneReason::ToolUse => StopReason::ToolUse,
        }
    }
}

impl From<ErrorReason> for StopReason {
    fn from(reason: ErrorReason) -> Self {
        match reason {
            ErrorReason::Error => StopReason::Error,
            ErrorReason::Aborted => StopReason::Aborted,
        }
    }
}

/// One event of a model's response stream (contract §2).
///
/// `index` is the absolute position of the block in the response's full content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum DeltaEvent {
    /// The response begins.
    Start {
        /// The model that answers, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The provider's response id; becomes the fragments' `turn_id`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response_id: Option<String>,
    },
    /// A text block opens at `index`.
    TextStart {
        /// Content index.
        index: usize,
    },
    /// Text appended to the open text block at `index`.
    TextDelta {
        /// Content index.
        index: usize,
        /// The text to append.
        delta: String,
    },
    /// The text block at `index` closes.
    TextEnd {
        /// Content index.
        index: usize,
    },
    /// A reasoning block opens at `index`.
    ThinkingStart {
        /// Content index.
        index: usize,
    },
    /// Reasoning text appended to the open block at `index`.
    ThinkingDelta {
        /// Content index.
        index: usize,
        /// The text to append.
        delta: String,
    },
    /// The reasoning block at `index` closes.
    ThinkingEnd {
        /// Content index.
        index: usize,
        /// The provider's signature for the block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A tool call block opens at `index`.
    ToolcallStart {
        /// Content index.
        index: usize,
        /// The call id, unique within the response.
        id: String,
        /// The tool's name.
        name: String,
        /// The provider marks this call early-executable regardless of the tool's own flag.
        #[serde(rename = "async", default, skip_serializing_if = "std::ops::Not::not")]
        early: bool,
        /// The provider says its model goes on without this call's result (OpenAI Responses' `async: true` call
        /// item), which a later request delivers. Kept on the stored call ([`ToolCall::provider_async`]); it does not
        /// make the call early: only the tool's own declaration does, so a provider cannot start a sync tool early.
        ///
        /// [`ToolCall::provider_async`]: crate::ToolCall::provider_async
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        provider_async: bool,
    },
    /// A raw fragment of the call's JSON argument text.
    ToolcallDelta {
        /// Content index.
        index: usize,
        /// The text to append.
        delta: String,
    },
    /// The call at `index` is sealed.
    ToolcallEnd {
        /// Content index.
        index: usize,
        /// When present, replaces the accumulated argument text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<Value>,
    },
    /// The response ended normally.
    Done {
        /// Why it ended.
        stop_reason: DoneReason,
        /// The response's token usage.
        #[serde(default)]
        usage: Usage,
    },
    /// The response ended abnormally.
    Error {
        /// `error` or `aborted`.
        stop_reason: ErrorReason,
        /// What went wrong.
        message: String,
        /// Usage, if the provider reported any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// What kind of failure it was, when the producer said (provider adapters do; logs written before the
        /// field existed, and simulated streams, do not).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<ModelErrorKind>,
    },
}

impl DeltaEvent {
    /// The event's `type` name as written in delta logs.
    pub fn type_name(&self) -> &'static str {
        match self {
            DeltaEvent::Start { .. } => "start",
            DeltaEvent::TextStart { .. } => "text_start",
            DeltaEvent::TextDelta { .. } => "text_delta",
            DeltaEvent::TextEnd { .. } => "text_end",
            DeltaEvent::ThinkingStart { .. } => "thinking_start",
            DeltaEvent::ThinkingDelta { .. } => "thinking_delta",
            DeltaEvent::ThinkingEnd { .. } => "thinking_end",
            DeltaEvent::ToolcallStart { .. } => "toolcall_start",
            DeltaEvent::ToolcallDelta { .. } => "toolcall_delta",
            DeltaEvent::ToolcallEnd { .. } => "toolcall_end",
            DeltaEvent::Done { .. } => "done",
            DeltaEvent::Error { .. } => "error",
        }
    }

    /// The content index the event addresses, if any.
    pub fn index(&self) -> Option<usize> {
        match self {
            DeltaEvent::TextStart { index }
            | DeltaEvent::TextDelta { index, .. }
            | DeltaEvent::TextEnd { index }
            | DeltaEvent::ThinkingStart { index }
            | DeltaEvent::ThinkingDelta { index, .. }
            | DeltaEvent::ThinkingEnd { index, .. }
            | DeltaEvent::ToolcallStart { index, .. }
            | DeltaEvent::ToolcallDelta { index, .. }
            | DeltaEvent::ToolcallEnd { index, .. } => Some(*index),
            DeltaEvent::Start { .. } | DeltaEvent::Done { .. } | DeltaEvent::Error { .. } => None,
        }
    }

    /// A copy of this event addressed to `index` instead (contract §3.4 re-basing).
    pub fn with_index(mut self, new_index: usize) -> Self {
        match &mut self {
            DeltaEvent::TextStart { index }
            | DeltaEvent::TextDelta { index, .. }
            | DeltaEvent::TextEnd { index }
            | DeltaEvent::ThinkingStart { index }
            | DeltaEvent::ThinkingDelta { index, .. }
            | DeltaEvent::ThinkingEnd { index, .. }
            | DeltaEvent::ToolcallStart { index, .. }
            | DeltaEvent::ToolcallDelta { index, .. }
            | DeltaEvent::ToolcallEnd { index, .. } => *index = new_index,
            DeltaEvent::Start { .. } | DeltaEvent::Done { .. } | DeltaEvent::Error { .. } => {}
        }
        self
    }

    /// `true` for `done` and `error`.
    pub fn is_terminal(&self) -> bool {
        matches!(self, DeltaEvent::Done { .. } | DeltaEvent::Error { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_round_trip_through_the_delta_log_shape() {
        let events = vec![
            json!({"type": "start"}),
            json!({"type": "start", "model": "m", "response_id": "r"}),
            json!({"type": "toolcall_start", "index": 1, "id": "c", "name": "n", "async": true}),
            json!({"type": "toolcall_end", "index": 1, "arguments": {"a": 1}}),
            json!({"type": "thinking_end", "index": 0, "signature": "sig"}),
            json!({"type": "done", "stop_reason": "tool_use", "usage": {"input": 1, "output": 2, "cache_read": 0, "cache_write": 0, "total": 3}}),
            json!({"type": "error", "stop_reason": "aborted", "message": "x"}),
            json!({"type": "error", "stop_reason": "error", "message": "x", "kind": "overloaded"}),
            json!({"type": "error", "stop_reason": "error", "message": "x", "kind": {"http": {"status": 429, "retry_after_ms": 2000}}}),
        ];
        for value in events {
            let event: DeltaEvent = serde_json::from_value(value.clone()).unwrap();
            assert_eq!(serde_json::to_value(&event).unwrap(), value);
        }
    }

    #[test]
    fn unknown_fields_and_wrong_reasons_are_rejected() {
        assert!(serde_json::from_value::<DeltaEvent>(json!({"type": "text_start", "index": 0, "x": 1})).is_err());
        assert!(serde_json::from_value::<DeltaEvent>(json!({"type": "done", "stop_reason": "error"})).is_err());
        assert!(
            serde_json::from_value::<DeltaEvent>(json!({"type": "error", "stop_reason": "stop", "message": ""}))
                .is_err()
        );
        assert!(serde_json::from_value::<DeltaEvent>(json!({"type": "bogus"})).is_err());
        assert!(serde_json::from_value::<DeltaEvent>(json!({"type": "text_delta", "index": -1, "delta": ""})).is_err());
    }

    #[test]
    fn rebasing_changes_only_the_index() {
        let event = DeltaEvent::TextDelta {
            index: 7,
            delta: "x".into(),
        };
        assert_eq!(event.clone().with_index(2).index(), Some(2));
        assert_eq!(
            DeltaEvent::Start {
                model: None,
                response_id: None
            }
            .with_index(3)
            .index(),
            None
        );
    }
}
