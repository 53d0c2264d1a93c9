//! MCP results and progress as headstart outputs.

use headstart::core::ContentBlock;
use headstart::{ToolError, ToolOutput};
use rmcp::model::{CallToolResult, ContentBlock as McpBlock, ProgressNotificationParam, ResourceContents};
use serde_json::{json, Map, Value};

use crate::limits::{cut_at_boundary, json_size};

/// A tool result as the call's outcome.
///
/// - `isError: true` → the call's error result, its text blocks as the message;
/// - text blocks → text blocks, in order;
/// - every other block (image, audio, resource, resource link) → a text block describing it, so the model knows
///   it is there, and the block itself under `details.content`;
/// - `structuredContent` → `details.structured_content` (and, when there is no content at all, its JSON text
///   for the model, as MCP servers are asked to send anyway).
pub fn into_output(result: CallToolResult) -> Result<ToolOutput, ToolError> {
    let mut content = Vec::with_capacity(result.content.len());
    let mut raw = Vec::new();
    // Blocks are moved, not copied: a result can be as big as a message may be.
    for block in result.content {
        match block {
            McpBlock::Text(text) => content.push(ContentBlock::text(text.text)),
            other => {
                content.push(ContentBlock::text(describe(&other)));
                // Serializing a type made of strings and JSON values cannot fail.
                raw.push(serde_json::to_value(&other).unwrap_or(Value::Null));
            }
        }
    }
    if result.is_error == Some(true) {
        let message: Vec<&str> = content.iter().filter_map(ContentBlock::as_text).collect();
        let message = message.join("\n");
        return Err(ToolError::new(if message.is_empty() {
            "the MCP tool reported an error without a message".to_owned()
        } else {
            message
        }));
    }
    if content.is_empty() {
        if let Some(structured) = &result.structured_content {
            content.push(ContentBlock::text(structured.to_string()));
        }
    }
    let mut details = Map::new();
    if let Some(structured) = result.structured_content {
        details.insert("structured_content".to_owned(), structured);
    }
    if !raw.is_empty() {
        details.insert("content".to_owned(), Value::Array(raw));
    }
    Ok(ToolOutput {
        content,
        details: if details.is_empty() {
            Value::Null
        } else {
            Value::Object(details)
        },
        terminate: false,
    })
}

/// A call's outcome cut to `max` bytes ([`crate::McpLimits::max_result_bytes`]), so no more is stored or sent to
/// the model: text blocks are kept in order until the budget is spent (the last one cut at a character boundary),
/// then the details if they fit in what is left (serialized), else they are dropped; a closing text block says
/// what was cut and how big the result was. An error's message is cut the same way.
pub(crate) fn cap_outcome(outcome: Result<ToolOutput, ToolError>, max: usize) -> Result<ToolOutput, ToolError> {
    match outcome {
        Ok(output) => Ok(cap_output(output, max)),
        Err(mut error) => {
            let size = error.message.len();
            if size > max {
                cut_at_boundary(&mut error.message, max);
                error.message.push_str(&cut_note(size));
            }
            Err(error)
        }
    }
}

fn cap_output(mut output: ToolOutput, max: usize) -> ToolOutput {
    let size = output.content.iter().map(block_size).sum::<usize>() + details_size(&output.details);
    if size <= max {
        return output;
    }
    let mut left = max;
    let mut kept = Vec::new();
    for block in output.content {
        let cost = block_size(&block);
        if cost <= left {
            left -= cost;
            kept.push(block);
            continue;
        }
        if let ContentBlock::Text { mut text } = block {
            cut_at_boundary(&mut text, left);
            kept.push(ContentBlock::text(text));
        }
        left = 0;
        break;
    }
    if details_size(&output.details) > left {
        output.details = Value::Null;
    }
    kept.push(ContentBlock::text(cut_note(size).trim_start().to_owned()));
    output.content = kept;
    output
}

/// A block's share of the limit: a text's bytes, anything else's JSON.
fn block_size(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Text { text } => text.len(),
        other => json_size(other),
    }
}

/// Details' share of the limit: their JSON, nothing when there are none.
fn details_size(details: &Value) -> usize {
    if details.is_null() {
        0
    } else {
        json_size(details)
    }
}

fn cut_note(size: usize) -> String {
    format!("\n[MCP result cut to the limit: the server sent {size} bytes]")
}

/// What the model reads in place of a block it cannot be given as text.
fn describe(block: &McpBlock) -> String {
    match block {
        McpBlock::Text(text) => text.text.clone(),
        McpBlock::Image(image) => format!(
            "[image {}, {} bytes base64, in the result's details]",
            image.mime_type,
            image.data.len()
        ),
        McpBlock::Audio(audio) => format!(
            "[audio {}, {} bytes base64, in the result's details]",
            audio.mime_type,
            audio.data.len()
        ),
        McpBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => format!("[resource {uri}]\n{text}"),
            ResourceContents::BlobResourceContents {
                uri, mime_type, blob, ..
            } => format!(
                "[resource {uri} ({}), {} bytes base64, in the result's details]",
                mime_type.as_deref().unwrap_or("unknown type"),
                blob.len()
            ),
            _ => "[resource of an unknown kind, in the result's details]".to_owned(),
        },
        McpBlock::ResourceLink(link) => match &link.description {
            Some(description) => format!("[resource link {} ({}): {description}]", link.uri, link.name),
            None => format!("[resource link {} ({})]", link.uri, link.name),
        },
        _ => "[content of a kind headstart does not know, in the result's details]".to_owned(),
    }
}

/// The most of a progress notification's message kept, in bytes: a progress line is a status, and a server may
/// send a message as large as its message cap with every notification.
pub(crate) const MAX_PROGRESS_MESSAGE_BYTES: usize = 4 * 1024;

/// A progress notification as a partial result: a line for the model's view, the numbers in `details`; the message
/// cut to [`MAX_PROGRESS_MESSAGE_BYTES`].
pub(crate) fn progress_update(progress: &ProgressNotificationParam) -> ToolOutput {
    let numbers = match progress.total {
        Some(total) => format!("{}/{total}", progress.progress),
        None => progress.progress.to_string(),
    };
    let message = progress.message.as_ref().map(|message| {
        let mut message = message.clone();
        cut_at_boundary(&mut message, MAX_PROGRESS_MESSAGE_BYTES);
        message
    });
    let text = match &message {
        Some(message) => format!("progress {numbers}: {message}"),
        None => format!("progress {numbers}"),
    };
    ToolOutput::text(text).with_details(json!({
        "progress": progress.progress,
        "total": progress.total,
        "message": message,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_message_is_cut() {
        let progress: ProgressNotificationParam = serde_json::from_value(json!({
            "progressToken": 1, "progress": 1, "total": 2, "message": "é".repeat(1 << 20),
        }))
        .expect("a progress notification");
        let update = progress_update(&progress);
        let text = update.content[0].as_text().expect("text");
        assert!(text.starts_with("progress 1/2: éé"), "{}", &text[..20]);
        assert!(text.len() <= MAX_PROGRESS_MESSAGE_BYTES + 20, "{} bytes", text.len());
        let kept = update.details["message"].as_str().expect("message");
        assert_eq!(kept.len(), MAX_PROGRESS_MESSAGE_BYTES);
    }

    #[test]
    fn error_results_become_the_call_error() {
        let result = CallToolResult::error(vec![McpBlock::text("disk full"), McpBlock::text("try later")]);
        assert_eq!(into_output(result), Err(ToolError::new("disk full\ntry later")));
        let empty = CallToolResult::error(vec![]);
        assert!(into_output(empty).is_err_and(|error| error.message.contains("without a message")));
    }

    #[test]
    fn non_text_blocks_are_described_and_kept() {
        let result = CallToolResult::success(vec![McpBlock::text("here"), McpBlock::image("aGVsbG8=", "image/png")]);
        let output = into_output(result).expect("a success");
        let texts: Vec<&str> = output.content.iter().filter_map(ContentBlock::as_text).collect();
        assert_eq!(texts[0], "here");
        assert!(texts[1].starts_with("[image image/png"), "{}", texts[1]);
        assert_eq!(output.details["content"][0]["type"], "image");
        assert_eq!(output.details["content"][0]["data"], "aGVsbG8=");
    }

    #[test]
    fn structured_content_goes_to_details_and_stands_in_for_missing_text() {
        let output = into_output(CallToolResult::structured(json!({"sum": 3}))).expect("a success");
        assert_eq!(output.details["structured_content"], json!({"sum": 3}));
        assert!(!output.content.is_empty());
        let texts: Vec<&str> = output.content.iter().filter_map(ContentBlock::as_text).collect();
        assert!(texts.iter().any(|text| text.contains("\"sum\":3")), "{texts:?}");
    }

    #[test]
    fn big_results_are_cut_to_the_limit_and_say_so() {
        let big = CallToolResult::success(vec![
            McpBlock::text("é".repeat(600)),
            McpBlock::text("never seen"),
            McpBlock::image("A".repeat(5000), "image/png"),
        ]);
        let output = cap_outcome(into_output(big), 1000).expect("a success");
        let texts: Vec<&str> = output.content.iter().filter_map(ContentBlock::as_text).collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert_eq!(texts[0], "é".repeat(500));
        assert!(
            texts[1].starts_with("[MCP result cut to the limit: the server sent "),
            "{}",
            texts[1]
        );
        assert_eq!(output.details, Value::Null, "the image did not fit");

        let small = cap_outcome(into_output(CallToolResult::success(vec![McpBlock::text("ok")])), 1000);
        assert_eq!(small, Ok(ToolOutput::text("ok")));

        let error = cap_outcome(Err(ToolError::new("x".repeat(2000))), 1000).expect_err("still an error");
        assert!(error.message.starts_with(&"x".repeat(1000)));
        assert!(
            error.message.ends_with("the server sent 2000 bytes]"),
            "{}",
            error.message
        );
        assert!(error.message.len() < 1100);
    }

    #[test]
    fn details_over_what_is_left_are_dropped_and_small_results_untouched() {
        let result = CallToolResult::success(vec![
            McpBlock::text("a".repeat(100)),
            McpBlock::image("aGk=", "image/png"),
        ]);
        let output = cap_outcome(into_output(result), 90).expect("a success");
        assert_eq!(output.details, Value::Null);
        let result = CallToolResult::success(vec![
            McpBlock::text("a".repeat(100)),
            McpBlock::image("aGk=", "image/png"),
        ]);
        let uncut = into_output(result).expect("a success");
        assert_eq!(cap_outcome(Ok(uncut.clone()), 100_000), Ok(uncut));
    }

    #[test]
    fn plain_text_has_no_details() {
        let output = into_output(CallToolResult::success(vec![McpBlock::text("ok")])).expect("a success");
        assert_eq!(output, ToolOutput::text("ok"));
    }
}
