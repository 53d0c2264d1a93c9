//! Content blocks as the accumulator holds them while they stream in, and their kinds as errors name them.

use std::fmt;

use crate::delta::DeltaEvent;
use crate::model::{ContentBlock, ToolArguments, ToolCall};

/// The kind of a content block, as named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// A text block.
    Text,
    /// A reasoning block.
    Thinking,
    /// A tool call block.
    ToolCall,
}

impl BlockKind {
    /// The `*_delta` event that appends `delta` to the block of this kind at `index`.
    #[inline]
    pub fn delta(self, index: usize, delta: String) -> DeltaEvent {
        match self {
            BlockKind::Text => DeltaEvent::TextDelta { index, delta },
            BlockKind::Thinking => DeltaEvent::ThinkingDelta { index, delta },
            BlockKind::ToolCall => DeltaEvent::ToolcallDelta { index, delta },
        }
    }

    /// The wire name of [`BlockKind::delta`]'s event, as [`DeltaEvent::type_name`] spells it.
    pub fn delta_type_name(self) -> &'static str {
        // An empty `String` does not allocate: this only asks the event's own name.
        self.delta(0, String::new()).type_name()
    }
}

impl fmt::Display for BlockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BlockKind::Text => "text",
            BlockKind::Thinking => "thinking",
            BlockKind::ToolCall => "tool call",
        })
    }
}

/// A content block under construction.
#[derive(Debug, Clone)]
pub(super) enum Block {
    Text {
        text: String,
    },
    Thinking {
        text: String,
        signature: Option<String>,
    },
    ToolCall {
        id: String,
        name: String,
        flagged_async: bool,
        raw: String,
        sealed: Option<ToolArguments>,
    },
}

impl Block {
    pub(super) fn kind(&self) -> BlockKind {
        match self {
            Block::Text { .. } => BlockKind::Text,
            Block::Thinking { .. } => BlockKind::Thinking,
            Block::ToolCall { .. } => BlockKind::ToolCall,
        }
    }

    pub(super) fn to_content(&self) -> ContentBlock {
        match self {
            Block::Text { text } => ContentBlock::Text { text: text.clone() },
            Block::Thinking { text, signature } => ContentBlock::Thinking {
                thinking: text.clone(),
                signature: signature.clone(),
            },
            Block::ToolCall {
                id, name, raw, sealed, ..
            } => ContentBlock::ToolCall(ToolCall {
                id: id.clone(),
                name: name.clone(),
                // An unsealed call (cut off by an error) is parsed strictly like a sealed one; it never executes.
                arguments: sealed.clone().unwrap_or_else(|| ToolArguments::parse(raw)),
            }),
        }
    }
}
