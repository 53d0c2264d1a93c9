//! Google Gemini streams (`POST /models/{model}:streamGenerateContent?alt=sse`).
//!
//! Wire format: unnamed SSE events (CRLF line ends), each a `GenerateContentResponse` chunk with
//! `candidates[0].content.parts[]`, an optional `finishReason` (on the last chunk), `usageMetadata`,
//! `modelVersion` and `responseId`.
//!
//! Mapping:
//! - `start` at the first chunk, with `modelVersion` and `responseId`.
//! - Consecutive text parts form one text block; parts with `thought: true` form thinking blocks.
//! - **Sealing:** Gemini sends each `functionCall` part whole, so each becomes `toolcall_start`, one
//!   `toolcall_delta` with the JSON text of `args`, and `toolcall_end` at once. Calls without an `id` (Gemini 2.x)
//!   get a generated one, `gemini-call-<responseId>-<n>` ([`GENERATED_ID_PREFIX`]); [`crate::request`] omits such
//!   ids when it sends the call back.
//! - A `thoughtSignature` on a thought part is that thinking block's signature; on any other part it is recorded as
//!   an empty thinking block carrying the signature right before that part, and [`crate::request`] attaches it to
//!   the part that follows, as Gemini requires for multi-turn function calling.
//! - `finishReason` ends the response: `STOP` → `stop` (`tool_use` when the response has calls: Gemini reports
//!   `STOP` for function calls), `MAX_TOKENS` → `length`, everything else (`SAFETY`, `RECITATION`,
//!   `MALFORMED_FUNCTION_CALL`, `OTHER`, ...) → `error` with `finishMessage`. A blocked prompt
//!   (`promptFeedback.blockReason`) or an `{"error": ...}` chunk → `error`. A body that ends before `finishReason`
//!   → `error`.
//! - Usage (`usageMetadata`, cumulative): `promptTokenCount` minus `cachedContentTokenCount` plus
//!   `toolUsePromptTokenCount` → `input`, `cachedContentTokenCount` → `cache_read`, `candidatesTokenCount` plus
//!   `thoughtsTokenCount` → `output`.

use headstart_core::{DeltaEvent, DoneReason, ModelError, ModelErrorKind, Usage};
use serde_json::Value;

use crate::emit::{count, minus, parse_json, string, Emitter};
use crate::error::ProviderError;
use crate::sse::SseEvent;
use crate::StreamConverter;

const FORMAT: &str = "gemini";

/// The prefix of call ids generated for Gemini calls that came without one.
pub const GENERATED_ID_PREFIX: &str = "gemini-call-";

/// The Gemini state machine (one response).
#[derive(Debug)]
pub struct GeminiConverter {
    out: Emitter,
    id_base: Option<String>,
    text: Option<usize>,
    thinking: Option<(usize, Option<String>)>,
    usage: Option<Usage>,
}

impl Default for GeminiConverter {
    fn default() -> Self {
        Self::new()
    }
}

impl GeminiConverter {
    /// A converter for one response.
    pub fn new() -> Self {
        GeminiConverter {
            out: Emitter::new(FORMAT),
            id_base: None,
            text: None,
            thinking: None,
            usage: None,
        }
    }

    fn close_text(&mut self) {
        if let Some(index) = self.text.take() {
            self.out.close_text(index);
        }
    }

    fn close_thinking(&mut self) {
        if let Some((index, signature)) = self.thinking.take() {
            self.out.close_thinking(index, signature);
        }
    }

    fn chunk(&mut self, chunk: &Value) -> Result<(), ProviderError> {
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            self.out.provider_error(error, self.usage);
            return Ok(());
        }
        let response_id = string(chunk, "responseId");
        if !self.out.started() {
            self.id_base = response_id.clone();
            self.out.start(string(chunk, "modelVersion"), response_id);
        }
        if let Some(usage) = chunk.get("usageMetadata").filter(|u| u.is_object()) {
            self.usage = Some(parse_usage(usage));
        }
        let candidate = chunk
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|candidates| candidates.first());
        let Some(candidate) = candidate else {
            if let Some(reason) = chunk
                .get("promptFeedback")
                .and_then(|feedback| feedback.get("blockReason"))
                .and_then(Value::as_str)
            {
                self.out.error(
                    ModelErrorKind::Provider,
                    format!("the prompt was blocked: {reason}"),
                    self.usage,
                );
            }
            return Ok(());
        };
        let parts = candidate
            .get("content")
            .and_then(|content| content.get("parts"))
            .and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            self.part(part)?;
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.close_thinking();
            self.close_text();
            let usage = self.usage.unwrap_or_default();
            match reason {
                "STOP" => {
                    let reason = if self.out.calls() > 0 {
                        DoneReason::ToolUse
                    } else {
                        DoneReason::Stop
                    };
                    self.out.done(reason, usage);
                }
                "MAX_TOKENS" => self.out.done(DoneReason::Length, usage),
                other => {
                    let detail = string(candidate, "finishMessage")
                        .map(|message| format!(": {message}"))
                        .unwrap_or_default();
                    self.out.error(
                        ModelErrorKind::Provider,
                        format!("the response stopped with finishReason {other}{detail}"),
                        Some(usage),
                    );
                }
            }
        }
        Ok(())
    }

    fn part(&mut self, part: &Value) -> Result<(), ProviderError> {
        let signature = string(part, "thoughtSignature").filter(|s| !s.is_empty());
        let is_thought = part.get("thought").and_then(Value::as_bool).unwrap_or(false);
        if is_thought {
            self.close_text();
            let text = part.get("text").and_then(Value::as_str).unwrap_or("");
            let (index, slot) = match &mut self.thinking {
                Some((index, slot)) => (*index, slot),
                None => {
                    let index = self.out.open_thinking();
                    let (_, slot) = self.thinking.insert((index, None));
                    (index, slot)
                }
            };
            if signature.is_some() {
                *slot = signature;
            }
            return self.out.thinking_delta(index, text);
        }
        let text = part.get("text").and_then(Value::as_str).filter(|text| !text.is_empty());
        let call = part.get("functionCall").filter(|call| call.is_object());
        if text.is_none() && call.is_none() && signature.is_none() {
            return Ok(()); // empty text, executableCode, inlineData, ...: not represented
        }
        self.close_thinking();
        if signature.is_some() {
            self.close_text();
            let index = self.out.open_thinking();
            self.out.close_thinking(index, signature);
        }
        if let Some(text) = text {
            let index = match self.text {
                Some(index) => index,
                None => *self.text.insert(self.out.open_text()),
            };
            self.out.text_delta(index, text)?;
        }
        if let Some(call) = call {
            self.close_text();
            let id = string(call, "id").filter(|id| !id.is_empty()).unwrap_or_else(|| {
                let base = self
                    .id_base
                    .get_or_insert_with(|| uuid::Uuid::now_v7().simple().to_string());
                format!("{GENERATED_ID_PREFIX}{base}-{}", self.out.calls())
            });
            let name = string(call, "name").unwrap_or_default();
            let index = self.out.open_call(id, name)?;
            if let Some(args) = call.get("args").filter(|args| !args.is_null()) {
                self.out.call_delta(index, &args.to_string())?;
            }
            self.out.seal(index, None);
        }
        Ok(())
    }
}

impl StreamConverter for GeminiConverter {
    fn push(&mut self, event: &SseEvent) -> Result<Vec<DeltaEvent>, ProviderError> {
        if self.out.ended() {
            return Ok(Vec::new());
        }
        let data = event.data.trim();
        if !data.is_empty() {
            let chunk = parse_json(FORMAT, &event.event, data)?;
            self.chunk(&chunk)?;
        }
        Ok(self.out.take())
    }

    fn finish(&mut self) -> Vec<DeltaEvent> {
        self.out.error(
            ModelErrorKind::Protocol,
            "the stream ended before finishReason (the connection closed mid-stream)",
            self.usage,
        );
        self.out.take()
    }

    fn fail(&mut self, error: &ModelError) -> Vec<DeltaEvent> {
        self.out.fail(error, self.usage)
    }

    fn is_ended(&self) -> bool {
        self.out.ended()
    }
}

fn parse_usage(usage: &Value) -> Usage {
    let cached = count(usage, &["cachedContentTokenCount"]);
    Usage {
        input: minus(count(usage, &["promptTokenCount"]), cached)
            .saturating_add(count(usage, &["toolUsePromptTokenCount"])),
        output: count(usage, &["candidatesTokenCount"]).saturating_add(count(usage, &["thoughtsTokenCount"])),
        cache_read: cached,
        cache_write: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(chunks: &[Value]) -> Vec<DeltaEvent> {
        let events: Vec<SseEvent> = chunks.iter().map(|c| SseEvent::message(c.to_string())).collect();
        crate::convert_events(crate::WireFormat::Gemini, &events, &Default::default())
            .into_iter()
            .map(|(_, e)| e)
            .collect()
    }

    #[test]
    fn text_thoughts_signatures_and_calls() {
        let events = run(&[
            json!({"responseId": "r", "modelVersion": "g", "candidates": [{"content": {"parts": [{"text": "pondering", "thought": true}]}}]}),
            json!({"candidates": [{"content": {"parts": [{"text": "Hel"}]}}]}),
            json!({"candidates": [{"content": {"parts": [{"text": "lo"}, {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "sig"}]}}]}),
            json!({"candidates": [{"content": {"parts": [{"functionCall": {"id": "given", "name": "g"}}, {"text": "", "thoughtSignature": "last"}]}, "finishReason": "STOP"}],
                   "usageMetadata": {"promptTokenCount": 10, "cachedContentTokenCount": 4, "candidatesTokenCount": 3, "thoughtsTokenCount": 2}}),
        ]);
        let mut acc = headstart_core::Accumulator::new();
        for event in events {
            acc.apply(event).unwrap();
        }
        let message = acc.snapshot();
        assert_eq!(
            serde_json::to_value(&message.content).unwrap(),
            json!([
                {"type": "thinking", "thinking": "pondering"},
                {"type": "text", "text": "Hello"},
                {"type": "thinking", "thinking": "", "signature": "sig"},
                {"type": "tool_call", "id": "gemini-call-r-0", "name": "f", "arguments": {"a": 1}},
                {"type": "tool_call", "id": "given", "name": "g", "arguments": {}},
                {"type": "thinking", "thinking": "", "signature": "last"},
            ])
        );
        assert_eq!(message.stop_reason, headstart_core::StopReason::ToolUse);
        assert_eq!(
            message.usage,
            Usage {
                input: 6,
                output: 5,
                cache_read: 4,
                cache_write: 0
            }
        );
    }

    #[test]
    fn safety_stops_blocked_prompts_and_truncated_bodies_are_errors() {
        let events = run(&[json!({"candidates": [{"finishReason": "SAFETY"}]})]);
        assert!(matches!(events.last(), Some(DeltaEvent::Error { message, .. }) if message.contains("SAFETY")));
        let events = run(&[json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}})]);
        assert!(matches!(events.last(), Some(DeltaEvent::Error { message, .. }) if message.contains("PROHIBITED")));
        let events = run(&[json!({"candidates": [{"content": {"parts": [{"text": "Hel"}]}}]})]);
        assert!(matches!(events.last(), Some(DeltaEvent::Error { message, .. }) if message.contains("finishReason")));
    }
}
