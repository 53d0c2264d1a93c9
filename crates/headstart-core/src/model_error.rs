//! Why a model stream failed: [`ModelError`], a message for users with a typed [`ModelErrorKind`] for programs.
//!
//! A provider adapter says what kind of failure it saw (a dropped connection, an HTTP status, an overloaded provider,
//! a malformed stream, an abort); whoever decides what to do next (the providers' retry policy, an application)
//! reads the kind, never the message text. The message is complete on its own: it is what the transcript stores and
//! the user reads, so it already names the cause; [`std::error::Error::source`] gives the typed cause to programs.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What kind of failure ended a model stream (or kept it from starting).
///
/// The serde form is what a delta log's `error` event writes in its optional `kind` field: `"transport"`,
/// `"deadline"`, `{"http": {"status": 503, "retry_after_ms": 1500}}`, `"overloaded"`, `"provider"`, `"protocol"`,
/// `"aborted"` or `"other"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// The connection failed or stalled: refused, reset, a failed read, no response headers or no event within
    /// their limit. Another attempt may succeed.
    Transport,
    /// The response did not finish within the caller's limit on the whole response. The limit is the caller's, so
    /// trying again would only multiply it.
    Deadline,
    /// The provider answered with an HTTP error status (or a redirect, which provider requests never follow).
    Http {
        /// The status code.
        status: u16,
        /// How long the server asked to wait before trying again (`Retry-After`, `retry-after-ms` or the
        /// provider's rate-limit reset headers), if it said.
        #[serde(
            rename = "retry_after_ms",
            default,
            skip_serializing_if = "Option::is_none",
            with = "milliseconds"
        )]
        retry_after: Option<Duration>,
    },
    /// The provider reported, in its stream, that it is overloaded, rate-limited or failed on its side (its error
    /// type says so: Anthropic's `overloaded_error`, OpenAI's `server_error`, Gemini's `UNAVAILABLE`, ...). A later
    /// attempt may succeed.
    Overloaded,
    /// The provider reported an error that trying again will not fix: an invalid request, a refusal, its content
    /// filter, a stop reason that means failure.
    Provider,
    /// The provider's data broke its wire format: malformed JSON or SSE, an impossible event sequence, an event over
    /// the size limit, an answer that is not a stream, a body that ended before the format's terminal event.
    Protocol,
    /// The response was aborted (cancelled) rather than failed; the engine ends it as `aborted`.
    Aborted,
    /// Anything else: a misconfigured client, a request that could not be built, a simulated or wrapped model's own
    /// failure.
    Other,
}

impl ModelErrorKind {
    /// Whether the failure is the provider's side, not the request's: a transport failure, an overloaded provider,
    /// or an HTTP status worth trying again ([`is_transient_status`]). Another attempt, later, may succeed: the
    /// providers' retries try one on this alone, and a fleet's worker releases a session back to its queue rather
    /// than failing it.
    pub fn is_transient(self) -> bool {
        match self {
            ModelErrorKind::Transport | ModelErrorKind::Overloaded => true,
            ModelErrorKind::Http { status, .. } => is_transient_status(status),
            // Deadline (the caller's own limit), Provider, Protocol, Aborted, Other.
            _ => false,
        }
    }
}

/// Whether an HTTP status is the provider's passing trouble: 408 (timeout), 409 (lock conflict), 429 (rate limit),
/// 5xx (including Anthropic's 529 "overloaded").
pub fn is_transient_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// A failure reported by a model stream instead of an event (transport errors, provider errors).
///
/// The engine ends the response as `error` (or `aborted` when the kind is [`ModelErrorKind::Aborted`]) with
/// [`ModelError::message`]. Two errors are equal when their kind and message are; the source is not compared.
#[derive(Clone)]
pub struct ModelError {
    kind: ModelErrorKind,
    message: String,
    /// `Arc` keeps the error `Clone` (streams hand errors on) whatever the source is.
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl ModelError {
    /// A failure of kind [`ModelErrorKind::Other`] with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self::with_kind(ModelErrorKind::Other, message)
    }

    /// An abort ([`ModelErrorKind::Aborted`]) with this message.
    pub fn aborted(message: impl Into<String>) -> Self {
        Self::with_kind(ModelErrorKind::Aborted, message)
    }

    /// A transport failure ([`ModelErrorKind::Transport`]) with this message.
    pub fn transport(message: impl Into<String>) -> Self {
        Self::with_kind(ModelErrorKind::Transport, message)
    }

    /// A failure of `kind` with this message.
    pub fn with_kind(kind: ModelErrorKind, message: impl Into<String>) -> Self {
        ModelError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// The same error with `source` as its cause ([`std::error::Error::source`]).
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// The same error (kind and source) told with another message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ModelErrorKind {
        self.kind
    }

    /// What went wrong, in words a user can act on.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The message, consuming the error.
    pub fn into_message(self) -> String {
        self.message
    }

    /// `true` when the stream was aborted rather than failed.
    pub fn is_aborted(&self) -> bool {
        self.kind == ModelErrorKind::Aborted
    }
}

impl fmt::Debug for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelError")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}

impl PartialEq for ModelError {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for ModelError {}

/// `Option<Duration>` as whole milliseconds (what a delta log writes for `retry_after_ms`).
mod milliseconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(value: &Option<Duration>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => serializer.serialize_some(&u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(deserializer)?.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_have_a_stable_serde_form() {
        let cases = [
            (ModelErrorKind::Transport, json!("transport")),
            (ModelErrorKind::Overloaded, json!("overloaded")),
            (
                ModelErrorKind::Http {
                    status: 503,
                    retry_after: Some(Duration::from_millis(1500)),
                },
                json!({"http": {"status": 503, "retry_after_ms": 1500}}),
            ),
            (
                ModelErrorKind::Http {
                    status: 400,
                    retry_after: None,
                },
                json!({"http": {"status": 400}}),
            ),
        ];
        for (kind, value) in cases {
            assert_eq!(serde_json::to_value(kind).unwrap(), value);
            assert_eq!(serde_json::from_value::<ModelErrorKind>(value).unwrap(), kind);
        }
        assert!(serde_json::from_value::<ModelErrorKind>(json!("bogus")).is_err());
    }

    #[test]
    fn the_source_is_kept_and_not_compared() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        let error = ModelError::transport("connection error: reset by peer").with_source(io);
        let source = std::error::Error::source(&error).unwrap();
        assert_eq!(source.to_string(), "reset by peer");
        assert_eq!(error, ModelError::transport("connection error: reset by peer"));
        assert_ne!(error, ModelError::new("connection error: reset by peer"));
        let renamed = error.with_message("another text");
        assert_eq!(renamed.kind(), ModelErrorKind::Transport);
        assert!(std::error::Error::source(&renamed).is_some());
        assert!(ModelError::aborted("stop").is_aborted());
    }
}
