//! The shared half of every converter: writes a well-formed delta stream (contract §2) into the stream's queue.
//!
//! Converters decide *what* happened on the wire; the [`DeltaWriter`] keeps the bookkeeping that makes the output
//! valid: `start` exactly once and first, content indices handed out gaplessly, open blocks tracked, text and
//! thinking blocks closed before `done`, and nothing after the terminal event. The bookkeeping ([`DeltaState`])
//! lives as long as the response; a writer borrows it with the queue for the one SSE event being converted, so the
//! deltas go straight into the queue the stream reads from.

use std::collections::{BTreeMap, HashSet, VecDeque};

use headstart_core::accumulator::BlockKind;
use headstart_core::{DeltaEvent, DoneReason, ErrorReason, ModelErrorKind, Usage};
use serde_json::Value;

use crate::error::ProviderError;
use crate::wire_error::{error_kind, error_message};

/// A content block that is open.
#[derive(Debug)]
struct OpenBlock {
    kind: BlockKind,
    /// For tool calls: the argument text so far (to seal a cut-off call with its verbatim text).
    raw: String,
}

/// What one response's delta stream has produced so far.
#[derive(Debug)]
pub(crate) struct DeltaState {
    /// The wire format's name, for protocol errors.
    format: &'static str,
    started: bool,
    ended: bool,
    next_index: usize,
    open: BTreeMap<usize, OpenBlock>,
    call_ids: HashSet<String>,
    calls: usize,
}

impl DeltaState {
    /// The state before anything was produced; `format` names the wire format in protocol errors.
    pub(crate) fn new(format: &'static str) -> Self {
        DeltaState {
            format,
            started: false,
            ended: false,
            next_index: 0,
            open: BTreeMap::new(),
            call_ids: HashSet::new(),
            calls: 0,
        }
    }

    /// `true` once the terminal event was written.
    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    /// `true` once `start` was written.
    pub(crate) fn started(&self) -> bool {
        self.started
    }

    /// A writer of this response's deltas into `queue`.
    pub(crate) fn writer<'a>(&'a mut self, queue: &'a mut VecDeque<DeltaEvent>) -> DeltaWriter<'a> {
        DeltaWriter { state: self, queue }
    }
}

/// Writes one response's delta events into the stream's queue, keeping them well-formed.
#[derive(Debug)]
pub(crate) struct DeltaWriter<'a> {
    state: &'a mut DeltaState,
    queue: &'a mut VecDeque<DeltaEvent>,
}

impl DeltaWriter<'_> {
    /// `true` once `start` was written.
    pub(crate) fn started(&self) -> bool {
        self.state.started
    }

    /// How many tool calls were opened in this response.
    pub(crate) fn calls(&self) -> usize {
        self.state.calls
    }

    /// Emits `start` unless already sent.
    pub(crate) fn start(&mut self, model: Option<String>, response_id: Option<String>) {
        if !self.state.started {
            self.state.started = true;
            self.queue.push_back(DeltaEvent::Start { model, response_id });
        }
    }

    /// Takes the next index for a block of `kind` (after `start`, if it was not sent yet).
    fn open(&mut self, kind: BlockKind) -> usize {
        self.start(None, None);
        let index = self.state.next_index;
        self.state.next_index += 1;
        self.state.open.insert(
            index,
            OpenBlock {
                kind,
                raw: String::new(),
            },
        );
        index
    }

    /// Opens a text block; returns its index.
    pub(crate) fn open_text(&mut self) -> usize {
        let index = self.open(BlockKind::Text);
        self.queue.push_back(DeltaEvent::TextStart { index });
        index
    }

    /// Opens a thinking block; returns its index.
    pub(crate) fn open_thinking(&mut self) -> usize {
        let index = self.open(BlockKind::Thinking);
        self.queue.push_back(DeltaEvent::ThinkingStart { index });
        index
    }

    /// Opens a tool call, `provider_async` when the provider says its model goes on without the result. A reused id
    /// is a provider protocol violation (the accumulator would reject it).
    pub(crate) fn open_call(&mut self, id: String, name: String, provider_async: bool) -> Result<usize, ProviderError> {
        if !self.state.call_ids.insert(id.clone()) {
            return Err(ProviderError::protocol(
                self.state.format,
                format!("tool call id {id:?} is used twice in one response"),
            ));
        }
        self.state.calls += 1;
        let index = self.open(BlockKind::ToolCall);
        self.queue.push_back(DeltaEvent::ToolcallStart {
            index,
            id,
            name,
            early: false,
            provider_async,
        });
        Ok(index)
    }

    /// `true` while the block at `index` is open.
    pub(crate) fn is_open(&self, index: usize) -> bool {
        self.state.open.contains_key(&index)
    }

    /// Appends text to an open block of the given kind. Empty deltas are dropped (they carry nothing).
    fn append(&mut self, index: usize, kind: BlockKind, delta: &str) -> Result<(), ProviderError> {
        let Some(block) = self.state.open.get_mut(&index) else {
            return Err(ProviderError::protocol(
                self.state.format,
                format!("content for block {index}, which is not open"),
            ));
        };
        if block.kind != kind {
            return Err(ProviderError::protocol(
                self.state.format,
                format!("{kind:?} content for block {index}, which is a {:?} block", block.kind),
            ));
        }
        if delta.is_empty() {
            return Ok(());
        }
        if kind == BlockKind::ToolCall {
            block.raw.push_str(delta);
        }
        self.queue.push_back(kind.delta(index, delta.to_owned()));
        Ok(())
    }

    /// Appends to the open text block at `index`.
    pub(crate) fn text_delta(&mut self, index: usize, delta: &str) -> Result<(), ProviderError> {
        self.append(index, BlockKind::Text, delta)
    }

    /// Appends to the open thinking block at `index`.
    pub(crate) fn thinking_delta(&mut self, index: usize, delta: &str) -> Result<(), ProviderError> {
        self.append(index, BlockKind::Thinking, delta)
    }

    /// Appends argument text to the open tool call at `index`.
    pub(crate) fn call_delta(&mut self, index: usize, delta: &str) -> Result<(), ProviderError> {
        self.append(index, BlockKind::ToolCall, delta)
    }

    /// The argument text of an open call so far.
    pub(crate) fn call_text(&self, index: usize) -> Option<&str> {
        self.state
            .open
            .get(&index)
            .filter(|block| block.kind == BlockKind::ToolCall)
            .map(|block| block.raw.as_str())
    }

    /// Takes the block at `index` out of the open ones, if it is open and of `kind`.
    fn close(&mut self, index: usize, kind: BlockKind) -> Option<OpenBlock> {
        match self.state.open.get(&index) {
            Some(block) if block.kind == kind => self.state.open.remove(&index),
            _ => None,
        }
    }

    /// Closes an open text block (no-op if it is not open).
    pub(crate) fn close_text(&mut self, index: usize) {
        if self.close(index, BlockKind::Text).is_some() {
            self.queue.push_back(DeltaEvent::TextEnd { index });
        }
    }

    /// Closes an open thinking block (no-op if it is not open).
    pub(crate) fn close_thinking(&mut self, index: usize, signature: Option<String>) {
        if self.close(index, BlockKind::Thinking).is_some() {
            self.queue.push_back(DeltaEvent::ThinkingEnd { index, signature });
        }
    }

    /// Seals an open call on the wire format's explicit end signal; the accumulated text (or `arguments`, when the
    /// provider restated them) decides validity. No-op if the call is not open.
    pub(crate) fn seal(&mut self, index: usize, arguments: Option<Value>) {
        if self.close(index, BlockKind::ToolCall).is_some() {
            self.queue.push_back(DeltaEvent::ToolcallEnd { index, arguments });
        }
    }

    /// Seals an open call that was cut off: invalid whatever its text, so it never executes (see the crate docs).
    pub(crate) fn seal_cut_off(&mut self, index: usize) {
        if let Some(block) = self.close(index, BlockKind::ToolCall) {
            self.queue.push_back(DeltaEvent::ToolcallEnd {
                index,
                arguments: Some(Value::String(block.raw)),
            });
        }
    }

    /// Closes every open text and thinking block, in index order.
    pub(crate) fn close_all_text(&mut self) {
        let indices: Vec<(usize, BlockKind)> = self
            .state
            .open
            .iter()
            .map(|(index, block)| (*index, block.kind))
            .collect();
        for (index, kind) in indices {
            match kind {
                BlockKind::Text => self.close_text(index),
                BlockKind::Thinking => self.close_thinking(index, None),
                BlockKind::ToolCall => {}
            }
        }
    }

    /// The indices of the calls still open, in order.
    pub(crate) fn open_calls(&self) -> Vec<usize> {
        self.state
            .open
            .iter()
            .filter(|(_, block)| block.kind == BlockKind::ToolCall)
            .map(|(index, _)| *index)
            .collect()
    }

    /// Ends the response normally. Text and thinking blocks still open are closed; a call still open got no
    /// explicit end signal, so it is sealed invalid (never executed). Converters seal their calls before this.
    pub(crate) fn done(&mut self, stop_reason: DoneReason, usage: Usage) {
        if self.state.ended {
            return;
        }
        self.start(None, None);
        self.close_all_text();
        for index in self.open_calls() {
            self.seal_cut_off(index);
        }
        self.state.ended = true;
        self.queue.push_back(DeltaEvent::Done { stop_reason, usage });
    }

    /// Ends the response abnormally with a failure of `kind`. Open blocks stay open: nothing of an errored response
    /// is admitted anyway.
    pub(crate) fn error(&mut self, kind: ModelErrorKind, message: impl Into<String>, usage: Option<Usage>) {
        if self.state.ended {
            return;
        }
        self.start(None, None);
        self.state.ended = true;
        self.queue.push_back(DeltaEvent::Error {
            stop_reason: ErrorReason::Error,
            message: message.into(),
            usage,
            kind: Some(kind),
        });
    }

    /// Ends the response with the error object the provider sent (its message, and its kind from its type fields).
    pub(crate) fn provider_error(&mut self, error: &Value, usage: Option<Usage>) {
        let message = format!("provider error: {}", error_message(error));
        self.error(error_kind(error), message, usage);
    }
}
