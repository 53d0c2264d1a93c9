//! The accumulator: rebuilds the assistant message under construction from delta events (contract §2).
//!
//! It applies one event at a time in O(delta length): deltas are appended in place and nothing is cloned or
//! re-rendered per event. Every protocol violation of contract §2 is rejected with an [`AccumulatorError`] naming the
//! event's position and what was wrong; a rejected event changes nothing. Consumers that want the whole partial
//! message ask for it explicitly ([`Accumulator::snapshot`]), paying O(message) only then.
//!
//! # Limits
//!
//! A model stream is input the engine does not control, so the memory one response can hold is bounded. An event
//! that would cross a limit is rejected like any other protocol violation ([`Violation::BlockTooLarge`],
//! [`Violation::ResponseTooLarge`], [`Violation::TooManyBlocks`]), which ends the response as `error` with that
//! message:
//!
//! - [`MAX_BLOCK_BYTES`] (16 MiB): the text of one text or thinking block, and the argument text of one tool call
//!   (the streamed deltas, or the serialized `arguments` override of `toolcall_end`);
//! - [`MAX_RESPONSE_BYTES`] (64 MiB): everything a response streams in, summed over all blocks (deltas, call ids
//!   and names, signatures, argument overrides);
//! - [`MAX_BLOCKS`] (100,000): content blocks per response.
//!
//! Real responses are orders of magnitude below all three (a 128k-token response is well under 1 MiB).
//!
//! Sealed arguments nested deeper than [`MAX_ARGUMENT_DEPTH`](crate::model::MAX_ARGUMENT_DEPTH) (64 levels) make
//! the call invalid rather than ending the response, like any other unusable argument text.

mod block;
mod limits;
mod violation;

use std::collections::{BTreeSet, HashSet};

use crate::delta::{DeltaEvent, ErrorReason};
use crate::model::{AssistantMessage, ContentBlock, StopReason, ToolArguments, ToolCall, Usage};
use block::Block;
use limits::serialized_len_within;
pub use limits::{MAX_BLOCKS, MAX_BLOCK_BYTES, MAX_RESPONSE_BYTES};
pub use violation::{AccumulatorError, BlockKind, Violation};

/// What applying an event did, for callers that react to it (the engine's commit trigger).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// `start` was accepted.
    Started,
    /// A block opened at this index.
    Opened(usize),
    /// A delta was appended to this index.
    Appended(usize),
    /// A text or thinking block closed at this index.
    Closed(usize),
    /// The tool call at this index was sealed; [`Accumulator::tool_call`] returns it.
    Sealed(usize),
    /// The response ended (`done` or `error`).
    Ended,
}

/// How the response ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Ending {
    /// The stop reason.
    pub stop_reason: StopReason,
    /// The usage reported at the end (zero if none).
    pub usage: Usage,
    /// The error message of an abnormal end.
    pub error_message: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitingStart,
    Streaming,
    Ended,
}

/// Rebuilds an assistant message from delta events, enforcing contract §2.
#[derive(Debug, Clone)]
pub struct Accumulator {
    position: usize,
    phase: Phase,
    model: Option<String>,
    response_id: Option<String>,
    blocks: Vec<Block>,
    open: BTreeSet<usize>,
    ids: HashSet<String>,
    ending: Option<Ending>,
    /// Bytes streamed in so far, counted against [`MAX_RESPONSE_BYTES`].
    received: usize,
}

impl Default for Accumulator {
    fn default() -> Self {
        Self::new()
    }
}

impl Accumulator {
    /// An accumulator awaiting `start`.
    pub fn new() -> Self {
        Accumulator {
            position: 0,
            phase: Phase::AwaitingStart,
            model: None,
            response_id: None,
            blocks: Vec::new(),
            open: BTreeSet::new(),
            ids: HashSet::new(),
            ending: None,
            received: 0,
        }
    }

    /// Applies one event. On error nothing changes and the caller should end the response (contract §2: a protocol
    /// error ends the response as `error` with this message).
    pub fn apply(&mut self, event: DeltaEvent) -> Result<Applied, AccumulatorError> {
        self.apply_ref(&event)
    }

    /// [`Accumulator::apply`] on a borrowed event: deltas are copied into their block, so a caller that passes the
    /// event on afterwards (the engine's `message_update`) needs no copy of its own.
    pub fn apply_ref(&mut self, event: &DeltaEvent) -> Result<Applied, AccumulatorError> {
        let position = self.position;
        let applied = self.apply_inner(event).map_err(|violation| AccumulatorError {
            position,
            event: event.type_name(),
            violation,
        })?;
        self.position += 1;
        Ok(applied)
    }

    /// [`Accumulator::apply_ref`] for a `*_delta` event given by its parts ([`BlockKind::delta`] builds the event):
    /// the hot path of a stream, where the caller keeps the text to pass on and moves no whole event.
    #[inline]
    pub fn apply_piece(&mut self, kind: BlockKind, index: usize, delta: &str) -> Result<Applied, AccumulatorError> {
        let position = self.position;
        let applied = self
            .check_phase(false)
            .and_then(|()| self.append(index, kind, delta))
            .map_err(|violation| AccumulatorError {
                position,
                event: kind.delta_type_name(),
                violation,
            })?;
        self.position += 1;
        Ok(applied)
    }

    /// Whether an event may come now: `start` first and once, nothing after the end.
    fn check_phase(&self, is_start: bool) -> Result<(), Violation> {
        match self.phase {
            Phase::Ended => Err(Violation::AfterEnd),
            Phase::AwaitingStart if !is_start => Err(Violation::BeforeStart),
            Phase::Streaming if is_start => Err(Violation::SecondStart),
            _ => Ok(()),
        }
    }

    fn apply_inner(&mut self, event: &DeltaEvent) -> Result<Applied, Violation> {
        self.check_phase(matches!(event, DeltaEvent::Start { .. }))?;
        match event {
            DeltaEvent::Start { model, response_id } => {
                self.model.clone_from(model);
                self.response_id.clone_from(response_id);
                self.phase = Phase::Streaming;
                Ok(Applied::Started)
            }
            DeltaEvent::TextStart { index } => self.open_block(*index, Block::Text { text: String::new() }),
            DeltaEvent::ThinkingStart { index } => self.open_block(
                *index,
                Block::Thinking {
                    text: String::new(),
                    signature: None,
                },
            ),
            DeltaEvent::ToolcallStart {
                index,
                id,
                name,
                early,
                provider_async,
            } => {
                let index = *index;
                self.check_can_open(index)?;
                if self.ids.contains(id) {
                    return Err(Violation::DuplicateId { id: id.clone() });
                }
                self.received = self.charge(id.len().saturating_add(name.len()))?;
                self.ids.insert(id.clone());
                self.open_block(
                    index,
                    Block::ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        flagged_async: *early,
                        provider_async: *provider_async,
                        raw: String::new(),
                        sealed: None,
                    },
                )
            }
            DeltaEvent::TextDelta { index, delta } => self.append(*index, BlockKind::Text, delta),
            DeltaEvent::ThinkingDelta { index, delta } => self.append(*index, BlockKind::Thinking, delta),
            DeltaEvent::ToolcallDelta { index, delta } => self.append(*index, BlockKind::ToolCall, delta),
            DeltaEvent::TextEnd { index } => {
                let index = *index;
                self.open_block_mut(index, BlockKind::Text)?;
                self.open.remove(&index);
                Ok(Applied::Closed(index))
            }
            DeltaEvent::ThinkingEnd { index, signature } => {
                let index = *index;
                self.open_block_mut(index, BlockKind::Thinking)?;
                let received = self.charge(signature.as_ref().map_or(0, String::len))?;
                match self.open_block_mut(index, BlockKind::Thinking)? {
                    Block::Thinking { signature: slot, .. } => slot.clone_from(signature),
                    _ => unreachable!("open_block_mut checked the kind"),
                }
                self.received = received;
                self.open.remove(&index);
                Ok(Applied::Closed(index))
            }
            DeltaEvent::ToolcallEnd { index, arguments } => {
                let index = *index;
                self.open_block_mut(index, BlockKind::ToolCall)?;
                if let Some(value) = arguments {
                    let size = serialized_len_within(value, MAX_BLOCK_BYTES).ok_or(Violation::BlockTooLarge {
                        index,
                        kind: BlockKind::ToolCall,
                        limit: MAX_BLOCK_BYTES,
                    })?;
                    self.received = self.charge(size)?;
                }
                match self.open_block_mut(index, BlockKind::ToolCall)? {
                    Block::ToolCall { raw, sealed, .. } => {
                        let parsed = match arguments {
                            Some(value) => ToolArguments::from_value(value.clone()),
                            None => ToolArguments::parse(raw),
                        };
                        if let ToolArguments::Invalid { raw: text, .. } = &parsed {
                            // Keep the verbatim text that the stored call shows (the override's, when given).
                            raw.clone_from(text);
                        }
                        *sealed = Some(parsed);
                    }
                    _ => unreachable!("open_block_mut checked the kind"),
                }
                self.open.remove(&index);
                Ok(Applied::Sealed(index))
            }
            DeltaEvent::Done { stop_reason, usage } => {
                if !self.open.is_empty() {
                    return Err(Violation::DoneWithOpenBlocks {
                        open: self.open.iter().copied().collect(),
                    });
                }
                self.end((*stop_reason).into(), *usage, None);
                Ok(Applied::Ended)
            }
            DeltaEvent::Error {
                stop_reason,
                message,
                usage,
                ..
            } => {
                self.end((*stop_reason).into(), usage.unwrap_or_default(), Some(message.clone()));
                Ok(Applied::Ended)
            }
        }
    }

    /// Ends the response abnormally whatever state it is in: for model errors, protocol errors, a stream that
    /// stopped without a terminal event, or cancellation. Does nothing if the response already ended.
    pub fn fail(&mut self, reason: ErrorReason, message: impl Into<String>) {
        if self.phase != Phase::Ended {
            self.end(reason.into(), Usage::default(), Some(message.into()));
        }
    }

    fn end(&mut self, stop_reason: StopReason, usage: Usage, error_message: Option<String>) {
        self.phase = Phase::Ended;
        self.ending = Some(Ending {
            stop_reason,
            usage,
            error_message,
        });
    }

    fn check_next_index(&self, index: usize) -> Result<(), Violation> {
        if index != self.blocks.len() {
            return Err(Violation::NotNextIndex {
                index,
                expected: self.blocks.len(),
            });
        }
        Ok(())
    }

    /// A block may open at `index`: it is the next unused one and the response has room for another block.
    fn check_can_open(&self, index: usize) -> Result<(), Violation> {
        self.check_next_index(index)?;
        if self.blocks.len() >= MAX_BLOCKS {
            return Err(Violation::TooManyBlocks { limit: MAX_BLOCKS });
        }
        Ok(())
    }

    /// The response's byte count after streaming in `bytes` more, if that stays within [`MAX_RESPONSE_BYTES`].
    /// The caller stores it once the event is accepted.
    fn charge(&self, bytes: usize) -> Result<usize, Violation> {
        let received = self.received.saturating_add(bytes);
        if received > MAX_RESPONSE_BYTES {
            return Err(Violation::ResponseTooLarge {
                limit: MAX_RESPONSE_BYTES,
            });
        }
        Ok(received)
    }

    /// Appends a delta to the open block at `index`, within [`MAX_BLOCK_BYTES`] and [`MAX_RESPONSE_BYTES`].
    fn append(&mut self, index: usize, kind: BlockKind, delta: &str) -> Result<Applied, Violation> {
        let received = self.charge(delta.len());
        let text = match self.open_block_mut(index, kind)? {
            Block::Text { text } | Block::Thinking { text, .. } | Block::ToolCall { raw: text, .. } => text,
        };
        if text.len().saturating_add(delta.len()) > MAX_BLOCK_BYTES {
            return Err(Violation::BlockTooLarge {
                index,
                kind,
                limit: MAX_BLOCK_BYTES,
            });
        }
        let received = received?;
        text.push_str(delta);
        self.received = received;
        Ok(Applied::Appended(index))
    }

    fn open_block(&mut self, index: usize, block: Block) -> Result<Applied, Violation> {
        self.check_can_open(index)?;
        self.blocks.push(block);
        self.open.insert(index);
        Ok(Applied::Opened(index))
    }

    fn open_block_mut(&mut self, index: usize, expected: BlockKind) -> Result<&mut Block, Violation> {
        if !self.open.contains(&index) {
            return Err(Violation::NotOpen { index });
        }
        let block = &mut self.blocks[index];
        let found = block.kind();
        if found != expected {
            return Err(Violation::WrongKind { index, expected, found });
        }
        Ok(block)
    }

    /// How many events were accepted so far.
    pub fn position(&self) -> usize {
        self.position
    }

    /// `true` once `start` was accepted.
    pub fn started(&self) -> bool {
        // The first accepted event is always `start`; `fail` before it ends the response without starting it.
        self.position > 0
    }

    /// How the response ended, once it has.
    pub fn ending(&self) -> Option<&Ending> {
        self.ending.as_ref()
    }

    /// The provider's response id from `start`.
    pub fn response_id(&self) -> Option<&str> {
        self.response_id.as_deref()
    }

    /// The model name from `start`.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// Number of content blocks opened so far.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// `true` before the first block opens.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// `true` when the block at `index` is still open.
    pub fn is_open(&self, index: usize) -> bool {
        self.open.contains(&index)
    }

    /// `true` when some block in `range` is still open. O(log n).
    pub fn any_open_in(&self, range: std::ops::Range<usize>) -> bool {
        self.open.range(range).next().is_some()
    }

    /// The tool call at `index`, sealed or not (unsealed arguments are parsed strictly from the text so far).
    pub fn tool_call(&self, index: usize) -> Option<ToolCall> {
        match self.blocks.get(index)? {
            block @ Block::ToolCall { .. } => block.to_content().as_tool_call().cloned(),
            _ => None,
        }
    }

    /// For a tool call block: whether the `toolcall_start` event flagged it `async`.
    pub fn call_flagged_async(&self, index: usize) -> Option<bool> {
        match self.blocks.get(index)? {
            Block::ToolCall { flagged_async, .. } => Some(*flagged_async),
            _ => None,
        }
    }

    /// For a tool call block: its id (cheap, no clone).
    pub fn call_id(&self, index: usize) -> Option<&str> {
        match self.blocks.get(index)? {
            Block::ToolCall { id, .. } => Some(id),
            _ => None,
        }
    }

    /// For a tool call block: its tool name (cheap, no clone).
    pub fn call_name(&self, index: usize) -> Option<&str> {
        match self.blocks.get(index)? {
            Block::ToolCall { name, .. } => Some(name),
            _ => None,
        }
    }

    /// The content blocks in `range`, materialized (O(size of the range); used once per fragment commit).
    pub fn content(&self, range: std::ops::Range<usize>) -> Vec<ContentBlock> {
        self.blocks[range].iter().map(Block::to_content).collect()
    }

    /// The whole message so far (O(message)); `turn_id` is left empty for the caller to fill in.
    pub fn snapshot(&self) -> AssistantMessage {
        let ending = self.ending.clone().unwrap_or(Ending {
            stop_reason: StopReason::Stop,
            usage: Usage::default(),
            error_message: None,
        });
        AssistantMessage {
            turn_id: self.response_id.clone().unwrap_or_default(),
            stop_reason: ending.stop_reason,
            content: self.content(0..self.blocks.len()),
            usage: ending.usage,
            model: self.model.clone(),
            error_message: ending.error_message,
        }
    }
}

#[cfg(test)]
mod tests;
