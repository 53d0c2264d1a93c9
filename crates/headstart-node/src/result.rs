//! A tool result as JavaScript gives it (`{content: [{type: "text", text}], details, isError, terminate}`, or a
//! string), read as the engine's output. The tools, the hooks and partial results all read it so.

use headstart::core::model::ContentBlock;
use headstart::ToolOutput;
use serde_json::Value;

/// A tool result as JavaScript gives it (`{content: [{type: "text", text}], details, isError, terminate}`, or a
/// string) as the engine's output; the text of its text blocks, other blocks left out.
pub fn output_of(value: &Value) -> ToolOutput {
    let text = match value {
        Value::String(text) => text.clone(),
        _ => text_of(value.get("content")),
    };
    ToolOutput {
        content: vec![ContentBlock::text(text)],
        details: value.get("details").cloned().unwrap_or(Value::Null),
        terminate: value.get("terminate").and_then(Value::as_bool).unwrap_or(false),
    }
}

/// The text of a content value: a string, or the text blocks of an array joined by newlines.
pub fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
