//! OpenAI Chat Completions streams (and compatible servers: DeepSeek, vLLM, Ollama, OpenRouter, ...).
//!
//! Wire format: unnamed SSE events whose data is a `chat.completion.chunk`; `choices[0].delta` carries `content`,
//! `reasoning_content` / `reasoning` (DeepSeek, vLLM, OpenRouter) and `tool_calls[]` addressed by `index` (the
//! first chunk of a call carries `id` and `function.name`, later ones only `function.arguments` fragments);
//! `finish_reason` arrives in its own chunk; with `stream_options.include_usage` a last chunk with empty `choices`
//! carries `usage`; `data: [DONE]` ends the body. Only choice 0 is read (requests are sent with `n = 1`).
//!
//! Mapping:
//! - `start` at the first chunk, with its `model` and `id`.
//! - Reasoning and text become thinking and text blocks; a block closes when another kind of content starts (more
//!   text later opens a new block), so a tool call is never held back by an open text block.
//! - **Sealing.** There is no per-call end event. By default every call is sealed at `finish_reason`; with
//!   [`ConvertOptions::seal_on_next_index`] call N is sealed as soon as a call with a higher index starts (see its
//!   risk). A fragment for an already sealed call ends the response as `error`.
//! - **`finish_reason: length`.** The call being generated when the limit hit (the last one that received a
//!   fragment) is cut off and sealed invalid; calls before it are complete and sealed normally. If the server
//!   interleaved fragments of several calls, every open call is treated as cut off, since which one was complete
//!   cannot be told.
//! - `done` is emitted at `[DONE]` (so it carries the usage chunk), or when the body ends after `finish_reason`.
//!   A body that ends before `finish_reason` (also with `[DONE]`) ends as `error`.
//! - Stop reasons: `stop` (→ `tool_use` when the response has calls, as several compatible servers report `stop`
//!   with calls), `tool_calls`/`function_call` → `tool_use`, `length` → `length`, `content_filter` and anything
//!   unknown → `error`. An `{"error": ...}` chunk ends the response as `error`.
//! - Usage: `prompt_tokens` minus its cached part → `input`; `prompt_tokens_details.cached_tokens` (or DeepSeek's
//!   `prompt_cache_hit_tokens`) → `cache_read`; `prompt_tokens_details.cache_write_tokens` → `cache_write`;
//!   `completion_tokens` → `output`.

use headstart_core::{DeltaEvent, DoneReason, ModelError, ModelErrorKind, Usage};
use serde_json::Value;

use crate::emit::{count, minus, parse_json, string, Emitter};
use crate::error::ProviderError;
use crate::sse::SseEvent;
use crate::{ConvertOptions, StreamConverter};

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
    sealed: bool,
}

#[derive(Debug, Clone)]
enum Finish {
    Done(DoneReason),
    Error(String),
}

/// The Chat Completions state machine (one response).
#[derive(Debug)]
pub struct ChatConverter {
    out: Emitter,
    seal_on_next_index: bool,
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

impl ChatConverter {
    /// A converter for one response.
    pub fn new(options: &ConvertOptions) -> Self {
        ChatConverter {
            out: Emitter::new(FORMAT),
            seal_on_next_index: options.seal_on_next_index,
            text: None,
            thinking: None,
            calls: Vec::new(),
            last_call: None,
            interleaved: false,
            finish: None,
            usage: None,
        }
    }

    fn close_text(&mut self) {
        if let Some(index) = self.text.take() {
            self.out.close_text(index);
        }
    }

    fn close_thinking(&mut self) {
        if let Some(index) = self.thinking.take() {
            self.out.close_thinking(index, None);
        }
    }

    fn chunk(&mut self, chunk: &Value) -> Result<(), ProviderError> {
        if let Some(error) = chunk.get("error").filter(|error| !error.is_null()) {
            let usage = self.usage;
            self.out.provider_error(error, usage);
            return Ok(());
        }
        self.out.start(string(chunk, "model"), string(chunk, "id"));
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
                self.close_text();
                let index = match self.thinking {
                    Some(index) => index,
                    None => *self.thinking.insert(self.out.open_thinking()),
                };
                self.out.thinking_delta(index, reasoning)?;
            }
            let text = delta.get("content").and_then(Value::as_str).unwrap_or("");
            if !text.is_empty() {
                self.close_thinking();
                let index = match self.text {
                    Some(index) => index,
                    None => *self.text.insert(self.out.open_text()),
                };
                self.out.text_delta(index, text)?;
            }
            if let Some(tool_calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for fragment in tool_calls {
                    self.close_thinking();
                    self.close_text();
                    self.tool_call_fragment(fragment)?;
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason(reason)?;
            }
        }
        Ok(())
    }

    fn tool_call_fragment(&mut self, fragment: &Value) -> Result<(), ProviderError> {
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
                    sealed: false,
                });
                self.calls.len() - 1
            }
        };
        if slot + 1 != self.calls.len() {
            self.interleaved = true;
        }
        if self.calls[slot].sealed {
            return Err(ProviderError::protocol(
                FORMAT,
                format!(
                    "a fragment for tool call index {wire_index} arrived after the call was sealed (the server does \
                     not stream calls strictly one after another; do not use seal_on_next_index with it)"
                ),
            ));
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
            Some(index) => self.out.call_delta(index, arguments)?,
            None => {
                call.pending.push_str(arguments);
                if call.name.is_some() {
                    if self.seal_on_next_index && newest_wire_index.is_some_and(|newest| wire_index > newest) {
                        self.seal_calls_below(wire_index);
                    }
                    self.start_call(slot)?;
                }
            }
        }
        Ok(())
    }

    /// `seal_on_next_index`: every open call at a lower index is finished.
    fn seal_calls_below(&mut self, wire_index: u64) {
        for slot in 0..self.calls.len() {
            if self.calls[slot].wire_index < wire_index && !self.calls[slot].sealed {
                self.seal_call(slot, false);
            }
        }
    }

    fn start_call(&mut self, slot: usize) -> Result<(), ProviderError> {
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
        let index = self.out.open_call(id, name)?;
        self.calls[slot].content_index = Some(index);
        self.out.call_delta(index, &pending)
    }

    fn seal_call(&mut self, slot: usize, cut_off: bool) {
        let call = &mut self.calls[slot];
        if call.sealed {
            return;
        }
        call.sealed = true;
        if let Some(index) = call.content_index {
            if cut_off {
                self.out.seal_cut_off(index);
            } else {
                self.out.seal(index, None);
            }
        }
    }

    fn finish_reason(&mut self, reason: &str) -> Result<(), ProviderError> {
        self.close_thinking();
        self.close_text();
        // A call whose name never came still gets a block, so what the model produced stays visible.
        for slot in 0..self.calls.len() {
            self.start_call(slot)?;
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
                    self.seal_call(slot, cut_off(slot, self.last_call, self.interleaved));
                }
            }
            Finish::Done(_) => {
                for slot in 0..self.calls.len() {
                    self.seal_call(slot, false);
                }
            }
            // An error end seals nothing: nothing of the response runs any more.
            Finish::Error(_) => {}
        }
        self.finish = Some(finish);
        Ok(())
    }

    fn end(&mut self) {
        let usage = self.usage;
        match self.finish.clone() {
            Some(Finish::Done(mut reason)) => {
                if reason == DoneReason::Stop && self.out.calls() > 0 {
                    reason = DoneReason::ToolUse;
                }
                self.out.done(reason, usage.unwrap_or_default());
            }
            Some(Finish::Error(message)) => self.out.error(ModelErrorKind::Provider, message, usage),
            None => self.out.error(
                ModelErrorKind::Protocol,
                "the stream ended before finish_reason (the connection closed mid-stream)",
                usage,
            ),
        }
    }
}

impl StreamConverter for ChatConverter {
    fn push(&mut self, event: &SseEvent) -> Result<Vec<DeltaEvent>, ProviderError> {
        if self.out.ended() {
            return Ok(Vec::new());
        }
        let data = event.data.trim();
        if data == "[DONE]" {
            self.end();
        } else if !data.is_empty() {
            let chunk = parse_json(FORMAT, &event.event, data)?;
            self.chunk(&chunk)?;
        }
        Ok(self.out.take())
    }

    fn finish(&mut self) -> Vec<DeltaEvent> {
        if !self.out.ended() {
            self.end();
        }
        self.out.take()
    }

    fn fail(&mut self, error: &ModelError) -> Vec<DeltaEvent> {
        let usage = self.usage;
        self.out.fail(error, usage)
    }

    fn is_ended(&self) -> bool {
        self.out.ended()
    }
}

/// Chat Completions usage (also accepts DeepSeek's `prompt_cache_hit_tokens`).
pub(crate) fn parse_usage(usage: &Value) -> Usage {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(options: ConvertOptions, chunks: &[Value]) -> Vec<DeltaEvent> {
        let mut events: Vec<SseEvent> = chunks.iter().map(|c| SseEvent::message(c.to_string())).collect();
        events.push(SseEvent::message("[DONE]"));
        crate::convert_events(crate::WireFormat::OpenAiChat, &events, &options)
            .into_iter()
            .map(|(_, event)| event)
            .collect()
    }

    fn call_start(index: u64, id: &str, name: &str) -> Value {
        json!({"id": "r", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}}]})
    }

    fn call_args(index: u64, args: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": args}}]}}]})
    }

    fn finish(reason: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    }

    fn seal_position(events: &[DeltaEvent], index: usize) -> usize {
        events
            .iter()
            .position(|e| matches!(e, DeltaEvent::ToolcallEnd { index: i, .. } if *i == index))
            .unwrap()
    }

    fn position_of(events: &[DeltaEvent], pred: impl Fn(&DeltaEvent) -> bool) -> usize {
        events.iter().position(pred).unwrap()
    }

    #[test]
    fn by_default_calls_are_sealed_at_finish_reason_even_when_their_json_is_complete() {
        let events = run(
            ConvertOptions::default(),
            &[
                call_start(0, "a", "alpha"),
                call_args(0, "{}"),
                call_start(1, "b", "beta"),
                call_args(1, "{}"),
                finish("tool_calls"),
            ],
        );
        let beta_start = position_of(&events, |e| matches!(e, DeltaEvent::ToolcallStart { index: 1, .. }));
        assert!(seal_position(&events, 0) > beta_start, "{events:#?}");
        assert!(matches!(
            events.last(),
            Some(DeltaEvent::Done {
                stop_reason: DoneReason::ToolUse,
                ..
            })
        ));
    }

    #[test]
    fn seal_on_next_index_seals_call_n_when_call_n_plus_1_starts() {
        let events = run(
            ConvertOptions {
                seal_on_next_index: true,
            },
            &[
                call_start(0, "a", "alpha"),
                call_args(0, "{\"x\": 1}"),
                call_start(1, "b", "beta"),
                call_args(1, "{}"),
                finish("tool_calls"),
            ],
        );
        let beta_start = position_of(&events, |e| matches!(e, DeltaEvent::ToolcallStart { index: 1, .. }));
        let first_seal = seal_position(&events, 0);
        assert_eq!(first_seal + 1, beta_start, "{events:#?}");
        assert!(matches!(
            &events[first_seal],
            DeltaEvent::ToolcallEnd { arguments: None, .. }
        ));
        // The last call still waits for finish_reason.
        let beta_args = position_of(&events, |e| matches!(e, DeltaEvent::ToolcallDelta { index: 1, .. }));
        assert!(seal_position(&events, 1) > beta_args);
    }

    #[test]
    fn seal_on_next_index_turns_a_late_fragment_for_a_sealed_call_into_an_error() {
        let events = run(
            ConvertOptions {
                seal_on_next_index: true,
            },
            &[
                call_start(0, "a", "alpha"),
                call_args(0, "{\"x\": 1"),
                call_start(1, "b", "beta"),
                call_args(0, "}"),
                finish("tool_calls"),
            ],
        );
        let Some(DeltaEvent::Error { message, .. }) = events.last() else {
            panic!("{events:#?}")
        };
        assert!(message.contains("after the call was sealed"), "{message}");
    }

    #[test]
    fn length_cuts_off_only_the_call_being_generated_unless_fragments_interleaved() {
        let chunks = [
            call_start(0, "a", "alpha"),
            call_args(0, "{}"),
            call_start(1, "b", "beta"),
            call_args(1, "{\"x\": 1}"),
            finish("length"),
        ];
        let events = run(ConvertOptions::default(), &chunks);
        assert!(matches!(
            &events[seal_position(&events, 0)],
            DeltaEvent::ToolcallEnd { arguments: None, .. }
        ));
        assert!(matches!(
            &events[seal_position(&events, 1)],
            DeltaEvent::ToolcallEnd { arguments: Some(Value::String(raw)), .. } if raw == "{\"x\": 1}"
        ));

        let interleaved = [
            call_start(0, "a", "alpha"),
            call_start(1, "b", "beta"),
            call_args(0, "{}"),
            call_args(1, "{}"),
            finish("length"),
        ];
        let events = run(ConvertOptions::default(), &interleaved);
        for index in [0, 1] {
            assert!(
                matches!(
                    &events[seal_position(&events, index)],
                    DeltaEvent::ToolcallEnd {
                        arguments: Some(Value::String(_)),
                        ..
                    }
                ),
                "{events:#?}"
            );
        }
    }

    #[test]
    fn a_reused_index_with_a_new_id_is_a_new_call_and_text_closes_before_calls() {
        let events = run(
            ConvertOptions::default(),
            &[
                json!({"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]}),
                json!({"choices": [{"index": 0, "delta": {"content": "hi"}}]}),
                call_start(0, "a", "alpha"),
                call_start(0, "b", "beta"),
                finish("stop"),
            ],
        );
        let kinds: Vec<&str> = events.iter().map(DeltaEvent::type_name).collect();
        assert_eq!(
            kinds,
            [
                "start",
                "thinking_start",
                "thinking_delta",
                "thinking_end",
                "text_start",
                "text_delta",
                "text_end",
                "toolcall_start",
                "toolcall_start",
                "toolcall_end",
                "toolcall_end",
                "done"
            ]
        );
        // `stop` with calls is reported as tool_use.
        assert!(matches!(
            events.last(),
            Some(DeltaEvent::Done {
                stop_reason: DoneReason::ToolUse,
                ..
            })
        ));
    }

    #[test]
    fn content_filter_and_mid_stream_errors_end_as_error() {
        let events = run(
            ConvertOptions::default(),
            &[call_start(0, "a", "alpha"), finish("content_filter")],
        );
        assert!(matches!(
            events.last(),
            Some(DeltaEvent::Error {
                kind: Some(ModelErrorKind::Provider),
                ..
            })
        ));
        assert!(!events.iter().any(|e| matches!(e, DeltaEvent::ToolcallEnd { .. })));
        let events = run(
            ConvertOptions::default(),
            &[json!({"error": {"message": "overloaded", "code": 529}})],
        );
        let Some(DeltaEvent::Error { message, kind, .. }) = events.last() else {
            panic!()
        };
        assert_eq!(message, "provider error: overloaded (529)");
        assert_eq!(
            *kind,
            Some(ModelErrorKind::Overloaded),
            "from the code 529, not the text"
        );
        assert!(matches!(events[0], DeltaEvent::Start { .. }));
    }

    #[test]
    fn done_without_finish_reason_is_an_error() {
        let events = run(
            ConvertOptions::default(),
            &[call_start(0, "a", "alpha"), call_args(0, "{}")],
        );
        assert!(matches!(events.last(), Some(DeltaEvent::Error { .. })));
        assert!(!events.iter().any(|e| matches!(e, DeltaEvent::ToolcallEnd { .. })));
    }
}
