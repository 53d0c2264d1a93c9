//! The Anthropic Messages converter: SSE events in, delta events out (the mapping is in the module docs).

use std::collections::HashMap;

use headstart_core::{DoneReason, ModelErrorKind, Usage};
use serde_json::Value;

use crate::converter::WireDecoder;
use crate::delta_writer::DeltaWriter;
use crate::error::ProviderError;
use crate::payload::{string, typed_payload};
use crate::sse::SseEvent;

const FORMAT: &str = "anthropic";

#[derive(Debug)]
enum Block {
    Text(usize),
    Thinking { block: usize, signature: Option<String> },
    ToolUse { block: usize, start_input: Option<Value> },
    Skipped,
}

/// The Anthropic Messages state machine (one response).
#[derive(Debug, Default)]
pub(crate) struct AnthropicDecoder {
    blocks: HashMap<u64, Block>,
    usage: Usage,
    stop_reason: Option<String>,
}

impl AnthropicDecoder {
    fn update_usage(&mut self, usage: Option<&Value>) {
        let Some(usage) = usage else { return };
        let set = |key: &str, slot: &mut u64| {
            if let Some(value) = usage.get(key).and_then(Value::as_u64) {
                *slot = value;
            }
        };
        set("input_tokens", &mut self.usage.input);
        set("output_tokens", &mut self.usage.output);
        set("cache_read_input_tokens", &mut self.usage.cache_read);
        set("cache_creation_input_tokens", &mut self.usage.cache_write);
    }

    fn wire_index(kind: &str, data: &Value) -> Result<u64, ProviderError> {
        data.get("index")
            .and_then(Value::as_u64)
            .ok_or_else(|| ProviderError::malformed(FORMAT, kind, "missing index"))
    }

    fn handle(&mut self, kind: &str, data: &Value, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
        match kind {
            "ping" => {}
            "error" => {
                let error = data.get("error").unwrap_or(data);
                let usage = out.started().then_some(self.usage);
                out.provider_error(error, usage);
            }
            "message_start" => {
                let message = data.get("message").unwrap_or(&Value::Null);
                out.start(string(message, "model"), string(message, "id"));
                self.update_usage(message.get("usage"));
            }
            "content_block_start" => {
                let index = Self::wire_index(kind, data)?;
                if self.blocks.contains_key(&index) {
                    return Err(ProviderError::protocol(
                        FORMAT,
                        format!("content block {index} started twice"),
                    ));
                }
                let block = data.get("content_block").unwrap_or(&Value::Null);
                let entry = match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let content = out.open_text();
                        out.text_delta(content, block.get("text").and_then(Value::as_str).unwrap_or(""))?;
                        Block::Text(content)
                    }
                    Some("thinking") => {
                        let content = out.open_thinking();
                        out.thinking_delta(content, block.get("thinking").and_then(Value::as_str).unwrap_or(""))?;
                        Block::Thinking {
                            block: content,
                            signature: string(block, "signature").filter(|s| !s.is_empty()),
                        }
                    }
                    Some("tool_use") => {
                        let id = string(block, "id")
                            .ok_or_else(|| ProviderError::malformed(FORMAT, kind, "tool_use block without id"))?;
                        let name = string(block, "name").unwrap_or_default();
                        let content = out.open_call(id, name, false)?;
                        let start_input = block
                            .get("input")
                            .filter(|input| input.as_object().is_some_and(|map| !map.is_empty()))
                            .cloned();
                        Block::ToolUse {
                            block: content,
                            start_input,
                        }
                    }
                    _ => Block::Skipped,
                };
                self.blocks.insert(index, entry);
            }
            "content_block_delta" => {
                let index = Self::wire_index(kind, data)?;
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let field = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or("");
                let delta_type = delta.get("type").and_then(Value::as_str).unwrap_or("");
                match (self.blocks.get_mut(&index), delta_type) {
                    (None, _) => {
                        return Err(ProviderError::protocol(
                            FORMAT,
                            format!("delta for content block {index}, which never started"),
                        ))
                    }
                    (Some(Block::Text(content)), "text_delta") => {
                        let content = *content;
                        out.text_delta(content, field("text"))?;
                    }
                    (Some(Block::Thinking { block, .. }), "thinking_delta") => {
                        let block = *block;
                        out.thinking_delta(block, field("thinking"))?;
                    }
                    (Some(Block::Thinking { signature, .. }), "signature_delta") => {
                        signature.get_or_insert_with(String::new).push_str(field("signature"));
                    }
                    (Some(Block::ToolUse { block, .. }), "input_json_delta") => {
                        let block = *block;
                        out.call_delta(block, field("partial_json"))?;
                    }
                    // citations_delta, deltas of skipped blocks, future delta types.
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = Self::wire_index(kind, data)?;
                match self.blocks.get(&index) {
                    None => {
                        return Err(ProviderError::protocol(
                            FORMAT,
                            format!("stop for content block {index}, which never started"),
                        ))
                    }
                    Some(Block::Text(content)) => out.close_text(*content),
                    Some(Block::Thinking { block, signature }) => out.close_thinking(*block, signature.clone()),
                    Some(Block::ToolUse { block, start_input }) => {
                        let streamed = out.call_text(*block).unwrap_or("");
                        let arguments = start_input.clone().filter(|_| streamed.trim().is_empty());
                        out.seal(*block, arguments);
                    }
                    Some(Block::Skipped) => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = data
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                self.update_usage(data.get("usage"));
            }
            "message_stop" => {
                let usage = self.usage;
                match self.stop_reason.as_deref() {
                    None | Some("end_turn" | "stop_sequence" | "pause_turn") => {
                        let reason = if out.calls() > 0 {
                            DoneReason::ToolUse
                        } else {
                            DoneReason::Stop
                        };
                        out.done(reason, usage);
                    }
                    Some("tool_use") => out.done(DoneReason::ToolUse, usage),
                    Some("max_tokens" | "model_context_window_exceeded") => out.done(DoneReason::Length, usage),
                    Some("refusal") => out.error(
                        ModelErrorKind::Provider,
                        "the model refused to answer (stop_reason refusal)",
                        Some(usage),
                    ),
                    Some(other) => out.error(
                        ModelErrorKind::Provider,
                        format!("the response stopped with stop_reason {other:?}"),
                        Some(usage),
                    ),
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl WireDecoder for AnthropicDecoder {
    const FORMAT: &'static str = FORMAT;

    fn event(&mut self, event: &SseEvent, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
        if let Some((kind, value)) = typed_payload(FORMAT, event)? {
            self.handle(&kind, &value, out)?;
        }
        Ok(())
    }

    fn body_ended(&mut self, out: &mut DeltaWriter<'_>) {
        let usage = self.error_usage(out.started());
        out.error(
            ModelErrorKind::Protocol,
            "the stream ended before message_stop (the connection closed mid-stream)",
            usage,
        );
    }

    fn error_usage(&self, started: bool) -> Option<Usage> {
        started.then_some(self.usage)
    }
}
