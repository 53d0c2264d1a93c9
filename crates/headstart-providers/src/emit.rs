//! The shared half of every converter: builds a well-formed delta stream (contract §2).
//!
//! Converters decide *what* happened on the wire; the emitter keeps the bookkeeping that makes the output valid:
//! `start` exactly once and first, content indices handed out gaplessly, open blocks tracked, text and thinking
//! blocks closed before `done`, and nothing after the terminal event.

use std::collections::{BTreeMap, HashSet};

use headstart_core::{DeltaEvent, DoneReason, ErrorReason, ModelError, ModelErrorKind, Usage};
use serde_json::Value;

use crate::error::ProviderError;
use crate::sse::SseEvent;
use crate::wire_error::{error_kind, error_message};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Text,
    Thinking,
    ToolCall,
}

#[derive(Debug)]
struct OpenBlock {
    kind: Kind,
    /// For tool calls: the argument text so far (to seal a cut-off call with its verbatim text).
    raw: String,
}

#[derive(Debug)]
pub(crate) struct Emitter {
    format: &'static str,
    events: Vec<DeltaEvent>,
    started: bool,
    ended: bool,
    next_index: usize,
    open: BTreeMap<usize, OpenBlock>,
    call_ids: HashSet<String>,
    calls: usize,
}

impl Emitter {
    pub(crate) fn new(format: &'static str) -> Self {
        Emitter {
            format,
            events: Vec::new(),
            started: false,
            ended: false,
            next_index: 0,
            open: BTreeMap::new(),
            call_ids: HashSet::new(),
            calls: 0,
        }
    }

    /// Drains the events produced so far.
    pub(crate) fn take(&mut self) -> Vec<DeltaEvent> {
        std::mem::take(&mut self.events)
    }

    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    pub(crate) fn started(&self) -> bool {
        self.started
    }

    /// How many tool calls were opened in this response.
    pub(crate) fn calls(&self) -> usize {
        self.calls
    }

    /// Emits `start` unless already sent.
    pub(crate) fn start(&mut self, model: Option<String>, response_id: Option<String>) {
        if !self.started {
            self.started = true;
            self.events.push(DeltaEvent::Start { model, response_id });
        }
    }

    fn open(&mut self, kind: Kind) -> usize {
        self.start(None, None);
        let index = self.next_index;
        self.next_index += 1;
        self.open.insert(
            index,
            OpenBlock {
                kind,
                raw: String::new(),
            },
        );
        index
    }

    pub(crate) fn open_text(&mut self) -> usize {
        let index = self.open(Kind::Text);
        self.events.push(DeltaEvent::TextStart { index });
        index
    }

    pub(crate) fn open_thinking(&mut self) -> usize {
        let index = self.open(Kind::Thinking);
        self.events.push(DeltaEvent::ThinkingStart { index });
        index
    }

    /// Opens a tool call. A reused id is a provider protocol violation (the accumulator would reject it).
    pub(crate) fn open_call(&mut self, id: String, name: String) -> Result<usize, ProviderError> {
        if !self.call_ids.insert(id.clone()) {
            return Err(ProviderError::protocol(
                self.format,
                format!("tool call id {id:?} is used twice in one response"),
            ));
        }
        self.calls += 1;
        let index = self.open(Kind::ToolCall);
        self.events.push(DeltaEvent::ToolcallStart {
            index,
            id,
            name,
            is_async: false,
        });
        Ok(index)
    }

    pub(crate) fn is_open(&self, index: usize) -> bool {
        self.open.contains_key(&index)
    }

    /// Appends text to an open block of the given kind. Empty deltas are dropped (they carry nothing).
    fn append(&mut self, index: usize, kind: Kind, delta: &str) -> Result<(), ProviderError> {
        let Some(block) = self.open.get_mut(&index) else {
            return Err(ProviderError::protocol(
                self.format,
                format!("content for block {index}, which is not open"),
            ));
        };
        if block.kind != kind {
            return Err(ProviderError::protocol(
                self.format,
                format!("{kind:?} content for block {index}, which is a {:?} block", block.kind),
            ));
        }
        if delta.is_empty() {
            return Ok(());
        }
        let delta = delta.to_owned();
        self.events.push(match kind {
            Kind::Text => DeltaEvent::TextDelta { index, delta },
            Kind::Thinking => DeltaEvent::ThinkingDelta { index, delta },
            Kind::ToolCall => {
                block.raw.push_str(&delta);
                DeltaEvent::ToolcallDelta { index, delta }
            }
        });
        Ok(())
    }

    pub(crate) fn text_delta(&mut self, index: usize, delta: &str) -> Result<(), ProviderError> {
        self.append(index, Kind::Text, delta)
    }

    pub(crate) fn thinking_delta(&mut self, index: usize, delta: &str) -> Result<(), ProviderError> {
        self.append(index, Kind::Thinking, delta)
    }

    pub(crate) fn call_delta(&mut self, index: usize, delta: &str) -> Result<(), ProviderError> {
        self.append(index, Kind::ToolCall, delta)
    }

    /// The argument text of an open call so far.
    pub(crate) fn call_text(&self, index: usize) -> Option<&str> {
        self.open
            .get(&index)
            .filter(|block| block.kind == Kind::ToolCall)
            .map(|block| block.raw.as_str())
    }

    fn close(&mut self, index: usize, kind: Kind) -> Option<OpenBlock> {
        match self.open.get(&index) {
            Some(block) if block.kind == kind => self.open.remove(&index),
            _ => None,
        }
    }

    /// Closes an open text block (no-op if it is not open).
    pub(crate) fn close_text(&mut self, index: usize) {
        if self.close(index, Kind::Text).is_some() {
            self.events.push(DeltaEvent::TextEnd { index });
        }
    }

    /// Closes an open thinking block (no-op if it is not open).
    pub(crate) fn close_thinking(&mut self, index: usize, signature: Option<String>) {
        if self.close(index, Kind::Thinking).is_some() {
            self.events.push(DeltaEvent::ThinkingEnd { index, signature });
        }
    }

    /// Seals an open call on the wire format's explicit end signal; the accumulated text (or `arguments`, when the
    /// provider restated them) decides validity. No-op if the call is not open.
    pub(crate) fn seal(&mut self, index: usize, arguments: Option<Value>) {
        if self.close(index, Kind::ToolCall).is_some() {
            self.events.push(DeltaEvent::ToolcallEnd { index, arguments });
        }
    }

    /// Seals an open call that was cut off: invalid whatever its text, so it never executes (see the crate docs).
    pub(crate) fn seal_cut_off(&mut self, index: usize) {
        if let Some(block) = self.close(index, Kind::ToolCall) {
            self.events.push(DeltaEvent::ToolcallEnd {
                index,
                arguments: Some(Value::String(block.raw)),
            });
        }
    }

    /// Closes every open text and thinking block, in index order.
    pub(crate) fn close_all_text(&mut self) {
        let indices: Vec<(usize, Kind)> = self.open.iter().map(|(index, block)| (*index, block.kind)).collect();
        for (index, kind) in indices {
            match kind {
                Kind::Text => self.close_text(index),
                Kind::Thinking => self.close_thinking(index, None),
                Kind::ToolCall => {}
            }
        }
    }

    /// The indices of the calls still open, in order.
    pub(crate) fn open_calls(&self) -> Vec<usize> {
        self.open
            .iter()
            .filter(|(_, block)| block.kind == Kind::ToolCall)
            .map(|(index, _)| *index)
            .collect()
    }

    /// Ends the response normally. Text and thinking blocks still open are closed; a call still open got no
    /// explicit end signal, so it is sealed invalid (never executed). Converters seal their calls before this.
    pub(crate) fn done(&mut self, stop_reason: DoneReason, usage: Usage) {
        if self.ended {
            return;
        }
        self.start(None, None);
        self.close_all_text();
        for index in self.open_calls() {
            self.seal_cut_off(index);
        }
        self.ended = true;
        self.events.push(DeltaEvent::Done { stop_reason, usage });
    }

    /// Ends the response abnormally with a failure of `kind`. Open blocks stay open: nothing of an errored response
    /// is admitted anyway.
    pub(crate) fn error(&mut self, kind: ModelErrorKind, message: impl Into<String>, usage: Option<Usage>) {
        if self.ended {
            return;
        }
        self.start(None, None);
        self.ended = true;
        self.events.push(DeltaEvent::Error {
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

    /// [`crate::StreamConverter::fail`]: buffered events, then `error`.
    pub(crate) fn fail(&mut self, error: &ModelError, usage: Option<Usage>) -> Vec<DeltaEvent> {
        self.error(error.kind(), error.message(), usage);
        self.take()
    }
}

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
