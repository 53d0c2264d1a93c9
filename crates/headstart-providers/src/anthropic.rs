//! Anthropic Messages streams (`POST /v1/messages` with `stream: true`).
//!
//! Wire format: named SSE events (`message_start`, `content_block_start/delta/stop`, `message_delta`,
//! `message_stop`, `ping`, `error`), each data object repeating its name in `type`.
//!
//! Mapping:
//! - `start` at `message_start`, with `message.model` and `message.id`.
//! - `text` blocks → text blocks; `thinking` blocks → thinking blocks, with the `signature_delta` as the signature
//!   at `thinking_end`; `tool_use` blocks → tool calls whose `input_json_delta` fragments are the argument text.
//!   Other block types (server tool use and results, `redacted_thinking`) are skipped; content indices stay
//!   gapless because headstart assigns its own.
//! - **Sealing:** a call is sealed at its own `content_block_stop`, before the stream goes on. A call still open at
//!   `message_stop` (no `content_block_stop`) is sealed invalid. If a `tool_use` block's start carries a non-empty
//!   `input` and no fragments follow, that input is the call's arguments.
//! - `message_stop` → `done` with the `message_delta` stop reason: `end_turn`, `stop_sequence`, `pause_turn` →
//!   `stop`; `tool_use` → `tool_use`; `max_tokens`, `model_context_window_exceeded` → `length`; `refusal` and
//!   unknown reasons → `error`. An `error` event → `error` with its message. A body that ends before
//!   `message_stop` → `error`.
//! - Usage: `input_tokens` → `input`, `cache_read_input_tokens` → `cache_read`, `cache_creation_input_tokens` →
//!   `cache_write`, `output_tokens` → `output`; `message_delta` updates whichever counters it carries.

use std::collections::HashMap;

use headstart_core::{DeltaEvent, DoneReason, ModelError, ModelErrorKind, Usage};
use serde_json::Value;

use crate::emit::{string, typed_payload, Emitter};
use crate::error::ProviderError;
use crate::sse::SseEvent;
use crate::StreamConverter;

const FORMAT: &str = "anthropic";

#[derive(Debug)]
enum Block {
    Text(usize),
    Thinking { block: usize, signature: Option<String> },
    ToolUse { block: usize, start_input: Option<Value> },
    Skipped,
}

/// The Anthropic Messages state machine (one response).
#[derive(Debug)]
pub struct AnthropicConverter {
    out: Emitter,
    blocks: HashMap<u64, Block>,
    usage: Usage,
    stop_reason: Option<String>,
}

impl Default for AnthropicConverter {
    fn default() -> Self {
        Self::new()
    }
}

impl AnthropicConverter {
    /// A converter for one response.
    pub fn new() -> Self {
        AnthropicConverter {
            out: Emitter::new(FORMAT),
            blocks: HashMap::new(),
            usage: Usage::default(),
            stop_reason: None,
        }
    }

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

    fn handle(&mut self, kind: &str, data: &Value) -> Result<(), ProviderError> {
        match kind {
            "ping" => {}
            "error" => {
                let error = data.get("error").unwrap_or(data);
                let usage = self.out.started().then_some(self.usage);
                self.out.provider_error(error, usage);
            }
            "message_start" => {
                let message = data.get("message").unwrap_or(&Value::Null);
                self.out.start(string(message, "model"), string(message, "id"));
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
                        let content = self.out.open_text();
                        self.out
                            .text_delta(content, block.get("text").and_then(Value::as_str).unwrap_or(""))?;
                        Block::Text(content)
                    }
                    Some("thinking") => {
                        let content = self.out.open_thinking();
                        self.out
                            .thinking_delta(content, block.get("thinking").and_then(Value::as_str).unwrap_or(""))?;
                        Block::Thinking {
                            block: content,
                            signature: string(block, "signature").filter(|s| !s.is_empty()),
                        }
                    }
                    Some("tool_use") => {
                        let id = string(block, "id")
                            .ok_or_else(|| ProviderError::malformed(FORMAT, kind, "tool_use block without id"))?;
                        let name = string(block, "name").unwrap_or_default();
                        let content = self.out.open_call(id, name)?;
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
                        self.out.text_delta(content, field("text"))?;
                    }
                    (Some(Block::Thinking { block, .. }), "thinking_delta") => {
                        let block = *block;
                        self.out.thinking_delta(block, field("thinking"))?;
                    }
                    (Some(Block::Thinking { signature, .. }), "signature_delta") => {
                        signature.get_or_insert_with(String::new).push_str(field("signature"));
                    }
                    (Some(Block::ToolUse { block, .. }), "input_json_delta") => {
                        let block = *block;
                        self.out.call_delta(block, field("partial_json"))?;
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
                    Some(Block::Text(content)) => self.out.close_text(*content),
                    Some(Block::Thinking { block, signature }) => self.out.close_thinking(*block, signature.clone()),
                    Some(Block::ToolUse { block, start_input }) => {
                        let streamed = self.out.call_text(*block).unwrap_or("");
                        let arguments = start_input.clone().filter(|_| streamed.trim().is_empty());
                        self.out.seal(*block, arguments);
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
                        let reason = if self.out.calls() > 0 {
                            DoneReason::ToolUse
                        } else {
                            DoneReason::Stop
                        };
                        self.out.done(reason, usage);
                    }
                    Some("tool_use") => self.out.done(DoneReason::ToolUse, usage),
                    Some("max_tokens" | "model_context_window_exceeded") => self.out.done(DoneReason::Length, usage),
                    Some("refusal") => self.out.error(
                        ModelErrorKind::Provider,
                        "the model refused to answer (stop_reason refusal)",
                        Some(usage),
                    ),
                    Some(other) => self.out.error(
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

impl StreamConverter for AnthropicConverter {
    fn push(&mut self, event: &SseEvent) -> Result<Vec<DeltaEvent>, ProviderError> {
        if self.out.ended() {
            return Ok(Vec::new());
        }
        if let Some((kind, value)) = typed_payload(FORMAT, event)? {
            self.handle(&kind, &value)?;
        }
        Ok(self.out.take())
    }

    fn finish(&mut self) -> Vec<DeltaEvent> {
        let usage = self.out.started().then_some(self.usage);
        self.out.error(
            ModelErrorKind::Protocol,
            "the stream ended before message_stop (the connection closed mid-stream)",
            usage,
        );
        self.out.take()
    }

    fn fail(&mut self, error: &ModelError) -> Vec<DeltaEvent> {
        let usage = self.out.started().then_some(self.usage);
        self.out.fail(error, usage)
    }

    fn is_ended(&self) -> bool {
        self.out.ended()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(events: &[Value]) -> Vec<DeltaEvent> {
        let events: Vec<SseEvent> = events
            .iter()
            .map(|data| SseEvent::named(data["type"].as_str().unwrap(), data.to_string()))
            .collect();
        crate::convert_events(crate::WireFormat::Anthropic, &events, &Default::default())
            .into_iter()
            .map(|(_, e)| e)
            .collect()
    }

    #[test]
    fn thinking_signature_skipped_blocks_and_start_input() {
        let events = run(&[
            json!({"type": "message_start", "message": {"id": "msg", "model": "claude", "usage": {"input_tokens": 5, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 2, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "server_tool_use", "id": "s", "name": "web_search"}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}}),
            json!({"type": "content_block_stop", "index": 2}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
            json!({"type": "message_stop"}),
        ]);
        let mut acc = headstart_core::Accumulator::new();
        for event in events {
            acc.apply(event).unwrap();
        }
        let message = acc.snapshot();
        assert_eq!(
            serde_json::to_value(&message.content).unwrap(),
            json!([
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "tool_call", "id": "t", "name": "f", "arguments": {"a": 1}},
            ])
        );
        assert_eq!(
            message.usage,
            Usage {
                input: 5,
                output: 9,
                cache_read: 7,
                cache_write: 2
            }
        );
    }

    #[test]
    fn a_call_without_content_block_stop_is_sealed_invalid_and_errors_end_as_error() {
        let events = run(&[
            json!({"type": "message_start", "message": {"id": "msg"}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}),
            json!({"type": "message_stop"}),
        ]);
        assert!(matches!(
            &events[events.len() - 2],
            DeltaEvent::ToolcallEnd { arguments: Some(Value::String(raw)), .. } if raw == "{}"
        ));
        assert!(matches!(
            events.last(),
            Some(DeltaEvent::Done {
                stop_reason: DoneReason::Length,
                ..
            })
        ));
        let events = run(&[
            json!({"type": "message_start", "message": {"id": "msg"}}),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ]);
        assert!(
            matches!(events.last(), Some(DeltaEvent::Error { message, kind: Some(ModelErrorKind::Overloaded), .. }) if message == "provider error: Overloaded (overloaded_error)")
        );
    }
}
