//! The Chat Completions converter: SSE events in, delta events out (the mapping is in the module docs).

use headstart_core::{DoneReason, ModelErrorKind, Usage};
use serde_json::Value;

use crate::converter::{ConvertOptions, SealAt, WireDecoder};
use crate::delta_writer::DeltaWriter;
use crate::error::ProviderError;
use crate::payload::{count, minus, parse_json, string};
use crate::sse::SseEvent;

use super::object_end::{is_json_whitespace, ObjectEnd, ObjectState};

const FORMAT: &str = "openai-chat";

#[derive(Debug)]
struct Call {
    wire_index: u64,
    id: Option<String>,
    name: Option<String>,
    /// Content index once `toolcall_start` was emitted.
    content_index: Option<usize>,
    /// Argument text received before the call could be started (no name yet).
    pending: String,
    /// Where its argument text stands as a JSON object.
    object: ObjectEnd,
    /// Why it was sealed, once it was.
    sealed: Option<SealedBy>,
}

/// What sealed a call: the error for a late fragment says what the server did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SealedBy {
    /// Its arguments formed a complete JSON object.
    CompleteObject,
    /// A call at a higher index started.
    NextIndex,
    /// `finish_reason`.
    Finish,
}

#[derive(Debug, Clone)]
enum Finish {
    Done(DoneReason),
    Error(String),
}

/// The Chat Completions state machine (one response).
#[derive(Debug)]
pub(crate) struct ChatDecoder {
    seal_at: SealAt,
    text: Option<usize>,
    thinking: Option<usize>,
    calls: Vec<Call>,
    /// The call that received the most recent tool-call fragment.
    last_call: Option<usize>,
    /// A fragment arrived for a call older than the newest one.
    interleaved: bool,
    finish: Option<Finish>,
    usage: Option<Usage>,
}

impl ChatDecoder {
    /// A decoder for one response.
    pub(crate) fn new(options: &ConvertOptions) -> Self {
        ChatDecoder {
            seal_at: options.seal_at,
            text: None,
            thinking: None,
            calls: Vec::new(),
            last_call: None,
            interleaved: false,
            finish: None,
            usage: None,
        }
    }

    fn close_text(&mut self, out: &mut DeltaWriter<'_>) {
        if let Some(index) = self.text.take() {
            out.close_text(index);
        }
    }

    fn close_thinking(&mut self, out: &mut DeltaWriter<'_>) {
        if let Some(index) = self.thinking.take() {
            out.close_thinking(index, None);
        }
    }

    fn chunk(&mut self, chunk: &Value, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
        if let Some(error) = chunk.get("error").filter(|error| !error.is_null()) {
            let usage = self.usage;
            out.provider_error(error, usage);
            return Ok(());
        }
        out.start(string(chunk, "model"), string(chunk, "id"));
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            self.usage = Some(parse_usage(usage));
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Ok(());
        };
        for choice in choices {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            if self.finish.is_some() {
                // Content after finish_reason: nothing may change a sealed response.
                continue;
            }
            let delta = choice.get("delta").unwrap_or(&Value::Null);
            let reasoning = ["reasoning_content", "reasoning"]
                .iter()
                .find_map(|key| delta.get(*key).and_then(Value::as_str))
                .unwrap_or("");
            if !reasoning.is_empty() {
                self.close_text(out);
                let index = match self.thinking {
                    Some(index) => index,
                    None => *self.thinking.insert(out.open_thinking()),
                };
                out.thinking_delta(index, reasoning)?;
            }
            let text = delta.get("content").and_then(Value::as_str).unwrap_or("");
            if !text.is_empty() {
                self.close_thinking(out);
                let index = match self.text {
                    Some(index) => index,
                    None => *self.text.insert(out.open_text()),
                };
                out.text_delta(index, text)?;
            }
            if let Some(tool_calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for fragment in tool_calls {
                    self.close_thinking(out);
                    self.close_text(out);
                    self.tool_call_fragment(fragment, out)?;
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason(reason, out)?;
            }
        }
        Ok(())
    }

    fn tool_call_fragment(&mut self, fragment: &Value, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
        let id = string(fragment, "id").filter(|id| !id.is_empty());
        let function = fragment.get("function").unwrap_or(&Value::Null);
        let name = string(function, "name").filter(|name| !name.is_empty());
        let arguments = function.get("arguments").and_then(Value::as_str).unwrap_or("");
        let newest_wire_index = self.calls.last().map(|call| call.wire_index);
        let wire_index = match fragment.get("index").and_then(Value::as_u64) {
            Some(index) => index,
            // No index (some servers omit it): a new id is a new call, anything else continues the latest one.
            None => match (&id, self.calls.last()) {
                (Some(id), Some(last)) if last.id.as_ref() != Some(id) => last.wire_index + 1,
                (_, Some(last)) => last.wire_index,
                (_, None) => 0,
            },
        };
        // The latest call at this index; a different id at a used index is a new call (gateways that reuse indices).
        let existing = self
            .calls
            .iter()
            .rposition(|call| call.wire_index == wire_index)
            .filter(|&slot| match (&id, &self.calls[slot].id) {
                (Some(new), Some(old)) => new == old,
                _ => true,
            });
        let slot = match existing {
            Some(slot) => slot,
            None => {
                self.calls.push(Call {
                    wire_index,
                    id: None,
                    name: None,
                    content_index: None,
                    pending: String::new(),
                    object: ObjectEnd::default(),
                    sealed: None,
                });
                self.calls.len() - 1
            }
        };
        if let Some(sealed_by) = self.calls[slot].sealed {
            return self.after_seal(slot, sealed_by, arguments);
        }
        if slot + 1 != self.calls.len() {
            self.interleaved = true;
        }
        self.last_call = Some(slot);
        let call = &mut self.calls[slot];
        if call.id.is_none() {
            call.id = id;
        }
        if call.name.is_none() {
            call.name = name;
        }
        match call.content_index {
            Some(index) => {
                out.call_delta(index, arguments)?;
                self.read_arguments(slot, arguments, out)?;
            }
            None => {
                call.pending.push_str(arguments);
                if call.name.is_some() {
                    if self.seal_at.on_next_index() && newest_wire_index.is_some_and(|newest| wire_index > newest) {
                        self.seal_calls_below(wire_index, out);
                    }
                    self.start_call(slot, out)?;
                }
            }
        }
        Ok(())
    }

    /// A fragment for a call already sealed. One that changes nothing (no argument text, or whitespace outside a
    /// string) is what some servers send; anything else would change arguments that may already have run.
    fn after_seal(&self, slot: usize, sealed_by: SealedBy, arguments: &str) -> Result<(), ProviderError> {
        let call = &self.calls[slot];
        let inert = arguments.bytes().all(is_json_whitespace) && !call.object.in_string();
        if inert {
            return Ok(());
        }
        let what = match sealed_by {
            SealedBy::CompleteObject => {
                "after its arguments had formed a complete JSON object (the server sends \
                 text after a complete object)"
            }
            SealedBy::NextIndex => "after a call at a higher index had started (the server interleaves calls)",
            SealedBy::Finish => "after finish_reason",
        };
        Err(ProviderError::protocol(
            FORMAT,
            format!(
                "more arguments for tool call index {} arrived {what}; the call was sealed and may have run, so \
                 the response stops here. To read this server, seal calls at finish_reason instead \
                 (`--seal-at finish`, Python `seal=\"finish\"`, `ConvertOptions {{ seal_at: SealAt::Finish }}`)",
                call.wire_index
            ),
        ))
    }

    /// Feeds argument text of a started call to its scanner; a complete object seals the call (by default).
    fn read_arguments(&mut self, slot: usize, arguments: &str, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
        let call = &mut self.calls[slot];
        // Text after a complete object cannot happen here: the object's completion sealed the call (with
        // `SealAt::Complete`), and otherwise the accumulator judges the whole text at the seal.
        let _ = call.object.push(arguments);
        if self.seal_at.on_complete_object() && call.object.state() == ObjectState::Complete {
            self.seal_call(slot, SealedBy::CompleteObject, false, out);
        }
        Ok(())
    }

    /// Seals every open call at a lower index: a call at `wire_index` started.
    fn seal_calls_below(&mut self, wire_index: u64, out: &mut DeltaWriter<'_>) {
        for slot in 0..self.calls.len() {
            if self.calls[slot].wire_index < wire_index {
                self.seal_call(slot, SealedBy::NextIndex, false, out);
            }
        }
    }

    fn start_call(&mut self, slot: usize, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
        let call = &mut self.calls[slot];
        if call.content_index.is_some() {
            return Ok(());
        }
        let id = call
            .id
            .get_or_insert_with(|| format!("call_{}_{}", uuid::Uuid::now_v7().simple(), slot))
            .clone();
        let name = call.name.clone().unwrap_or_default();
        let pending = std::mem::take(&mut call.pending);
        let index = out.open_call(id, name, false)?;
        self.calls[slot].content_index = Some(index);
        out.call_delta(index, &pending)?;
        self.read_arguments(slot, &pending, out)
    }

    fn seal_call(&mut self, slot: usize, by: SealedBy, cut_off: bool, out: &mut DeltaWriter<'_>) {
        let call = &mut self.calls[slot];
        if call.sealed.is_some() {
            return;
        }
        call.sealed = Some(by);
        if let Some(index) = call.content_index {
            if cut_off {
                out.seal_cut_off(index);
            } else {
                out.seal(index, None);
            }
        }
    }

    fn finish_reason(&mut self, reason: &str, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
        self.close_thinking(out);
        self.close_text(out);
        // A call whose name never came still gets a block, so what the model produced stays visible.
        for slot in 0..self.calls.len() {
            self.start_call(slot, out)?;
        }
        let finish = match reason {
            "stop" | "eos" | "end_turn" | "stop_sequence" => Finish::Done(DoneReason::Stop),
            "tool_calls" | "function_call" => Finish::Done(DoneReason::ToolUse),
            "length" | "max_tokens" | "model_length" => Finish::Done(DoneReason::Length),
            "content_filter" => Finish::Error("the provider's content filter stopped the response".to_owned()),
            other => Finish::Error(format!("the response stopped with finish_reason {other:?}")),
        };
        match finish {
            Finish::Done(DoneReason::Length) => {
                let cut_off = |slot: usize, last: Option<usize>, interleaved: bool| interleaved || Some(slot) == last;
                for slot in 0..self.calls.len() {
                    let cut_off = cut_off(slot, self.last_call, self.interleaved);
                    self.seal_call(slot, SealedBy::Finish, cut_off, out);
                }
            }
            Finish::Done(_) => {
                for slot in 0..self.calls.len() {
                    self.seal_call(slot, SealedBy::Finish, false, out);
                }
            }
            // An error end seals nothing: nothing of the response runs any more.
            Finish::Error(_) => {}
        }
        self.finish = Some(finish);
        Ok(())
    }

    fn end(&mut self, out: &mut DeltaWriter<'_>) {
        let usage = self.usage;
        match self.finish.clone() {
            Some(Finish::Done(mut reason)) => {
                if reason == DoneReason::Stop && out.calls() > 0 {
                    reason = DoneReason::ToolUse;
                }
                out.done(reason, usage.unwrap_or_default());
            }
            Some(Finish::Error(message)) => out.error(ModelErrorKind::Provider, message, usage),
            None => out.error(
                ModelErrorKind::Protocol,
                "the stream ended before finish_reason (the connection closed mid-stream)",
                usage,
            ),
        }
    }
}

impl WireDecoder for ChatDecoder {
    const FORMAT: &'static str = FORMAT;

    fn event(&mut self, event: &SseEvent, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.end(out);
        } else if !data.is_empty() {
            let chunk = parse_json(FORMAT, &event.event, data)?;
            self.chunk(&chunk, out)?;
        }
        Ok(())
    }

    fn body_ended(&mut self, out: &mut DeltaWriter<'_>) {
        self.end(out);
    }

    fn error_usage(&self, _started: bool) -> Option<Usage> {
        self.usage
    }
}

/// Chat Completions usage (also accepts DeepSeek's `prompt_cache_hit_tokens`).
fn parse_usage(usage: &Value) -> Usage {
    let prompt = count(usage, &["prompt_tokens"]);
    let cached = match count(usage, &["prompt_tokens_details", "cached_tokens"]) {
        0 => count(usage, &["prompt_cache_hit_tokens"]),
        cached => cached,
    };
    let cache_write = count(usage, &["prompt_tokens_details", "cache_write_tokens"]);
    Usage {
        input: minus(prompt, cached.saturating_add(cache_write)),
        output: count(usage, &["completion_tokens"]),
        cache_read: cached,
        cache_write,
    }
}
