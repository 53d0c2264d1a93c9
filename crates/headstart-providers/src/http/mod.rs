//! The HTTP + SSE model client.
//!
//! [`HttpModel`] sends the canonical context and the tool definitions to a provider endpoint in one of the four wire
//! formats (so any compatible server works: set [`HttpModelConfig::base_url`]) and streams the answer through the
//! format's converter. TLS is rustls with the `ring` provider; if the process has no default rustls crypto provider
//! yet, [`HttpModel::new`] installs ring's.
//!
//! A request that fails before its first delta (connection refused, timeouts, HTTP 408/409/429/5xx, an event the
//! provider typed as overloaded) is retried with backoff ([`crate::retry`]). Errors before the stream starts that remain (other statuses,
//! a non-SSE answer, retries exhausted) are returned as `Err(ModelError)` with the status and the provider's own error message; errors once streaming (a dropped
//! connection, an idle timeout, a provider `error` event) end the delta stream with an `error` event.
//!
//! **Every response ends.** Four limits bound one attempt: [`HttpModelConfig::connect_timeout`],
//! [`HttpModelConfig::headers_timeout`] (until the response headers), [`HttpModelConfig::idle_timeout`] (between
//! two SSE events: keep-alive comments do not count, see [`crate::stream::timed_events`]) and
//! [`HttpModelConfig::response_timeout`], a deadline on the whole response however much keeps arriving. A response
//! past its deadline is not retried: the limit is the caller's, and trying again would multiply it.
//!
//! **No redirects.** Provider requests do not follow redirects: a provider API does not redirect a streaming POST,
//! and following one to another origin would hand it the API key header and the conversation. A 3xx answer fails
//! the request with [`ProviderError::Redirect`](crate::ProviderError::Redirect), naming the target.

mod attempt;
mod config;
mod error_text;
mod model;
#[cfg(test)]
mod tests;

pub use crate::anthropic::ANTHROPIC_VERSION;
pub use config::{HttpModelConfig, DEFAULT_RESPONSE_TIMEOUT};
pub use model::{ensure_crypto_provider, HttpModel};
