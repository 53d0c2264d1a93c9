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

mod converter;
mod request;
#[cfg(test)]
mod tests;

pub(crate) use converter::AnthropicDecoder;
pub use request::{anthropic_body, ANTHROPIC_DEFAULT_MAX_TOKENS, ANTHROPIC_VERSION, API_KEY_ENV, DEFAULT_BASE_URL};
pub(crate) use request::{endpoint, headers};
