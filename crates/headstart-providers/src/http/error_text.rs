//! How a failed HTTP exchange is told: the cause chain of a client error, the provider's message in an error body,
//! a header value quoted from the server.

use serde_json::Value;
use tokio::time::Instant;

use crate::wire_error::error_message;

/// How much of an error body is read to find the provider's message.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// How much of a `Location` or `Retry-After` header an error message quotes.
const QUOTED_HEADER_LIMIT: usize = 200;

/// An error with its chain of causes, one line (reqwest's own message hides the cause).
pub(super) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// Reads at most [`ERROR_BODY_LIMIT`] bytes of a body until `until` (lossy UTF-8): what arrived by then.
pub(super) async fn read_limited(mut response: reqwest::Response, until: Instant) -> String {
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_LIMIT {
        match tokio::time::timeout_at(until, response.chunk()).await {
            Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(ERROR_BODY_LIMIT);
    String::from_utf8_lossy(&body).into_owned()
}

/// A header value from the server as an error message quotes it: lossy UTF-8, at most [`QUOTED_HEADER_LIMIT`]
/// characters.
pub(super) fn quoted(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    let mut quoted: String = text.chars().take(QUOTED_HEADER_LIMIT).collect();
    if quoted.len() < text.len() {
        quoted.push('…');
    }
    quoted
}

/// The provider's error message from an error body: `{"error": {"message": ...}}` (OpenAI, Anthropic, Gemini, also
/// wrapped in an array by Gemini), else the body's start.
pub(super) fn provider_message(body: &str) -> String {
    let value: Option<Value> = serde_json::from_str(body).ok();
    let value = match value {
        Some(Value::Array(items)) => items.into_iter().next(),
        other => other,
    };
    match value {
        Some(value) => {
            let error = value.get("error").unwrap_or(&value);
            error_message(error)
        }
        None => {
            let text: String = body.trim().chars().take(500).collect();
            if text.is_empty() {
                "(empty body)".to_owned()
            } else {
                text
            }
        }
    }
}
