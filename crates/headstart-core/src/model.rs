//! The conversation model: messages, content blocks, stop reasons and usage.
//!
//! The serde representations are the report shapes of `docs/scenario-format.md` (snake_case names, a `type` tag on
//! content blocks, `tool_call` for tool calls), so transcripts and reports are produced by serializing these types.

use serde::de::Deserializer;
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Why a response ended (contract §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer.
    Stop,
    /// The model hit its output limit.
    Length,
    /// The model stopped to have its tool calls executed.
    ToolUse,
    /// The response failed (provider error, protocol violation, store failure).
    Error,
    /// The response was aborted (external cancellation).
    Aborted,
}

impl StopReason {
    /// The wire name (`stop`, `length`, `tool_use`, `error`, `aborted`).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Stop => "stop",
            StopReason::Length => "length",
            StopReason::ToolUse => "tool_use",
            StopReason::Error => "error",
            StopReason::Aborted => "aborted",
        }
    }

    /// `true` for `error` and `aborted`, the abnormal ends of contract §3.5.
    pub fn is_abnormal(self) -> bool {
        matches!(self, StopReason::Error | StopReason::Aborted)
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Token usage of one response. `total` is always the sum of the four counters.
///
/// Serialized with a computed `total`; when deserializing, missing counters are 0 and any `total` given is ignored
/// in favour of the sum, so a stored value can never disagree with itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Usage {
    /// Prompt tokens.
    pub input: u64,
    /// Generated tokens.
    pub output: u64,
    /// Prompt tokens served from the provider's cache.
    pub cache_read: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write: u64,
}

impl Usage {
    /// The sum of all four counters (saturating).
    pub fn total(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
    }

    /// `true` when every counter is zero (the usage of a prefix fragment, contract §3.2).
    pub fn is_zero(&self) -> bool {
        *self == Usage::default()
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageRepr {
    #[serde(default)]
    input: u64,
    #[serde(default)]
    output: u64,
    #[serde(default)]
    cache_read: u64,
    #[serde(default)]
    cache_write: u64,
    #[serde(default)]
    total: u64,
}

impl Serialize for Usage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        UsageRepr {
            input: self.input,
            output: self.output,
            cache_read: self.cache_read,
            cache_write: self.cache_write,
            total: self.total(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Usage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let repr = UsageRepr::deserialize(deserializer)?;
        Ok(Usage {
            input: repr.input,
            output: repr.output,
            cache_read: repr.cache_read,
            cache_write: repr.cache_write,
        })
    }
}

/// The arguments of a sealed tool call.
///
/// Serialized as the JSON object itself when valid, and as a JSON string holding the verbatim argument text when
/// invalid (contract §2: an invalid call is kept in the transcript with its text stored verbatim; partial JSON is never
/// repaired). Deserializing recomputes the parser message, so it never needs storing.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolArguments {
    /// The argument text parsed as a JSON object.
    Valid(Map<String, Value>),
    /// The argument text was not a JSON object.
    Invalid {
        /// The verbatim argument text.
        raw: String,
        /// The parser's message (or "arguments must be a JSON object").
        error: String,
    },
}

impl ToolArguments {
    /// Parses argument text strictly: empty (or whitespace-only) text is `{}`; anything that is not exactly one JSON
    /// object is [`ToolArguments::Invalid`] with the parser's message.
    pub fn parse(raw: &str) -> Self {
        if raw.trim().is_empty() {
            return ToolArguments::Valid(Map::new());
        }
        match serde_json::from_str::<Value>(raw) {
            Ok(value) => Self::from_value_with_raw(value, raw),
            Err(err) => ToolArguments::Invalid {
                raw: raw.to_owned(),
                error: err.to_string(),
            },
        }
    }

    /// Arguments given as a JSON value (a `toolcall_end` override): an object is valid, anything else invalid.
    pub fn from_value(value: Value) -> Self {
        let raw = value.to_string();
        Self::from_value_with_raw(value, &raw)
    }

    fn from_value_with_raw(value: Value, raw: &str) -> Self {
        match value {
            Value::Object(map) if nested_deeper_than(&map, MAX_ARGUMENT_DEPTH) => ToolArguments::Invalid {
                raw: raw.to_owned(),
                error: format!("arguments are nested more than {MAX_ARGUMENT_DEPTH} levels deep"),
            },
            Value::Object(map) => ToolArguments::Valid(map),
            _ => ToolArguments::Invalid {
                raw: raw.to_owned(),
                error: "arguments must be a JSON object".to_owned(),
            },
        }
    }

    /// The parsed object, if valid.
    pub fn as_object(&self) -> Option<&Map<String, Value>> {
        match self {
            ToolArguments::Valid(map) => Some(map),
            ToolArguments::Invalid { .. } => None,
        }
    }

    /// The arguments as a JSON value: the object when valid, the raw text as a string when invalid.
    pub fn to_value(&self) -> Value {
        match self {
            ToolArguments::Valid(map) => Value::Object(map.clone()),
            ToolArguments::Invalid { raw, .. } => Value::String(raw.clone()),
        }
    }
}

impl Default for ToolArguments {
    fn default() -> Self {
        ToolArguments::Valid(Map::new())
    }
}

impl Serialize for ToolArguments {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolArguments::Valid(map) => map.serialize(serializer),
            ToolArguments::Invalid { raw, .. } => serializer.serialize_str(raw),
        }
    }
}

/// The deepest nesting of objects and arrays that valid tool-call arguments may have, counting the arguments object
/// itself as level 1: 64. Deeper arguments make the call invalid (kept verbatim, answered with an error), so every
/// stored message stays well within `serde_json`'s recursion limit (128 levels) when it is read back: a valid object
/// nested 126 levels deep parses from a delta-log line, but inside a stored message it would not load again.
pub const MAX_ARGUMENT_DEPTH: usize = 64;

/// `true` when `map`, counted as level 1, has objects or arrays nested deeper than `limit`. Iterative, so it cannot
/// overflow the stack whatever the value.
fn nested_deeper_than(map: &Map<String, Value>, limit: usize) -> bool {
    let mut pending: Vec<(&Value, usize)> = map.values().map(|value| (value, 2)).collect();
    while let Some((value, depth)) = pending.pop() {
        if !(value.is_array() || value.is_object()) {
            continue;
        }
        if depth > limit {
            return true;
        }
        match value {
            Value::Array(items) => pending.extend(items.iter().map(|child| (child, depth + 1))),
            Value::Object(fields) => pending.extend(fields.values().map(|child| (child, depth + 1))),
            _ => {}
        }
    }
    false
}

impl<'de> Deserialize<'de> for ToolArguments {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(deserializer)? {
            Value::String(raw) => match ToolArguments::parse(&raw) {
                // A string that happens to hold a JSON object was still stored as invalid text: keep it invalid.
                ToolArguments::Valid(_) => ToolArguments::Invalid {
                    raw,
                    error: "arguments must be a JSON object".to_owned(),
                },
                invalid => invalid,
            },
            other => ToolArguments::from_value(other),
        })
    }
}

/// A tool call content block: `{id, name, arguments}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The provider's call id, unique within a response.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The sealed arguments.
    pub arguments: ToolArguments,
    /// The provider's model went on without this call's result (its `toolcall_start` carried `provider_async`:
    /// OpenAI Responses' `async: true` call item); sent back with the call in later requests.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub provider_async: bool,
}

/// One block of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Model reasoning, with the provider's optional signature.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// An opaque provider signature that must be sent back verbatim.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A tool call.
    ToolCall(ToolCall),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// The tool call, if this block is one.
    pub fn as_tool_call(&self) -> Option<&ToolCall> {
        match self {
            ContentBlock::ToolCall(call) => Some(call),
            _ => None,
        }
    }

    /// The text, if this block is a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text { text } => Some(text),
            _ => None,
        }
    }
}

/// Joins the text blocks of `content` with `"\n"` (the report's `text` field).
pub fn joined_text(content: &[ContentBlock]) -> String {
    let mut out = String::new();
    for text in content.iter().filter_map(ContentBlock::as_text) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(text);
    }
    out
}

/// A user prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserMessage {
    /// The prompt text.
    pub text: String,
}

impl UserMessage {
    /// A user message with this text.
    pub fn new(text: impl Into<String>) -> Self {
        UserMessage { text: text.into() }
    }
}

/// An assistant message: a whole response, or one fragment of it as stored in the transcript (contract §1, §3.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssistantMessage {
    /// Shared by every fragment of one response: the provider's response id, or a generated UUIDv7.
    pub turn_id: String,
    /// `tool_use` for prefix fragments; the provider's reason for the terminal fragment.
    pub stop_reason: StopReason,
    /// The content blocks, in source order.
    pub content: Vec<ContentBlock>,
    /// Zero for prefix fragments; the response's usage on the terminal fragment.
    pub usage: Usage,
    /// The model that produced the response, if the provider said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The error message of an `error`/`aborted` response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
}

impl AssistantMessage {
    /// The tool calls of this message, in source order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(ContentBlock::as_tool_call)
    }
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResultMessage {
    /// The id of the call this answers.
    pub tool_call_id: String,
    /// The tool's name as the model called it.
    pub tool_name: String,
    /// What the model sees.
    pub content: Vec<ContentBlock>,
    /// Structured data for the application (not sent to the model).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub details: Value,
    /// Whether the call failed.
    pub is_error: bool,
    /// Whether the result asks the agent loop to stop (contract §5.6).
    #[serde(default)]
    pub terminate: bool,
    /// A provider-async result written while request N's response streamed (contract §3.7.5): the model first sees
    /// it in a later request, and the canonical context places it after that response. `None` for every other result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_during: Option<u32>,
}

impl ToolResultMessage {
    /// An error result with this text (immediate outcomes, cancellations, "not executed").
    pub fn error(call: &ToolCall, text: impl Into<String>) -> Self {
        ToolResultMessage {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: vec![ContentBlock::text(text)],
            details: Value::Null,
            is_error: true,
            terminate: false,
            ready_during: None,
        }
    }

    /// The text content joined with `"\n"`.
    pub fn text(&self) -> String {
        joined_text(&self.content)
    }
}

/// A transcript message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// A user prompt.
    User(UserMessage),
    /// An assistant message or fragment.
    Assistant(AssistantMessage),
    /// A tool result.
    ToolResult(ToolResultMessage),
}

impl Message {
    /// The role name (`user`, `assistant`, `tool_result`).
    pub fn role(&self) -> &'static str {
        match self {
            Message::User(_) => "user",
            Message::Assistant(_) => "assistant",
            Message::ToolResult(_) => "tool_result",
        }
    }
}

#[cfg(test)]
mod tests;
