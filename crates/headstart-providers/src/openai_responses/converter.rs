//! The Responses converter: SSE events in, delta events out (the mapping is in the module docs).

use std::collections::HashMap;

use headstart_core::{DoneReason, ModelErrorKind, ToolArguments, Usage};
use serde_json::{json, Value};

use crate::converter::WireDecoder;
use crate::delta_writer::DeltaWriter;
use crate::error::ProviderError;
use crate::payload::{count, minus, string, typed_payload};
use crate::sse::SseEvent;
use crate::wire_error::{error_kind, error_message};

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
#[derive(Debug, Default)]
pub(crate) struct ResponsesDecoder {
    items: HashMap<u64, Item>,
}

impl ResponsesDecoder {
    fn start_from(&mut self, response: Option<&Value>, out: &mut DeltaWriter<'_>) {
        let response = response.unwrap_or(&Value::Null);
        out.start(string(response, "model"), string(response, "id"));
    }

    fn handle(&mut self, kind: &str, data: &Value, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
        let output_index = data.get("output_index").and_then(Value::as_u64);
        match kind {
            "response.created" | "response.in_progress" | "response.queued" => {
                self.start_from(data.get("response"), out);
                return Ok(());
            }
            "error" => {
                out.provider_error(data, None);
                return Ok(());
            }
            _ => {}
        }
        self.start_from(data.get("response"), out);
        match kind {
            "response.output_item.added" => {
                let (Some(output_index), Some(item)) = (output_index, data.get("item")) else {
                    return Err(ProviderError::malformed(FORMAT, kind, "missing output_index or item"));
                };
                self.item_added(output_index, item, out)?;
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
                    self.text_fragment(output_index, data, text, out)?;
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                let delta = data.get("delta").and_then(Value::as_str).unwrap_or("");
                self.text_fragment(output_index, data, delta, out)?;
            }
            "response.output_text.done" | "response.refusal.done" | "response.content_part.done" => {
                let content_index = data.get("content_index").and_then(Value::as_u64).unwrap_or(0);
                if let Some(Item::Message { parts }) = output_index.and_then(|i| self.items.get(&i)) {
                    if let Some(&block) = parts.get(&content_index) {
                        out.close_text(block);
                    }
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let part = data
                    .get("summary_index")
                    .or_else(|| data.get("content_index"))
                    .and_then(Value::as_u64);
                let delta = data.get("delta").and_then(Value::as_str).unwrap_or("");
                self.reasoning_fragment(output_index, part, delta, out)?;
            }
            "response.function_call_arguments.delta" => {
                let delta = data.get("delta").and_then(Value::as_str).unwrap_or("");
                match output_index.and_then(|i| self.items.get(&i)) {
                    Some(Item::FunctionCall { block, .. }) => {
                        let block = *block;
                        if !out.is_open(block) {
                            return Err(ProviderError::protocol(
                                FORMAT,
                                format!("arguments for output item {output_index:?} after it was done"),
                            ));
                        }
                        out.call_delta(block, delta)?;
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
                self.item_done(output_index, item, out);
            }
            "response.completed" => {
                let usage = parse_usage(data.get("response"));
                let reason = if out.calls() > 0 {
                    DoneReason::ToolUse
                } else {
                    DoneReason::Stop
                };
                out.done(reason, usage);
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
                    "max_output_tokens" => out.done(DoneReason::Length, usage),
                    "content_filter" => out.error(
                        ModelErrorKind::Provider,
                        "the provider's content filter stopped the response (response.incomplete)",
                        Some(usage),
                    ),
                    other => out.error(
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
                out.error(
                    error.map_or(ModelErrorKind::Provider, error_kind),
                    format!("the response failed: {message}"),
                    Some(parse_usage(Some(response))),
                );
            }
            _ => {}
        }
        Ok(())
    }

    fn item_added(&mut self, output_index: u64, item: &Value, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
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
                // `async: true`: the model goes on without this call's result (async tool calling).
                let provider_async = item.get("async").and_then(Value::as_bool).unwrap_or(false);
                let block = out.open_call(id, name, provider_async)?;
                out.call_delta(block, item.get("arguments").and_then(Value::as_str).unwrap_or(""))?;
                Item::FunctionCall {
                    block,
                    final_arguments: None,
                }
            }
            Some("message") => Item::Message { parts: HashMap::new() },
            Some("reasoning") => Item::Reasoning {
                block: out.open_thinking(),
                summary: None,
                has_text: false,
            },
            _ => Item::Other,
        };
        self.items.insert(output_index, entry);
        Ok(())
    }

    fn text_fragment(
        &mut self,
        output_index: Option<u64>,
        data: &Value,
        text: &str,
        out: &mut DeltaWriter<'_>,
    ) -> Result<(), ProviderError> {
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
                let block = out.open_text();
                parts.insert(content_index, block);
                block
            }
        };
        if !out.is_open(block) {
            return Err(ProviderError::protocol(
                FORMAT,
                format!("text for output item {output_index} part {content_index} after it was done"),
            ));
        }
        out.text_delta(block, text)
    }

    fn reasoning_fragment(
        &mut self,
        output_index: Option<u64>,
        part: Option<u64>,
        delta: &str,
        out: &mut DeltaWriter<'_>,
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
            out.thinking_delta(block, "\n\n")?;
        }
        *summary = part;
        *has_text |= !delta.is_empty();
        out.thinking_delta(block, delta)
    }

    fn item_done(&mut self, output_index: u64, item: &Value, out: &mut DeltaWriter<'_>) {
        match self.items.get(&output_index) {
            Some(Item::FunctionCall { block, final_arguments }) => {
                let block = *block;
                if item.get("status").and_then(Value::as_str) != Some("completed") {
                    out.seal_cut_off(block);
                    return;
                }
                let final_text = string(item, "arguments").or_else(|| final_arguments.clone());
                let streamed = out.call_text(block).unwrap_or("");
                let arguments = match final_text {
                    Some(text) if text != streamed => Some(match ToolArguments::parse(&text) {
                        ToolArguments::Valid(map) => Value::Object(map),
                        ToolArguments::Invalid { .. } => Value::String(text),
                    }),
                    _ => None,
                };
                out.seal(block, arguments);
            }
            Some(Item::Message { parts }) => {
                let mut blocks: Vec<usize> = parts.values().copied().collect();
                blocks.sort_unstable();
                for block in blocks {
                    out.close_text(block);
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
                out.close_thinking(block, signature);
            }
            Some(Item::Other) | None => {}
        }
    }
}

impl WireDecoder for ResponsesDecoder {
    const FORMAT: &'static str = FORMAT;

    fn event(&mut self, event: &SseEvent, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
        if let Some((kind, value)) = typed_payload(FORMAT, event)? {
            self.handle(&kind, &value, out)?;
        }
        Ok(())
    }

    fn body_ended(&mut self, out: &mut DeltaWriter<'_>) {
        out.error(
            ModelErrorKind::Protocol,
            "the stream ended before response.completed (the connection closed mid-stream)",
            None,
        );
    }

    fn error_usage(&self, _started: bool) -> Option<Usage> {
        None
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
