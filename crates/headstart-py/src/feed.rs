//! [`Feed`] (`_native.Feed`): the model's stream as Python hands it over, into the delta stream the engine wraps.
//!
//! The parsing is `headstart_providers::Feed`'s, which the Node package shares; this file is its Python face:
//! the format names as `ConfigError`s, a delta that is not one as `ModelError`.

use std::sync::{Mutex, PoisonError};

use headstart::core::DeltaStream;
use headstart_providers::{ConvertOptions, FeedError, FeedFormat};
use pyo3::prelude::*;

use crate::errors::{ConfigError, ModelError as PyModelError};

/// What Python may hand over (see [`FeedFormat`]).
pub(crate) type Format = FeedFormat;

/// Parses a format name, as a `ConfigError` naming the accepted ones when it is unknown.
pub(crate) fn parse_format(name: &str) -> PyResult<Format> {
    FeedFormat::parse(name).map_err(feed_error)
}

fn feed_error(error: FeedError) -> PyErr {
    match error {
        FeedError::Config(message) => ConfigError::new_err(message),
        FeedError::NotADelta(message) => PyModelError::new_err(message),
    }
}

/// The Python end of one response's stream (`_native.Feed`): `push` each event (or `push_body` each chunk of the
/// body), then `end` or `fail`.
#[pyclass(module = "headstart._native", frozen)]
pub(crate) struct Feed {
    inner: Mutex<headstart_providers::Feed>,
}

impl Feed {
    /// A feed and the delta stream the engine reads from it; `options` say when a Chat Completions call is
    /// sealed and where responses are recorded.
    pub fn open(format: Format, options: &ConvertOptions) -> (Feed, DeltaStream) {
        let (inner, stream) = headstart_providers::Feed::open(format, options);
        (
            Feed {
                inner: Mutex::new(inner),
            },
            stream,
        )
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, headstart_providers::Feed> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[pymethods]
impl Feed {
    /// Hands over one event: its JSON text, and its SSE event name where the format names events (`None` for Chat
    /// Completions and delta dicts). A delta that is not a delta event raises `ModelError`.
    #[pyo3(signature = (data, event=None))]
    fn push(&self, data: String, event: Option<String>) -> PyResult<()> {
        self.inner().push(data, event).map_err(feed_error)
    }

    /// Hands over delta events as JSON, one per line, in one call (a `headstart` feed): a host's burst of events
    /// without a call, and a wake of the engine, per event. A line that is not a delta event ends the response as
    /// an error.
    fn push_lines(&self, lines: String) -> PyResult<()> {
        self.inner().push_lines(lines).map_err(feed_error)
    }

    /// Hands over the next chunk of the provider's SSE body, as read from the HTTP response (any split). From the
    /// first chunk on the feed reads the body, and its end is the body's (contract §5.5).
    fn push_body(&self, data: &[u8]) -> PyResult<()> {
        self.inner().push_body(data).map_err(feed_error)
    }

    /// The stream ended cleanly.
    fn end(&self) {
        self.inner().end();
    }

    /// The stream failed (the SDK raised): the response ends as `error` with this message.
    fn fail(&self, message: String) {
        self.inner().fail(message);
    }
}

/// The conversion options of Python's `seal=` and `record=` (see [`headstart_providers::feed::convert_options`]).
pub(crate) fn convert_options(seal: &str, record: Option<&str>) -> PyResult<ConvertOptions> {
    headstart_providers::feed::convert_options(seal, record).map_err(feed_error)
}
