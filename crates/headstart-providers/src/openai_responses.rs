//! OpenAI Responses streams (`POST /responses` with `stream: true`).
//!
//! Wire format: named SSE events whose data repeats the name in `type`. Output items are announced by
//! `response.output_item.added` and finished by `response.output_item.done` (with the item's final `status`); the
//! response ends with `response.completed`, `response.incomplete` or `response.failed`; an `error` event reports a
//! failure.
//!
//! Mapping:
//! - `start` at `response.created` (or the first event), with `response.id` and `response.model`.
//! - `message` items: each `output_text` / `refusal` content part becomes a text block, closed at its `.done`.
//! - `reasoning` items: one thinking block per item, opened at `output_item.added`; summary parts
//!   (`response.reasoning_summary_text.delta`, joined by a blank line) and raw reasoning text
//!   (`response.reasoning_text.delta`) are its text. It closes at `output_item.done` with the signature
//!   `{"type":"reasoning","id":...,"encrypted_content":...}` (JSON text), which [`crate::request`] sends back as the
//!   reasoning input item.
//! - `function_call` items: `toolcall_start` (id = `call_id`) at `output_item.added`, argument fragments from
//!   `response.function_call_arguments.delta`. **Sealed only at `response.output_item.done` with `status:
//!   completed`**; if the final `arguments` differ from the fragments, the final text wins. An item done with any
//!   other status (`incomplete`), or still open when the response ends, is sealed invalid (never executed).
//! - `response.completed` → `done` (`tool_use` when the response has calls, else `stop`); `response.incomplete` with
//!   reason `max_output_tokens` → `done(length)`, other reasons (`content_filter`) → `error`; `response.failed` and
//!   `error` → `error` with the provider's message.
//! - Usage: `input_tokens` minus `input_tokens_details.cached_tokens` (and `cache_write_tokens`) → `input`,
//!   `cached_tokens` → `cache_read`, `cache_write_tokens` → `cache_write`, `output_tokens` → `output`.

use std::collections::HashMap;

use headstart_core::{DeltaEvent, DoneReason, ModelError, ModelErrorKind, ToolArguments, Usage};
use serde_json::{json, Value};

use crate::emit::{count, minus, string, typed_payload, Emitter};
use crate::error::ProviderError;
use crate::sse::SseEvent;
use crate::wire_error::{error_kind, error_message};
use crate::StreamConverter;

const FORMAT: &str = "openai-responses";

#[derive(Debug)]
enum Item {
    Message {
        /// content_index → content block index.
        parts: HashMap<u64, usize>,
    },
    Reasoning {
        block: usize,
        /// The summary part the last fragment belonged to.
        summary: Option<u64>,
        has_text: bool,
    },
    FunctionCall {
        block: usize,
        /// `response.function_call_arguments.done`'s text.
        final_arguments: Option<String>,
    },
    Other,
}

/// The Responses state machine (one response).
#[derive(Debug)]
pub struct ResponsesConverter {
    out: Emitter,
    items: HashMap<u64, Item>,
}

impl Default for ResponsesConverter {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponsesConverter {
    /// A converter for one response.
    pub fn new() -> Self {
        ResponsesConverter {
            out: Emitter::new(FORMAT),
            items: HashMap::new(),
        }
    }

    fn start_from(&mut self, response: Option<&Value>) {
        let response = response.unwrap_or(&Value::Null);
        self.out.start(string(response, "model"), string(response, "id"));
    }

    fn handle(&mut self, kind: &str, data: &Value) -> Result<(), ProviderError> {
        let output_index = data.get("output_index").and_then(Value::as_u64);
        match kind {
            "response.created" | "response.in_progress" | "response.queued" => {
                self.start_from(data.get("response"));
                return Ok(());
            }
            "error" => {
                self.out.provider_error(data, None);
                return Ok(());
            }
            _ => {}
        }
        self.start_from(data.get("response"));
        match kind {
            "response.output_item.added" => {
                let (Some(output_index), Some(item)) = (output_index, data.get("item")) else {
                    return Err(ProviderError::malformed(FORMAT, kind, "missing output_index or item"));
                };
                self.item_added(output_index, item)?;
            }
            "response.content_part.added" => {
                let part = data.get("part").unwrap_or(&Value::Null);
                if matches!(
                    part.get("type").and_then(Value::as_str),
                    Some("output_text" | "refusal")
                ) {
                    let text = ["text", "refusal"]
                        .iter()
                        .find_map(|key| part.get(*key).and_then(Value::as_str))
                        .unwrap_or("");
                    self.text_fragment(output_index, data, text)?;
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let delta = data.get("delta").and_then(Value::as_str).unwrap_or("");
                self.text_fragment(output_index, data, delta)?;
            }
            "response.output_text.done" | "response.refusal.done" | "response.content_part.done" => {
                let content_index = data.get("content_index").and_then(Value::as_u64).unwrap_or(0);
                if let Some(Item::Message { parts }) = output_index.and_then(|i| self.items.get(&i)) {
                    if let Some(&block) = parts.get(&content_index) {
                        self.out.close_text(block);
                    }
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let part = data
                    .get("summary_index")
                    .or_else(|| data.get("content_index"))
                    .and_then(Value::as_u64);
                let delta = data.get("delta").and_then(Value::as_str).unwrap_or("");
                self.reasoning_fragment(output_index, part, delta)?;
            }
            "response.function_call_arguments.delta" => {
                let delta = data.get("delta").and_then(Value::as_str).unwrap_or("");
                match output_index.and_then(|i| self.items.get(&i)) {
                    Some(Item::FunctionCall { block, .. }) => {
                        let block = *block;
                        if !self.out.is_open(block) {
                            return Err(ProviderError::protocol(
                                FORMAT,
                                format!("arguments for output item {output_index:?} after it was done"),
                            ));
                        }
                        self.out.call_delta(block, delta)?;
                    }
                    _ => {
                        return Err(ProviderError::protocol(
                            FORMAT,
                            format!("arguments for output item {output_index:?}, which is not a function call"),
                        ))
                    }
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(Item::FunctionCall { final_arguments, .. }) =
                    output_index.and_then(|i| self.items.get_mut(&i))
                {
                    *final_arguments = string(data, "arguments");
                }
            }
            "response.output_item.done" => {
                let (Some(output_index), Some(item)) = (output_index, data.get("item")) else {
                    return Err(ProviderError::malformed(FORMAT, kind, "missing output_index or item"));
                };
                self.item_done(output_index, item);
            }
            "response.completed" => {
                let usage = parse_usage(data.get("response"));
                let reason = if self.out.calls() > 0 {
                    DoneReason::ToolUse
                } else {
                    DoneReason::Stop
                };
                self.out.done(reason, usage);
            }
            "response.incomplete" => {
                let response = data.get("response").unwrap_or(&Value::Null);
                let usage = parse_usage(Some(response));
                let reason = response
                    .get("incomplete_details")
                    .and_then(|details| details.get("reason"))
                    .and_then(Value::as_str)
                    .unwrap_or("unknown");
                match reason {
                    // Open calls get no `output_item.done` with status completed: `done` seals them invalid.
                    "max_output_tokens" => self.out.done(DoneReason::Length, usage),
                    "content_filter" => self.out.error(
                        ModelErrorKind::Provider,
                        "the provider's content filter stopped the response (response.incomplete)",
                        Some(usage),
                    ),
                    other => self.out.error(
                        ModelErrorKind::Provider,
                        format!("the response is incomplete: {other}"),
                        Some(usage),
                    ),
                }
            }
            "response.failed" => {
                let response = data.get("response").unwrap_or(&Value::Null);
                let error = response.get("error").filter(|error| !error.is_null());
                let message = error
                    .map(error_message)
                    .unwrap_or_else(|| "no error details".to_owned());
                self.out.error(
                    error.map_or(ModelErrorKind::Provider, error_kind),
                    format!("the response failed: {message}"),
                    Some(parse_usage(Some(response))),
                );
            }
            _ => {}
        }
        Ok(())
    }

    fn item_added(&mut self, output_index: u64, item: &Value) -> Result<(), ProviderError> {
        if self.items.contains_key(&output_index) {
            return Err(ProviderError::protocol(
                FORMAT,
                format!("output item {output_index} was added twice"),
            ));
        }
        let entry = match item.get("type").and_then(Value::as_str) {
            Some("function_call") => {
                let id = string(item, "call_id")
                    .or_else(|| string(item, "id"))
                    .ok_or_else(|| ProviderError::malformed(FORMAT, "response.output_item.added", "call without id"))?;
                let name = string(item, "name").unwrap_or_default();
                let block = self.out.open_call(id, name)?;
                self.out
                    .call_delta(block, item.get("arguments").and_then(Value::as_str).unwrap_or(""))?;
                Item::FunctionCall {
                    block,
                    final_arguments: None,
                }
            }
            Some("message") => Item::Message { parts: HashMap::new() },
            Some("reasoning") => Item::Reasoning {
                block: self.out.open_thinking(),
                summary: None,
                has_text: false,
            },
            _ => Item::Other,
        };
        self.items.insert(output_index, entry);
        Ok(())
    }

    fn text_fragment(&mut self, output_index: Option<u64>, data: &Value, text: &str) -> Result<(), ProviderError> {
        let content_index = data.get("content_index").and_then(Value::as_u64).unwrap_or(0);
        let Some(output_index) = output_index else {
            return Err(ProviderError::malformed(FORMAT, "text", "missing output_index"));
        };
        // Text for an item never announced is accepted as a message (lenient towards proxies).
        let item = self
            .items
            .entry(output_index)
            .or_insert_with(|| Item::Message { parts: HashMap::new() });
        let Item::Message { parts } = item else {
            return Err(ProviderError::protocol(
                FORMAT,
                format!("text for output item {output_index}, which is not a message"),
            ));
        };
        let block = match parts.get(&content_index) {
            Some(&block) => block,
            None => {
                let block = self.out.open_text();
                parts.insert(content_index, block);
                block
            }
        };
        if !self.out.is_open(block) {
            return Err(ProviderError::protocol(
                FORMAT,
                format!("text for output item {output_index} part {content_index} after it was done"),
            ));
        }
        self.out.text_delta(block, text)
    }

    fn reasoning_fragment(
        &mut self,
        output_index: Option<u64>,
        part: Option<u64>,
        delta: &str,
    ) -> Result<(), ProviderError> {
        let Some(Item::Reasoning {
            block,
            summary,
            has_text,
        }) = output_index.and_then(|i| self.items.get_mut(&i))
        else {
            return Err(ProviderError::protocol(
                FORMAT,
                format!("reasoning text for output item {output_index:?}, which is not a reasoning item"),
            ));
        };
        let block = *block;
        if *has_text && *summary != part && !delta.is_empty() {
            self.out.thinking_delta(block, "\n\n")?;
        }
        *summary = part;
        *has_text |= !delta.is_empty();
        self.out.thinking_delta(block, delta)
    }

    fn item_done(&mut self, output_index: u64, item: &Value) {
        match self.items.get(&output_index) {
            Some(Item::FunctionCall { block, final_arguments }) => {
                let block = *block;
                if item.get("status").and_then(Value::as_str) != Some("completed") {
                    self.out.seal_cut_off(block);
                    return;
                }
                let final_text = string(item, "arguments").or_else(|| final_arguments.clone());
                let streamed = self.out.call_text(block).unwrap_or("");
                let arguments = match final_text {
                    Some(text) if text != streamed => Some(match ToolArguments::parse(&text) {
                        ToolArguments::Valid(map) => Value::Object(map),
                        ToolArguments::Invalid { .. } => Value::String(text),
                    }),
                    _ => None,
                };
                self.out.seal(block, arguments);
            }
            Some(Item::Message { parts }) => {
                let mut blocks: Vec<usize> = parts.values().copied().collect();
                blocks.sort_unstable();
                for block in blocks {
                    self.out.close_text(block);
                }
            }
            Some(Item::Reasoning { block, .. }) => {
                let block = *block;
                let signature = string(item, "id").map(|id| {
                    json!({
                        "type": "reasoning",
                        "id": id,
                        "encrypted_content": item.get("encrypted_content").cloned().unwrap_or(Value::Null),
                    })
                    .to_string()
                });
                self.out.close_thinking(block, signature);
            }
            Some(Item::Other) | None => {}
        }
    }
}

impl StreamConverter for ResponsesConverter {
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
        self.out.error(
            ModelErrorKind::Protocol,
            "the stream ended before response.completed (the connection closed mid-stream)",
            None,
        );
        self.out.take()
    }

    fn fail(&mut self, error: &ModelError) -> Vec<DeltaEvent> {
        self.out.fail(error, None)
    }

    fn is_ended(&self) -> bool {
        self.out.ended()
    }
}

fn parse_usage(response: Option<&Value>) -> Usage {
    let Some(usage) = response.and_then(|r| r.get("usage")).filter(|u| u.is_object()) else {
        return Usage::default();
    };
    let cached = count(usage, &["input_tokens_details", "cached_tokens"]);
    let cache_write = count(usage, &["input_tokens_details", "cache_write_tokens"]);
    Usage {
        input: minus(count(usage, &["input_tokens"]), cached.saturating_add(cache_write)),
        output: count(usage, &["output_tokens"]),
        cache_read: cached,
        cache_write,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[(&str, Value)]) -> Vec<DeltaEvent> {
        let events: Vec<SseEvent> = events
            .iter()
            .map(|(name, data)| {
                let mut data = data.clone();
                data["type"] = json!(name);
                SseEvent::named(*name, data.to_string())
            })
            .collect();
        crate::convert_events(crate::WireFormat::OpenAiResponses, &events, &Default::default())
            .into_iter()
            .map(|(_, e)| e)
            .collect()
    }

    #[test]
    fn reasoning_and_text_blocks_with_signature_and_restated_arguments() {
        let events = run(&[
            (
                "response.created",
                json!({"response": {"id": "resp_1", "model": "gpt"}}),
            ),
            (
                "response.output_item.added",
                json!({"output_index": 0, "item": {"type": "reasoning", "id": "rs_1"}}),
            ),
            (
                "response.reasoning_summary_text.delta",
                json!({"output_index": 0, "summary_index": 0, "delta": "a"}),
            ),
            (
                "response.reasoning_summary_text.delta",
                json!({"output_index": 0, "summary_index": 1, "delta": "b"}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc"}}),
            ),
            (
                "response.output_item.added",
                json!({"output_index": 1, "item": {"type": "message"}}),
            ),
            (
                "response.content_part.added",
                json!({"output_index": 1, "content_index": 0, "part": {"type": "output_text", "text": ""}}),
            ),
            (
                "response.output_text.delta",
                json!({"output_index": 1, "content_index": 0, "delta": "hi"}),
            ),
            (
                "response.output_text.done",
                json!({"output_index": 1, "content_index": 0}),
            ),
            (
                "response.output_item.added",
                json!({"output_index": 2, "item": {"type": "function_call", "call_id": "c1", "name": "f", "arguments": ""}}),
            ),
            (
                "response.function_call_arguments.delta",
                json!({"output_index": 2, "delta": "{\"a\""}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": 2, "item": {"type": "function_call", "call_id": "c1", "status": "completed", "arguments": "{\"a\": 1}"}}),
            ),
            (
                "response.completed",
                json!({"response": {"usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 3}}}),
            ),
        ]);
        let mut acc = headstart_core::Accumulator::new();
        for event in events.clone() {
            acc.apply(event).unwrap();
        }
        let message = acc.snapshot();
        assert_eq!(
            serde_json::to_value(&message.content).unwrap(),
            json!([
                {"type": "thinking", "thinking": "a\n\nb", "signature": "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"encrypted_content\":\"enc\"}"},
                {"type": "text", "text": "hi"},
                {"type": "tool_call", "id": "c1", "name": "f", "arguments": {"a": 1}},
            ])
        );
        assert_eq!(message.stop_reason, headstart_core::StopReason::ToolUse);
        assert_eq!(
            message.usage,
            Usage {
                input: 6,
                output: 3,
                cache_read: 4,
                cache_write: 0
            }
        );
    }

    #[test]
    fn failed_and_error_events_end_as_error() {
        let events = run(&[
            ("response.created", json!({"response": {"id": "r"}})),
            (
                "response.failed",
                json!({"response": {"error": {"code": "server_error", "message": "boom"}}}),
            ),
        ]);
        assert!(
            matches!(events.last(), Some(DeltaEvent::Error { message, .. }) if message == "the response failed: boom (server_error)")
        );
        let events = run(&[("error", json!({"code": "rate_limit_exceeded", "message": "slow down"}))]);
        assert_eq!(events[0].type_name(), "start");
        assert!(matches!(events.last(), Some(DeltaEvent::Error { message, .. }) if message.contains("slow down")));
    }
}
