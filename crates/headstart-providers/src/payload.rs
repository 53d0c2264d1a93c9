//! Reading provider JSON payloads: an SSE event's data as JSON with its type, and the fields the converters read.

use serde_json::Value;

use crate::error::ProviderError;
use crate::sse::SseEvent;

/// `a - b`, saturating at zero (provider counters that include their cached part).
pub(crate) fn minus(a: u64, b: u64) -> u64 {
    a.saturating_sub(b)
}

/// A `u64` field of a JSON object, 0 when missing or not a number.
pub(crate) fn count(value: &Value, path: &[&str]) -> u64 {
    let mut current = value;
    for key in path {
        match current.get(key) {
            Some(next) => current = next,
            None => return 0,
        }
    }
    current.as_u64().unwrap_or(0)
}

/// A string field, `None` when missing, null or not a string.
pub(crate) fn string(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Parses an SSE event's data as JSON, naming the event on failure.
pub(crate) fn parse_json(format: &'static str, event: &str, data: &str) -> Result<Value, ProviderError> {
    serde_json::from_str(data).map_err(|err| ProviderError::malformed(format, event, format!("not valid JSON: {err}")))
}

/// The JSON payload of an SSE event with its type: the payload's `type` field, else the SSE event name. `None` for
/// an event without data (a keep-alive) or `[DONE]`.
pub(crate) fn typed_payload(format: &'static str, event: &SseEvent) -> Result<Option<(String, Value)>, ProviderError> {
    let data = event.data.trim();
    if data.is_empty() || data == "[DONE]" {
        return Ok(None);
    }
    let value = parse_json(format, &event.event, data)?;
    let kind = string(&value, "type").unwrap_or_else(|| event.event.clone());
    Ok(Some((kind, value)))
}
