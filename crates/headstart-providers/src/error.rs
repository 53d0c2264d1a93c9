//! The crate's error type, and the kind of [`ModelError`] each of its variants is.

use headstart_core::{ModelError, ModelErrorKind};

/// Why provider data could not be converted or a provider could not be reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// An SSE event's payload is not what the wire format promises (bad JSON, a missing required field).
    #[error("malformed {format} event {event:?}: {message}")]
    Malformed {
        /// The wire format's name.
        format: &'static str,
        /// The SSE event type (or `message`).
        event: String,
        /// What is wrong with it.
        message: String,
    },
    /// The provider broke its own protocol (a fragment for a call it already ended, a reused call id, ...).
    #[error("{format} protocol violation: {message}")]
    Protocol {
        /// The wire format's name.
        format: &'static str,
        /// What happened.
        message: String,
    },
    /// The byte stream is not valid SSE (invalid UTF-8, an unparseable line).
    #[error("invalid SSE stream: {0}")]
    Sse(String),
    /// Reading the body failed (connection reset, timeout).
    #[error("connection error while streaming: {0}")]
    Transport(String),
    /// A recorded capture could not be read.
    #[error("capture: {0}")]
    Capture(String),
    /// The provider answered with an HTTP error status.
    #[error("HTTP {status} from {url}: {message}")]
    Http {
        /// The status code.
        status: u16,
        /// The request URL (without query string, so no key leaks).
        url: String,
        /// The provider's error message, or the body's start.
        message: String,
        /// How long the server asked to wait before trying again, from its headers (see [`crate::retry`]).
        retry_after: Option<std::time::Duration>,
    },
    /// The client is misconfigured (missing API key, bad URL, unknown format name).
    #[error("configuration: {0}")]
    Config(String),
    /// The response (headers and whole body) did not finish within `HttpModelConfig::response_timeout`, whatever
    /// arrived meanwhile (events, keep-alive comments).
    #[error("the response did not finish within {} s (--response-timeout)", .limit.as_secs_f64())]
    ResponseTimeout {
        /// The configured limit.
        limit: std::time::Duration,
    },
    /// No SSE event arrived for `HttpModelConfig::idle_timeout` (comments and unfinished events do not count).
    #[error("the stream timed out: no event for {} s (idle timeout)", .limit.as_secs_f64())]
    IdleTimeout {
        /// The configured limit.
        limit: std::time::Duration,
    },
    /// One SSE line, or one event, is larger than [`crate::sse::MAX_EVENT_BYTES`].
    #[error("an SSE line or event exceeds the {} MiB limit: the stream is refused", .limit / (1024 * 1024))]
    EventTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The provider answered with a redirect, which provider requests never follow (a redirect to another
    /// origin would carry the API key and the request body there).
    #[error("the provider answered {status} redirect to {location}; provider requests do not follow redirects")]
    Redirect {
        /// The status code (301, 302, 303, 307, 308).
        status: u16,
        /// The `Location` header, shortened (or `(no location)`).
        location: String,
    },
}

impl ProviderError {
    pub(crate) fn malformed(format: &'static str, event: &str, message: impl Into<String>) -> Self {
        ProviderError::Malformed {
            format,
            event: event.to_owned(),
            message: message.into(),
        }
    }

    pub(crate) fn protocol(format: &'static str, message: impl Into<String>) -> Self {
        ProviderError::Protocol {
            format,
            message: message.into(),
        }
    }
}

impl ProviderError {
    /// The kind of model failure this is: what the retry policy decides on.
    pub fn kind(&self) -> ModelErrorKind {
        match self {
            ProviderError::Malformed { .. }
            | ProviderError::Protocol { .. }
            | ProviderError::Sse(_)
            | ProviderError::EventTooLarge { .. } => ModelErrorKind::Protocol,
            ProviderError::Transport(_) | ProviderError::IdleTimeout { .. } => ModelErrorKind::Transport,
            ProviderError::ResponseTimeout { .. } => ModelErrorKind::Deadline,
            ProviderError::Http {
                status, retry_after, ..
            } => ModelErrorKind::Http {
                status: *status,
                retry_after: *retry_after,
            },
            ProviderError::Redirect { status, .. } => ModelErrorKind::Http {
                status: *status,
                retry_after: None,
            },
            ProviderError::Capture(_) | ProviderError::Config(_) => ModelErrorKind::Other,
        }
    }
}

/// The model error keeps this error's message, its [kind](ProviderError::kind), and the error itself as its source.
impl From<ProviderError> for ModelError {
    fn from(err: ProviderError) -> Self {
        ModelError::with_kind(err.kind(), err.to_string()).with_source(err)
    }
}
