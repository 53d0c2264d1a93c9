//! Provider error objects, as the four wire formats send them in a stream or an error body: their message for users,
//! and their kind, parsed from the documented type fields.
//!
//! OpenAI sends `{"message", "type", "code"}`, Anthropic `{"type": "error", "error": {"type", "message"}}`, Gemini
//! `{"code": 503, "message", "status": "UNAVAILABLE"}`. The kind comes from those type, code and status fields only,
//! never from the message text.

use headstart_core::ModelErrorKind;
use serde_json::Value;

/// The documented error types that mean "the provider is overloaded, rate-limited or failed on its side": Anthropic's
/// `overloaded_error`, `rate_limit_error` and `api_error`; OpenAI's `server_error` and `rate_limit_exceeded`;
/// Gemini's `RESOURCE_EXHAUSTED`, `UNAVAILABLE` and `INTERNAL`.
const TRANSIENT_TYPES: [&str; 8] = [
    "overloaded_error",
    "rate_limit_error",
    "api_error",
    "server_error",
    "rate_limit_exceeded",
    "RESOURCE_EXHAUSTED",
    "UNAVAILABLE",
    "INTERNAL",
];

/// The message of an OpenAI-style error object (`{"message": ..., "type": ..., "code": ...}`) or its JSON.
pub(crate) fn error_message(error: &Value) -> String {
    match error {
        Value::String(text) => text.clone(),
        _ => {
            let message = error.get("message").and_then(Value::as_str);
            let code = ["code", "type", "status"]
                .iter()
                .find_map(|key| error.get(*key).filter(|v| !v.is_null()))
                .map(|v| v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string()));
            match (message, code) {
                (Some(message), Some(code)) => format!("{message} ({code})"),
                (Some(message), None) => message.to_owned(),
                _ => error.to_string(),
            }
        }
    }
}

/// The kind of a provider error object: [`ModelErrorKind::Overloaded`] when its `type`, `code` or `status` is one
/// of the documented transient types, or a numeric `code` is 429 or 5xx (Gemini's HTTP-style codes, 529 for an
/// overloaded Anthropic); [`ModelErrorKind::Provider`] for every other error the provider reports.
pub(crate) fn error_kind(error: &Value) -> ModelErrorKind {
    let transient = ["type", "code", "status"].iter().any(|key| match error.get(*key) {
        Some(Value::String(name)) => TRANSIENT_TYPES.contains(&name.as_str()),
        Some(Value::Number(code)) => code
            .as_u64()
            .is_some_and(|code| code == 429 || (500..600).contains(&code)),
        _ => false,
    });
    if transient {
        ModelErrorKind::Overloaded
    } else {
        ModelErrorKind::Provider
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_come_from_the_type_fields_not_the_message() {
        let overloaded = [
            json!({"type": "overloaded_error", "message": "Overloaded"}),
            json!({"type": "rate_limit_error", "message": "slow down"}),
            json!({"code": "rate_limit_exceeded", "message": "slow down"}),
            json!({"code": "server_error", "message": "boom"}),
            json!({"code": 503, "message": "The model is busy", "status": "UNAVAILABLE"}),
            json!({"code": 529, "message": "anything"}),
        ];
        for error in overloaded {
            assert_eq!(error_kind(&error), ModelErrorKind::Overloaded, "{error}");
        }
        let permanent = [
            json!({"type": "invalid_request_error", "message": "overloaded"}),
            json!({"code": 400, "message": "timed out", "status": "INVALID_ARGUMENT"}),
            json!("connection error"),
            json!({"type": "insufficient_quota", "message": "rate limit"}),
        ];
        for error in permanent {
            assert_eq!(error_kind(&error), ModelErrorKind::Provider, "{error}");
        }
    }

    #[test]
    fn messages_name_their_code() {
        assert_eq!(
            error_message(&json!({"message": "bad key", "type": "invalid_request_error"})),
            "bad key (invalid_request_error)"
        );
        assert_eq!(error_message(&json!({"message": "oops", "code": 400})), "oops (400)");
        assert_eq!(error_message(&json!("plain")), "plain");
        assert_eq!(error_message(&json!({"detail": 1})), "{\"detail\":1}");
    }
}
