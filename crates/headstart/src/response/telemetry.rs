//! OpenTelemetry GenAI spans, as plain `tracing` spans whose field names are the semantic conventions' attribute
//! names (`gen_ai.*`, `error.type`) plus headstart's own (`headstart.*`). A `tracing-opentelemetry` layer exports
//! them as they are; `otel.name` gives the span its convention name (`chat gpt-4o`, `execute_tool search`).
//!
//! Three spans:
//! - `invoke_agent`, one per [`Agent`](crate::Agent) run: `gen_ai.conversation.id` is the session;
//! - `chat`, one per model request, from the request (or the wrap) to the end of the model's stream: provider,
//!   request and response model, response id, finish reason, token usage (cache reads and writes included) and the
//!   time to the first chunk;
//! - `execute_tool`, one per executed call, around its body on the call's own task, a sibling of `chat` under the
//!   run's span: an early call's span starts before its `chat` span ends, which is what a trace view shows.
//!   Arguments and results are recorded only with [`EngineConfig::capture_content`](crate::EngineConfig).
//!
//! Calls settled without executing (unknown tool, invalid arguments, blocked) get no `execute_tool` span: nothing
//! executed.

use std::collections::HashMap;

use headstart_core::accumulator::Ending;
use headstart_core::ToolCall;
use headstart_store::{RunOutcome, SessionId};
use tracing::field::Empty;
use tracing::Span;

use crate::response::execute::Executed;

/// The `invoke_agent` span of a run on `session`.
pub(crate) fn invoke_agent(session: &SessionId, provider: Option<&str>, model: Option<&str>) -> Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = "invoke_agent",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.conversation.id = %session,
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
    )
}

/// A `chat` span, its start on the engine's clock, and whether its first chunk arrived.
pub(crate) struct ChatSpan {
    span: Span,
    started_us: i64,
    first_chunk_seen: bool,
}

impl ChatSpan {
    /// Opens the `chat` span of request `request` of `session` (child of the current span).
    pub fn open(session: &SessionId, request: u32, provider: Option<&str>, model: Option<&str>, now_us: i64) -> Self {
        let span = tracing::info_span!(
            "chat",
            otel.name = model.map_or_else(|| "chat".to_owned(), |model| format!("chat {model}")),
            gen_ai.operation.name = "chat",
            gen_ai.conversation.id = %session,
            gen_ai.provider.name = provider,
            gen_ai.request.model = model,
            gen_ai.response.model = Empty,
            gen_ai.response.id = Empty,
            gen_ai.response.finish_reasons = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.usage.cache_read.input_tokens = Empty,
            gen_ai.usage.cache_creation.input_tokens = Empty,
            headstart.request = request,
            headstart.time_to_first_chunk_ms = Empty,
            error.type = Empty,
        );
        ChatSpan {
            span,
            started_us: now_us,
            first_chunk_seen: false,
        }
    }

    /// The span, to instrument the request's opening with.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// The request could not be made: no response, no stream.
    pub fn request_failed(self) {
        self.span.record("error.type", "request_failed");
    }

    /// Notes a chunk of the model's stream; the first one sets the time to first chunk.
    #[inline]
    pub fn chunk(&mut self, now_us: impl FnOnce() -> i64) {
        if !self.first_chunk_seen {
            self.first_chunk_seen = true;
            self.span
                .record("headstart.time_to_first_chunk_ms", ms(now_us() - self.started_us));
        }
    }

    /// Records how the stream ended and closes the span: the stream is over, whatever the calls still do.
    pub fn end(&mut self, ending: Option<&Ending>, response_model: Option<&str>, response_id: Option<&str>) {
        let span = std::mem::replace(&mut self.span, Span::none());
        if let Some(model) = response_model {
            span.record("gen_ai.response.model", model);
        }
        if let Some(id) = response_id {
            span.record("gen_ai.response.id", id);
        }
        if let Some(ending) = ending {
            let reason = ending.stop_reason.to_string();
            span.record("gen_ai.response.finish_reasons", reason.as_str());
            if ending.stop_reason.is_abnormal() {
                span.record("error.type", reason.as_str());
            }
            span.record("gen_ai.usage.input_tokens", ending.usage.input);
            span.record("gen_ai.usage.output_tokens", ending.usage.output);
            span.record("gen_ai.usage.cache_read.input_tokens", ending.usage.cache_read);
            span.record("gen_ai.usage.cache_creation.input_tokens", ending.usage.cache_write);
        }
    }
}

/// What the `execute_tool` span of a call says about how it got to run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CallTiming {
    /// Admitted with a prefix commit, while the model was still streaming.
    pub early: bool,
    /// When the call was sealed (engine clock, µs), if seen.
    pub sealed_at_us: Option<i64>,
    /// How long the commit that admitted it took (µs).
    pub commit_us: i64,
}

/// When a response's calls were sealed and how long the last commit took: what their [`CallTiming`]s are made of.
#[derive(Debug, Default)]
pub(crate) struct SealTimes {
    /// When each call not yet admitted was sealed (engine clock, µs), by call id.
    sealed_at_us: HashMap<String, i64>,
    /// How long the last fragment commit took (µs), for the spans of the calls it admitted.
    last_commit_us: i64,
}

impl SealTimes {
    /// Call `id` was sealed at `now_us`.
    pub(crate) fn sealed(&mut self, id: &str, now_us: i64) {
        self.sealed_at_us.insert(id.to_owned(), now_us);
    }

    /// When call `id` was sealed, if it was seen.
    pub(crate) fn sealed_at(&self, id: &str) -> Option<i64> {
        self.sealed_at_us.get(id).copied()
    }

    /// A fragment commit took `us`.
    pub(crate) fn committed(&mut self, us: i64) {
        self.last_commit_us = us;
    }

    /// The timing of call `id`, admitted by the last commit (`early`: while the model streamed); its seal time is
    /// taken, since a call is admitted once.
    pub(crate) fn admitted(&mut self, id: &str, early: bool) -> CallTiming {
        CallTiming {
            early,
            sealed_at_us: self.sealed_at_us.remove(id),
            commit_us: self.last_commit_us,
        }
    }
}

/// The `execute_tool` span of `call`, a child of `parent` (the run's span), started at `now_us`.
pub(crate) fn execute_tool(parent: &Span, call: &ToolCall, timing: CallTiming, now_us: i64, capture: bool) -> Span {
    let span = tracing::info_span!(
        parent: parent,
        "execute_tool",
        otel.name = format!("execute_tool {}", call.name),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = call.name.as_str(),
        gen_ai.tool.call.id = call.id.as_str(),
        gen_ai.tool.type = "function",
        headstart.early = timing.early,
        headstart.seal_to_start_ms = Empty,
        headstart.commit_ms = ms(timing.commit_us),
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        error.type = Empty,
    );
    if let Some(sealed) = timing.sealed_at_us {
        span.record("headstart.seal_to_start_ms", ms(now_us - sealed));
    }
    if capture {
        let arguments = serde_json::Value::Object(call.arguments.as_object().cloned().unwrap_or_default());
        span.record("gen_ai.tool.call.arguments", arguments.to_string().as_str());
    }
    span
}

/// Records a call's end on its `execute_tool` span.
pub(crate) fn record_executed(span: &Span, executed: &Executed, capture: bool) {
    if executed.draft.is_error {
        span.record("error.type", error_type(executed.outcome));
    }
    if capture {
        let text = headstart_core::model::joined_text(&executed.draft.content);
        span.record("gen_ai.tool.call.result", text.as_str());
    }
}

/// `error.type` of a failed call: low-cardinality, as the conventions ask.
fn error_type(outcome: RunOutcome) -> &'static str {
    match outcome {
        // An `after` hook can turn a finished call into an error.
        RunOutcome::Finished => "tool_error",
        other => other.as_str(),
    }
}

/// Microseconds as fractional milliseconds.
fn ms(us: i64) -> f64 {
    us as f64 / 1000.0
}
