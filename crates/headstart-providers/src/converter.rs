//! One response's wire-format state machine: the public [`StreamConverter`] trait, its options, and the one
//! implementation every format shares.
//!
//! A format contributes a [`WireDecoder`]: how one SSE event, and the end of the body, change the response. The
//! shared [`Converter`] around it does the rest once for all four: it ignores what comes after the terminal event,
//! hands the decoder a [`DeltaWriter`] over the stream's queue, and ends the response on a failure.

use std::collections::VecDeque;

use headstart_core::{DeltaEvent, ModelError, Usage};

use crate::delta_writer::{DeltaState, DeltaWriter};
use crate::error::ProviderError;
use crate::sse::SseEvent;

/// Options of the conversion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConvertOptions {
    /// Chat Completions only: seal call N as soon as a call with a higher index starts, instead of waiting for
    /// `finish_reason`.
    ///
    /// Chat Completions has no per-call end event, so by default every call is sealed at `finish_reason`. Servers
    /// known to stream calls strictly one after another (OpenAI, DeepSeek) finish call N before they start call N+1,
    /// and this option lets call N run early. **Risk:** a gateway that reuses or interleaves indices (sends more
    /// argument text for call N after N+1 started, or restarts at index 0 for each call) would have call N sealed
    /// with part of its arguments. The converter detects a later fragment for a sealed call and ends the response
    /// as `error`, but the sealed call may already have run. Enable it only for servers you know.
    pub seal_on_next_index: bool,
}

/// One response's wire-format state machine: SSE events in, delta events written into the stream's queue.
///
/// Every implementation guarantees a well-formed delta stream: `start` first (with the model and response id when
/// the provider gave them by then), absolute gapless content indices, text and thinking blocks closed before `done`,
/// exactly one terminal event (`done` or `error`), and nothing after it.
pub trait StreamConverter: Send {
    /// Converts one SSE event, appending the delta events it produces to `out`. Events after the terminal one are
    /// ignored.
    ///
    /// An `Err` means the provider sent something this converter cannot interpret (malformed JSON, a protocol
    /// violation such as a fragment for an already sealed call). Events produced before the failure are already in
    /// `out`; call [`StreamConverter::fail`] to end the response with an `error` event.
    fn push(&mut self, event: &SseEvent, out: &mut VecDeque<DeltaEvent>) -> Result<(), ProviderError>;

    /// The body ended. If the provider's terminal event never came, this appends an `error` event ("the connection
    /// closed mid-stream", contract §5.5); otherwise whatever is still pending (possibly nothing).
    fn finish(&mut self, out: &mut VecDeque<DeltaEvent>);

    /// Ends the response as `error` with `error`'s message and kind (a transport failure or an `Err` from
    /// [`StreamConverter::push`]): `start` if it was never sent, then the `error` event. Nothing if already ended.
    fn fail(&mut self, error: &ModelError, out: &mut VecDeque<DeltaEvent>);

    /// `true` once the terminal event was produced.
    fn is_ended(&self) -> bool;

    /// Feeds one item of an SSE stream: an event (a converter error ends the response as `error`), a failure of the
    /// stream that carries the events, or `None` at the end of the body.
    fn feed(&mut self, item: Option<Result<&SseEvent, &ModelError>>, out: &mut VecDeque<DeltaEvent>) {
        match item {
            Some(Ok(event)) => {
                if let Err(err) = self.push(event, out) {
                    self.fail(&err.into(), out);
                }
            }
            Some(Err(error)) => self.fail(error, out),
            None => self.finish(out),
        }
    }
}

impl<C: StreamConverter + ?Sized> StreamConverter for Box<C> {
    fn push(&mut self, event: &SseEvent, out: &mut VecDeque<DeltaEvent>) -> Result<(), ProviderError> {
        (**self).push(event, out)
    }

    fn finish(&mut self, out: &mut VecDeque<DeltaEvent>) {
        (**self).finish(out);
    }

    fn fail(&mut self, error: &ModelError, out: &mut VecDeque<DeltaEvent>) {
        (**self).fail(error, out);
    }

    fn is_ended(&self) -> bool {
        (**self).is_ended()
    }
}

/// What one wire format contributes to a [`Converter`].
pub(crate) trait WireDecoder: Send {
    /// The format's name in error messages.
    const FORMAT: &'static str;

    /// Reads one SSE event of a response that has not ended.
    fn event(&mut self, event: &SseEvent, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError>;

    /// The body of a response that has not ended is over: the format's terminal event never came (or, for Chat
    /// Completions, `[DONE]` was never sent after `finish_reason`).
    fn body_ended(&mut self, out: &mut DeltaWriter<'_>);

    /// The usage an `error` end reports; `started` tells whether `start` was written.
    fn error_usage(&self, started: bool) -> Option<Usage>;
}

/// A [`StreamConverter`] for one response in the format `D` decodes.
#[derive(Debug)]
pub(crate) struct Converter<D> {
    state: DeltaState,
    decoder: D,
}

impl<D: WireDecoder> Converter<D> {
    /// A converter for one response, reading it with `decoder`.
    pub(crate) fn new(decoder: D) -> Self {
        Converter {
            state: DeltaState::new(D::FORMAT),
            decoder,
        }
    }
}

impl<D: WireDecoder> StreamConverter for Converter<D> {
    fn push(&mut self, event: &SseEvent, out: &mut VecDeque<DeltaEvent>) -> Result<(), ProviderError> {
        if self.state.ended() {
            return Ok(());
        }
        self.decoder.event(event, &mut self.state.writer(out))
    }

    fn finish(&mut self, out: &mut VecDeque<DeltaEvent>) {
        if !self.state.ended() {
            self.decoder.body_ended(&mut self.state.writer(out));
        }
    }

    fn fail(&mut self, error: &ModelError, out: &mut VecDeque<DeltaEvent>) {
        let usage = self.decoder.error_usage(self.state.started());
        self.state.writer(out).error(error.kind(), error.message(), usage);
    }

    fn is_ended(&self) -> bool {
        self.state.ended()
    }
}
