//! Byte stream in, delta stream out: the asynchronous glue between an HTTP body and a converter.
//!
//! [`SseDeltas`] is the adapter: SSE events in, a well-formed delta stream out. [`delta_stream`] builds it over a
//! response body, [`sse_delta_stream`] over events another library framed; [`timed_events`] bounds how long the
//! events may take.

mod sse_deltas;
#[cfg(test)]
mod tests;
mod timed;

use std::fmt::Display;

use futures::{Stream, StreamExt};
use headstart_core::ModelError;

use crate::converter::ConvertOptions;
use crate::sse::{sse_events, SseEvent};
use crate::wire_format::WireFormat;

pub use headstart_core::DeltaStream;
pub use sse_deltas::SseDeltas;
pub(crate) use timed::later;
pub use timed::timed_events;

/// Converts a response body (a stream of byte chunks, e.g. `reqwest`'s) in `format` to delta events.
///
/// The stream always yields a well-formed response: `start` first and exactly one terminal event. A transport
/// error, a body that ends before the provider's terminal event (contract §5.5) or unparseable provider data all end it
/// with an `error` event (not an `Err` item), so the partial response and any usage survive. The body is dropped as
/// soon as the terminal event is produced; dropping the returned stream drops the body too.
pub fn delta_stream<S, B, E>(format: WireFormat, options: &ConvertOptions, bytes: S) -> DeltaStream
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
    E: Display + Send + 'static,
{
    SseDeltas::new(sse_events(bytes), format.converter(options)).boxed()
}

/// Converts a stream of SSE events already framed (by another client library, say) in `format` to delta events,
/// with the guarantees of [`delta_stream`]: the same converter reads them, so both give the same deltas. An `Err`
/// item is a failure of whatever carries the events: it ends the response as an error of kind
/// [`headstart_core::ModelErrorKind::Transport`].
pub fn sse_delta_stream<S, E>(format: WireFormat, options: &ConvertOptions, events: S) -> DeltaStream
where
    S: Stream<Item = Result<SseEvent, E>> + Send + 'static,
    E: Display + Send + 'static,
{
    let events = events.map(|event| event.map_err(|err| ModelError::transport(err.to_string())));
    SseDeltas::new(events, format.converter(options)).boxed()
}
