//! The replay report (`docs/scenario-format.md`, "Report"): built by serializing these types, keys in the documented
//! order, and read back by deserializing them (`Report::from_json`), so the schema is declared once. Every type
//! denies unknown keys: a report whose keys were renamed fails to load instead of reading as empty.

use headstart::core::model::{joined_text, ContentBlock, Usage};
use headstart::store::{StoredMessage, ToolRun};
use headstart::{AgentEvent, Message, StopReason};
use serde::de::{Error as _, Unexpected};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::json_path;

/// Milliseconds since the first request. Whole values serialize as integers (virtual time); wall-clock times
/// keep microsecond fractions.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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

/// The `role` key of each [`TranscriptEntry`] variant: a unit type that serializes as the role's name and
/// deserializes only from it, so an entry is read back as the variant its role names.
macro_rules! role_tag {
    ($(#[$doc:meta])* $tag:ident = $name:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $tag;

        impl Serialize for $tag {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str($name)
            }
        }

        impl<'de> Deserialize<'de> for $tag {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let role = String::deserialize(deserializer)?;
                if role == $name {
                    Ok($tag)
                } else {
                    Err(D::Error::invalid_value(Unexpected::Str(&role), &concat!("\"", $name, "\"")))
                }
            }
        }
    };
}

role_tag!(
    /// `"user"`.
    UserRole = "user"
);
role_tag!(
    /// `"assistant"`.
    AssistantRole = "assistant"
);
role_tag!(
    /// `"tool_result"`.
    ToolResultRole = "tool_result"
);

/// One stored message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum TranscriptEntry {
    /// A user prompt.
    User {
        /// Sequence number.
        seq: u64,
        /// `"user"`.
        role: UserRole,
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
        role: AssistantRole,
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
        role: ToolResultRole,
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
                role: UserRole,
                text: user.text.clone(),
                at_ms,
            },
            Message::Assistant(assistant) => TranscriptEntry::Assistant {
                seq,
                role: AssistantRole,
                request: stored.request,
                turn_id: assistant.turn_id.clone(),
                stop_reason: assistant.stop_reason,
                content: assistant.content.clone(),
                usage: assistant.usage,
                at_ms,
            },
            Message::ToolResult(result) => TranscriptEntry::ToolResult {
                seq,
                role: ToolResultRole,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventReport {
    /// When it was emitted.
    pub at_ms: Ms,
    /// Event type.
    #[serde(rename = "type")]
    pub kind: String,
    /// For tool events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For message events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// For message updates: the fragment-relative index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
}

impl EventReport {
    /// The report shape of an event emitted at `at_ms`.
    pub fn from_event(event: &AgentEvent, at_ms: Ms) -> Self {
        EventReport {
            at_ms,
            kind: event.type_name().to_owned(),
            tool_call_id: event.tool_call_id().map(str::to_owned),
            role: event.role().map(|role| role.as_str().to_owned()),
            index: match event {
                AgentEvent::MessageUpdate { index, .. } => Some(*index),
                _ => None,
            },
        }
    }
}

/// A replay report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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

    /// Reads a report (`headstart replay` output) back. Every key must be one the report defines and every value
    /// of its type; the error says where the text departs from that.
    pub fn from_json(text: &str) -> Result<Report, ReportError> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let report = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| ReportError {
            path: json_path::text(error.path()),
            message: error.inner().to_string(),
        })?;
        deserializer.end().map_err(|error| ReportError {
            path: "the end".to_owned(),
            message: error.to_string(),
        })?;
        Ok(report)
    }

    /// The report as pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        // Serializing these types cannot fail: every map key is a string and every number finite.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"));
        text.push('\n');
        text
    }
}

/// Why a text is not a replay report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a replay report: at {path}: {message}")]
pub struct ReportError {
    /// Where the text departs from the schema (`transcript[3]`, `the top level`).
    pub path: String,
    /// What is wrong there.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use headstart::core::model::ToolCall;
    use headstart::core::ToolArguments;
    use headstart::store::RunOutcome;

    /// A report with every kind of entry, a wall-clock fraction and every optional field both set and unset.
    fn sample() -> Report {
        let call = ContentBlock::ToolCall(ToolCall {
            id: "c1".to_owned(),
            name: "lookup".to_owned(),
            arguments: ToolArguments::parse(r#"{"q": 1}"#),
            provider_async: false,
        });
        Report {
            scenario: "sample".to_owned(),
            error: None,
            requests: vec![RequestReport {
                request: 0,
                started_ms: Ms(0.0),
                stream_end_ms: Some(Ms(120.25)),
                settled_ms: None,
                stop_reason: Some(StopReason::ToolUse),
                error: None,
            }],
            transcript: vec![
                TranscriptEntry::User {
                    seq: 1,
                    role: UserRole,
                    text: "go".to_owned(),
                    at_ms: Ms(0.0),
                },
                TranscriptEntry::Assistant {
                    seq: 2,
                    role: AssistantRole,
                    request: Some(0),
                    turn_id: "turn-0".to_owned(),
                    stop_reason: StopReason::ToolUse,
                    content: vec![ContentBlock::text("hi"), call],
                    usage: Usage {
                        input: 3,
                        ..Usage::default()
                    },
                    at_ms: Ms(30.0),
                },
                TranscriptEntry::ToolResult {
                    seq: 3,
                    role: ToolResultRole,
                    tool_call_id: "c1".to_owned(),
                    tool_name: "lookup".to_owned(),
                    is_error: false,
                    text: "found".to_owned(),
                    terminate: false,
                    at_ms: Ms(130.5),
                },
            ],
            tool_runs: vec![ToolRunReport {
                id: "c1".to_owned(),
                name: "lookup".to_owned(),
                request: 0,
                admitted_ms: Ms(30.0),
                started_ms: Some(Ms(30.0)),
                ended_ms: Some(Ms(130.5)),
                outcome: Some(RunOutcome::Finished),
            }],
            events: vec![
                EventReport {
                    at_ms: Ms(30.0),
                    kind: "tool_execution_start".to_owned(),
                    tool_call_id: Some("c1".to_owned()),
                    role: None,
                    index: None,
                },
                EventReport {
                    at_ms: Ms(130.5),
                    kind: "message_update".to_owned(),
                    tool_call_id: None,
                    role: Some("assistant".to_owned()),
                    index: Some(1),
                },
            ],
            end_ms: Ms(130.5),
        }
    }

    #[test]
    fn a_report_reads_back_as_itself_and_writes_the_same_bytes() {
        let report = sample();
        let text = report.to_json();
        let read = Report::from_json(&text).expect("a written report reads back");
        assert_eq!(read, report);
        assert_eq!(read.to_json(), text);
        assert!(text.contains("\"at_ms\": 130.5"), "fractions stay fractions: {text}");
        assert!(text.contains("\"at_ms\": 30,"), "whole values stay integers: {text}");
    }

    #[test]
    fn renamed_or_missing_keys_fail_with_their_path() {
        let text = sample().to_json();
        let cases = [
            (
                "\"stream_end_ms\"",
                "\"stream_ended_ms\"",
                "requests[0].stream_ended_ms",
            ),
            ("\"tool_runs\"", "\"runs\"", "runs"),
            ("\"admitted_ms\"", "\"admitted_at\"", "tool_runs[0].admitted_at"),
            (
                "\"tool_call_id\": \"c1\",\n      \"tool_name\"",
                "\"call_id\": \"c1\",\n      \"tool_name\"",
                "transcript[2]",
            ),
            ("\"role\": \"user\"", "\"role\": \"assistant\"", "transcript[0]"),
            (",\n  \"end_ms\": 130.5", "", "the top level"),
        ];
        for (from, to, path) in cases {
            assert!(text.contains(from), "{from} is in the sample");
            let error = Report::from_json(&text.replacen(from, to, 1)).expect_err(to);
            assert_eq!(error.path, path, "{to}: {error}");
        }
        let error = Report::from_json(&format!("{text}{{}}")).expect_err("trailing text");
        assert_eq!(error.path, "the end");
    }
}
