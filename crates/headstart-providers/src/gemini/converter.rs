//! The Gemini converter: SSE events in, delta events out (the mapping is in the module docs).

use headstart_core::{DoneReason, ModelErrorKind, Usage};
use serde_json::Value;

use crate::converter::WireDecoder;
use crate::delta_writer::DeltaWriter;
use crate::error::ProviderError;
use crate::payload::{count, minus, parse_json, string};
use crate::sse::SseEvent;

const FORMAT: &str = "gemini";

/// The prefix of call ids generated for Gemini calls that came without one.
pub const GENERATED_ID_PREFIX: &str = "gemini-call-";

/// The Gemini state machine (one response).
#[derive(Debug, Default)]
pub(crate) struct GeminiDecoder {
    id_base: Option<String>,
    text: Option<usize>,
    thinking: Option<(usize, Option<String>)>,
    usage: Option<Usage>,
}

impl GeminiDecoder {
    fn close_text(&mut self, out: &mut DeltaWriter<'_>) {
        if let Some(index) = self.text.take() {
            out.close_text(index);
        }
    }

    fn close_thinking(&mut self, out: &mut DeltaWriter<'_>) {
        if let Some((index, signature)) = self.thinking.take() {
            out.close_thinking(index, signature);
        }
    }

    fn chunk(&mut self, chunk: &Value, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            out.provider_error(error, self.usage);
            return Ok(());
        }
        let response_id = string(chunk, "responseId");
        if !out.started() {
            self.id_base = response_id.clone();
            out.start(string(chunk, "modelVersion"), response_id);
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
                out.error(
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
            self.part(part, out)?;
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.close_thinking(out);
            self.close_text(out);
            let usage = self.usage.unwrap_or_default();
            match reason {
                "STOP" => {
                    let reason = if out.calls() > 0 {
                        DoneReason::ToolUse
                    } else {
                        DoneReason::Stop
                    };
                    out.done(reason, usage);
                }
                "MAX_TOKENS" => out.done(DoneReason::Length, usage),
                other => {
                    let detail = string(candidate, "finishMessage")
                        .map(|message| format!(": {message}"))
                        .unwrap_or_default();
                    out.error(
                        ModelErrorKind::Provider,
                        format!("the response stopped with finishReason {other}{detail}"),
                        Some(usage),
                    );
                }
            }
        }
        Ok(())
    }

    fn part(&mut self, part: &Value, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
        let signature = string(part, "thoughtSignature").filter(|s| !s.is_empty());
        let is_thought = part.get("thought").and_then(Value::as_bool).unwrap_or(false);
        if is_thought {
            self.close_text(out);
            let text = part.get("text").and_then(Value::as_str).unwrap_or("");
            let (index, slot) = match &mut self.thinking {
                Some((index, slot)) => (*index, slot),
                None => {
                    let index = out.open_thinking();
                    let (_, slot) = self.thinking.insert((index, None));
                    (index, slot)
                }
            };
            if signature.is_some() {
                *slot = signature;
            }
            return out.thinking_delta(index, text);
        }
        let text = part.get("text").and_then(Value::as_str).filter(|text| !text.is_empty());
        let call = part.get("functionCall").filter(|call| call.is_object());
        if text.is_none() && call.is_none() && signature.is_none() {
            return Ok(()); // empty text, executableCode, inlineData, ...: not represented
        }
        self.close_thinking(out);
        if signature.is_some() {
            self.close_text(out);
            let index = out.open_thinking();
            out.close_thinking(index, signature);
        }
        if let Some(text) = text {
            let index = match self.text {
                Some(index) => index,
                None => *self.text.insert(out.open_text()),
            };
            out.text_delta(index, text)?;
        }
        if let Some(call) = call {
            self.close_text(out);
            let id = string(call, "id").filter(|id| !id.is_empty()).unwrap_or_else(|| {
                let base = self
                    .id_base
                    .get_or_insert_with(|| uuid::Uuid::now_v7().simple().to_string());
                format!("{GENERATED_ID_PREFIX}{base}-{}", out.calls())
            });
            let name = string(call, "name").unwrap_or_default();
            let index = out.open_call(id, name, false)?;
            if let Some(args) = call.get("args").filter(|args| !args.is_null()) {
                out.call_delta(index, &args.to_string())?;
            }
            out.seal(index, None);
        }
        Ok(())
    }
}

impl WireDecoder for GeminiDecoder {
    const FORMAT: &'static str = FORMAT;

    fn event(&mut self, event: &SseEvent, out: &mut DeltaWriter<'_>) -> Result<(), ProviderError> {
        let data = event.data.trim();
        if !data.is_empty() {
            let chunk = parse_json(FORMAT, &event.event, data)?;
            self.chunk(&chunk, out)?;
        }
        Ok(())
    }

    fn body_ended(&mut self, out: &mut DeltaWriter<'_>) {
        out.error(
            ModelErrorKind::Protocol,
            "the stream ended before finishReason (the connection closed mid-stream)",
            self.usage,
        );
    }

    fn error_usage(&self, _started: bool) -> Option<Usage> {
        self.usage
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
