//! The replay report (`scenarios/FORMAT.md`, "Report"): built by serializing these types, keys in the documented
//! order.

use headstart::core::model::{joined_text, ContentBlock, Usage};
use headstart::store::{StoredMessage, ToolRun};
use headstart::{AgentEvent, Message, StopReason};
use serde::{Serialize, Serializer};

/// Milliseconds since the first request. Whole values serialize as integers (virtual time); wall-clock times
/// keep microsecond fractions.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Ms(pub f64);

impl Ms {
    /// From microseconds on the replay clock: whole milliseconds when `whole`, else to the microsecond.
    pub fn from_us(us: i64, whole: bool) -> Self {
        // i64 → f64 is exact for any time a replay can reach (< 2^53 µs).
        #[allow(clippy::cast_precision_loss)]
        let ms = us as f64 / 1000.0;
        Ms(if whole {
            ms.round()
        } else {
            (ms * 1000.0).round() / 1000.0
        })
    }
}

impl Serialize for Ms {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value = self.0;
        if value.fract() == 0.0 && value.abs() < 9.0e15 {
            #[allow(clippy::cast_possible_truncation)]
            return serializer.serialize_i64(value as i64);
        }
        serializer.serialize_f64(value)
    }
}

/// One model request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestReport {
    /// 0-based request index.
    pub request: u32,
    /// When the request began.
    pub started_ms: Ms,
    /// When the response's terminal fragment was handled.
    pub stream_end_ms: Option<Ms>,
    /// When every call of the response had its result.
    pub settled_ms: Option<Ms>,
    /// The response's stop reason.
    pub stop_reason: Option<StopReason>,
    /// The response's error message, if it ended in error/aborted.
    pub error: Option<String>,
}

/// One stored message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TranscriptEntry {
    /// A user prompt.
    User {
        /// Sequence number.
        seq: u64,
        /// `"user"`.
        role: &'static str,
        /// The prompt.
        text: String,
        /// When it became durable.
        at_ms: Ms,
    },
    /// An assistant fragment.
    Assistant {
        /// Sequence number.
        seq: u64,
        /// `"assistant"`.
        role: &'static str,
        /// The model request.
        request: Option<u32>,
        /// Shared by the response's fragments.
        turn_id: String,
        /// Stop reason.
        stop_reason: StopReason,
        /// Content blocks.
        content: Vec<ContentBlock>,
        /// Usage (zero on prefix fragments).
        usage: Usage,
        /// When it became durable.
        at_ms: Ms,
    },
    /// A tool result.
    ToolResult {
        /// Sequence number.
        seq: u64,
        /// `"tool_result"`.
        role: &'static str,
        /// The call answered.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// Whether it failed.
        is_error: bool,
        /// Text content joined with "\n".
        text: String,
        /// Whether it asked the loop to stop.
        terminate: bool,
        /// When it became durable.
        at_ms: Ms,
    },
}

impl TranscriptEntry {
    /// The report shape of a stored message.
    pub fn from_stored(stored: &StoredMessage, whole: bool) -> Self {
        let at_ms = Ms::from_us(stored.at_us, whole);
        let seq = stored.seq;
        match &stored.message {
            Message::User(user) => TranscriptEntry::User {
                seq,
                role: "user",
                text: user.text.clone(),
                at_ms,
            },
            Message::Assistant(assistant) => TranscriptEntry::Assistant {
                seq,
                role: "assistant",
                request: stored.request,
                turn_id: assistant.turn_id.clone(),
                stop_reason: assistant.stop_reason,
                content: assistant.content.clone(),
                usage: assistant.usage,
                at_ms,
            },
            Message::ToolResult(result) => TranscriptEntry::ToolResult {
                seq,
                role: "tool_result",
                tool_call_id: result.tool_call_id.clone(),
                tool_name: result.tool_name.clone(),
                is_error: result.is_error,
                text: joined_text(&result.content),
                terminate: result.terminate,
                at_ms,
            },
        }
    }
}

/// One admitted call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolRunReport {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Model request.
    pub request: u32,
    /// When admitted.
    pub admitted_ms: Ms,
    /// When `execute` began; `null` if it never did.
    pub started_ms: Option<Ms>,
    /// When its result was written; `null` if it never executed.
    pub ended_ms: Option<Ms>,
    /// How it ended.
    pub outcome: Option<headstart::store::RunOutcome>,
}

impl ToolRunReport {
    /// The report shape of a run record.
    pub fn from_run(run: &ToolRun, whole: bool) -> Self {
        let started_ms = run.started_at_us.map(|us| Ms::from_us(us, whole));
        ToolRunReport {
            id: run.call_id.clone(),
            name: run.tool_name.clone(),
            request: run.request,
            admitted_ms: Ms::from_us(run.admitted_at_us, whole),
            started_ms,
            ended_ms: started_ms.and(run.ended_at_us.map(|us| Ms::from_us(us, whole))),
            outcome: run.outcome,
        }
    }
}

/// One agent event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventReport {
    /// When it was emitted.
    pub at_ms: Ms,
    /// Event type.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// For tool events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For message events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// For message updates: the fragment-relative index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
}

impl EventReport {
    /// The report shape of an event emitted at `at_ms`.
    pub fn from_event(event: &AgentEvent, at_ms: Ms) -> Self {
        EventReport {
            at_ms,
            kind: event.type_name(),
            tool_call_id: event.tool_call_id().map(str::to_owned),
            role: event.role().map(|role| role.as_str()),
            index: match event {
                AgentEvent::MessageUpdate { index, .. } => Some(*index),
                _ => None,
            },
        }
    }
}

/// A replay report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// A run-level failure.
    pub error: Option<String>,
    /// Model requests, in order.
    pub requests: Vec<RequestReport>,
    /// Stored messages, in durable write order.
    pub transcript: Vec<TranscriptEntry>,
    /// Admitted calls, in admission order.
    pub tool_runs: Vec<ToolRunReport>,
    /// Agent events, in emitted order.
    pub events: Vec<EventReport>,
    /// When the run ended.
    pub end_ms: Ms,
}

impl Report {
    /// A report for a scenario that could not be run.
    pub fn failed(scenario: impl Into<String>, error: impl Into<String>) -> Self {
        Report {
            scenario: scenario.into(),
            error: Some(error.into()),
            requests: Vec::new(),
            transcript: Vec::new(),
            tool_runs: Vec::new(),
            events: Vec::new(),
            end_ms: Ms(0.0),
        }
    }

    /// The report as pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        // Serializing these types cannot fail: every map key is a string and every number finite.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"));
        text.push('\n');
        text
    }
}
