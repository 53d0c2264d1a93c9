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
//!   get a generated one, `gemini-call-<responseId>-<n>` ([`GENERATED_ID_PREFIX`]); [`gemini_body`] omits such
//!   ids when it sends the call back.
//! - A `thoughtSignature` on a thought part is that thinking block's signature; on any other part it is recorded as
//!   an empty thinking block carrying the signature right before that part, and [`gemini_body`] attaches it to
//!   the part that follows, as Gemini requires for multi-turn function calling.
//! - `finishReason` ends the response: `STOP` → `stop` (`tool_use` when the response has calls: Gemini reports
//!   `STOP` for function calls), `MAX_TOKENS` → `length`, everything else (`SAFETY`, `RECITATION`,
//!   `MALFORMED_FUNCTION_CALL`, `OTHER`, ...) → `error` with `finishMessage`. A blocked prompt
//!   (`promptFeedback.blockReason`) or an `{"error": ...}` chunk → `error`. A body that ends before `finishReason`
//!   → `error`.
//! - Usage (`usageMetadata`, cumulative): `promptTokenCount` minus `cachedContentTokenCount` plus
//!   `toolUsePromptTokenCount` → `input`, `cachedContentTokenCount` → `cache_read`, `candidatesTokenCount` plus
//!   `thoughtsTokenCount` → `output`.

mod converter;
mod request;
#[cfg(test)]
mod tests;

pub(crate) use converter::GeminiDecoder;
pub use converter::GENERATED_ID_PREFIX;
pub(crate) use request::{endpoint, headers};
pub use request::{gemini_body, API_KEY_ENV, DEFAULT_BASE_URL};
