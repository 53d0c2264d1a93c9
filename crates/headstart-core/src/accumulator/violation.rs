//! What the accumulator rejects: a [`Violation`] of contract §2, and the [`AccumulatorError`] that places it in the
//! stream.

use super::block::BlockKind;

/// What was wrong with a rejected event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// The first event was not `start`.
    #[error("the stream did not begin with start")]
    BeforeStart,
    /// `start` arrived twice.
    #[error("a second start")]
    SecondStart,
    /// A delta or end addressed an index with no open block.
    #[error("index {index} is not open")]
    NotOpen {
        /// The addressed index.
        index: usize,
    },
    /// A delta or end addressed an open block of another kind.
    #[error("index {index} is a {found} block, not {expected}")]
    WrongKind {
        /// The addressed index.
        index: usize,
        /// The kind the event is for.
        expected: BlockKind,
        /// The kind of the open block.
        found: BlockKind,
    },
    /// A block started at an index other than the next unused one.
    #[error("block started at index {index}, expected the next unused index {expected}")]
    NotNextIndex {
        /// The index the event used.
        index: usize,
        /// The next unused index.
        expected: usize,
    },
    /// A tool call reused an id.
    #[error("tool call id {id:?} is already used in this response")]
    DuplicateId {
        /// The repeated id.
        id: String,
    },
    /// `done` arrived while blocks were open.
    #[error("done while blocks {open:?} are still open")]
    DoneWithOpenBlocks {
        /// The indices still open.
        open: Vec<usize>,
    },
    /// An event arrived after `done`/`error`.
    #[error("event after the response ended")]
    AfterEnd,
    /// A block's text (for a tool call: its argument text) would grow past [`MAX_BLOCK_BYTES`](super::MAX_BLOCK_BYTES).
    #[error("{} at index {index} would exceed the limit of {limit} bytes", block_contents(*kind))]
    BlockTooLarge {
        /// The block's index.
        index: usize,
        /// The block's kind.
        kind: BlockKind,
        /// The limit ([`MAX_BLOCK_BYTES`](super::MAX_BLOCK_BYTES)).
        limit: usize,
    },
    /// The response would stream in more than [`MAX_RESPONSE_BYTES`](super::MAX_RESPONSE_BYTES).
    #[error("the response's content would exceed the limit of {limit} bytes")]
    ResponseTooLarge {
        /// The limit ([`MAX_RESPONSE_BYTES`](super::MAX_RESPONSE_BYTES)).
        limit: usize,
    },
    /// The response would open more than [`MAX_BLOCKS`](super::MAX_BLOCKS) blocks.
    #[error("the response would have more than {limit} content blocks")]
    TooManyBlocks {
        /// The limit ([`MAX_BLOCKS`](super::MAX_BLOCKS)).
        limit: usize,
    },
}

/// What a block's size limit applies to, as named in [`Violation::BlockTooLarge`].
fn block_contents(kind: BlockKind) -> &'static str {
    match kind {
        BlockKind::Text => "text",
        BlockKind::Thinking => "thinking text",
        BlockKind::ToolCall => "tool call arguments",
    }
}

/// A rejected event: its 0-based position in the stream, its type, and the violation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("protocol violation at event {position} ({event}): {violation}")]
pub struct AccumulatorError {
    /// 0-based position of the event in the response stream.
    pub position: usize,
    /// The event's `type`.
    pub event: &'static str,
    /// What was wrong.
    pub violation: Violation,
}
