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
//!   `{"type":"reasoning","id":...,"encrypted_content":...}` (JSON text), which [`openai_responses_body`] sends back as the
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

mod converter;
pub(crate) mod request;
#[cfg(test)]
mod tests;

pub(crate) use converter::ResponsesDecoder;
pub(crate) use request::endpoint;
pub use request::openai_responses_body;
