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
    /// When a Chat Completions call is sealed (the other formats have an explicit end of each call).
    pub seal_at: SealAt,
    /// Where to record each response's SSE events with their arrival times ([`crate::recording`]); none by
    /// default.
    pub record: Option<crate::recorder::Recorder>,
}

/// When a Chat Completions call is sealed: the moment from which it may run (contract §2.15).
///
/// Chat Completions has no per-call end event. The default seals a call at the earliest moment its arguments can
/// no longer change; a server that then sends more for a sealed call (it interleaves calls, or sends text after a
/// complete object) ends the response as `error`, naming what it did and [`SealAt::Finish`], the opt-out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SealAt {
    /// Whichever comes first: the call's arguments form one complete JSON object (only whitespace may follow), a
    /// call at a higher index starts, or `finish_reason` arrives. The default.
    #[default]
    Complete,
    /// Whichever comes first: a call at a higher index starts, or `finish_reason` arrives.
    NextIndex,
    /// Only at `finish_reason`: nothing of the response runs before its end. For servers that interleave calls.
    Finish,
}

impl SealAt {
    /// Every rule, in the order of the CLI's `--seal-at` values.
    pub const ALL: [SealAt; 3] = [SealAt::Complete, SealAt::NextIndex, SealAt::Finish];

    /// The rule's name on the command line and in Python (`complete`, `next-index`, `finish`).
    pub fn as_str(self) -> &'static str {
        match self {
            SealAt::Complete => "complete",
            SealAt::NextIndex => "next-index",
            SealAt::Finish => "finish",
        }
    }

    /// `true` when a call at a higher index seals the calls below it.
    pub(crate) fn on_next_index(self) -> bool {
        matches!(self, SealAt::Complete | SealAt::NextIndex)
    }

    /// `true` when a complete JSON object seals its call.
    pub(crate) fn on_complete_object(self) -> bool {
        self == SealAt::Complete
    }
}

impl std::fmt::Display for SealAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a [`SealAt`] rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownSealAt(pub String);

impl std::fmt::Display for UnknownSealAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown sealing rule {:?} (expected complete, next-index or finish)",
            self.0
        )
    }
}

impl std::error::Error for UnknownSealAt {}

impl std::str::FromStr for SealAt {
    type Err = UnknownSealAt;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        SealAt::ALL
            .into_iter()
            .find(|rule| rule.as_str() == name)
            .ok_or_else(|| UnknownSealAt(name.to_owned()))
    }
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
