//! One content block of the response under construction, as the accumulator holds it: its text, or a call's
//! accumulated argument text and its sealed arguments.

use super::BlockKind;
use crate::model::{ContentBlock, ToolArguments, ToolCall};

/// A block of the response under construction; `flagged_async` and `provider_async` are its `toolcall_start`'s.
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
        provider_async: bool,
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
                id,
                name,
                provider_async,
                raw,
                sealed,
                ..
            } => ContentBlock::ToolCall(ToolCall {
                id: id.clone(),
                name: name.clone(),
                // An unsealed call (cut off by an error) is parsed strictly like a sealed one; it never executes.
                arguments: sealed.clone().unwrap_or_else(|| ToolArguments::parse(raw)),
                provider_async: *provider_async,
            }),
        }
    }
}
