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
//! - **Sealing** (contract §2.15). There is no per-call end event. By default ([`SealAt::Complete`](crate::SealAt::Complete)) a call is
//!   sealed at the earliest moment its arguments can no longer change: when its argument text forms one complete
//!   JSON object (only whitespace may follow it), when a call at a higher index starts, or at `finish_reason`, whichever comes
//!   first. [`SealAt::NextIndex`](crate::SealAt::NextIndex) drops the first rule; [`SealAt::Finish`](crate::SealAt::Finish) keeps only the last. A fragment that
//!   would change a sealed call (argument text other than whitespace outside a string) ends the response as
//!   `error`, naming what the server did and the opt-out; an empty one, which some servers send, is ignored.
//! - **`finish_reason: length`.** The call being generated when the limit hit (the last one that received a
//!   fragment) is cut off and sealed invalid; calls before it are complete and sealed normally. If the server
//!   interleaved fragments of several calls, every open call is treated as cut off, since which one was complete
//!   cannot be told. A call whose object was complete was sealed at that moment (by default) and keeps its
//!   arguments.
//! - `done` is emitted at `[DONE]` (so it carries the usage chunk), or when the body ends after `finish_reason`.
//!   A body that ends before `finish_reason` (also with `[DONE]`) ends as `error`.
//! - Stop reasons: `stop` (→ `tool_use` when the response has calls, as several compatible servers report `stop`
//!   with calls), `tool_calls`/`function_call` → `tool_use`, `length` → `length`, `content_filter` and anything
//!   unknown → `error`. An `{"error": ...}` chunk ends the response as `error`.
//! - Usage: `prompt_tokens` minus its cached part → `input`; `prompt_tokens_details.cached_tokens` (or DeepSeek's
//!   `prompt_cache_hit_tokens`) → `cache_read`; `prompt_tokens_details.cache_write_tokens` → `cache_write`;
//!   `completion_tokens` → `output`.

mod converter;
mod object_end;
pub(crate) mod request;
#[cfg(test)]
mod tests;

pub(crate) use converter::ChatDecoder;
pub(crate) use request::{endpoint, headers};
pub use request::{openai_chat_body, API_KEY_ENV, DEFAULT_BASE_URL};
