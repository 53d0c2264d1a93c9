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
//! the request with [`ProviderError::Redirect`], naming the target.

use std::fmt;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use headstart_core::{DeltaEvent, Message, ModelError, ModelErrorKind};
use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::error::ProviderError;
use crate::request::{build_body, RequestSettings, ToolDefinition};
use crate::retry::{retry_hint, retryable, with_retries, Failure, RetryPolicy};
use crate::sse::sse_events;
use crate::stream::{later, timed_events, typed_delta_stream, DeltaStream};
use crate::wire_error::error_message;
use crate::{ConvertOptions, WireFormat};

/// How much of an error body is read to find the provider's message.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// The Anthropic API version header sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// [`HttpModelConfig::response_timeout`]'s default: 600 s.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(600);

/// How much of a `Location` or `Retry-After` header an error message quotes.
const QUOTED_HEADER_LIMIT: usize = 200;

impl WireFormat {
    /// The provider's public base URL for this format.
    pub fn default_base_url(self) -> &'static str {
        match self {
            WireFormat::OpenAiChat | WireFormat::OpenAiResponses => "https://api.openai.com/v1",
            WireFormat::Anthropic => "https://api.anthropic.com/v1",
            WireFormat::Gemini => "https://generativelanguage.googleapis.com/v1beta",
        }
    }

    /// The environment variable the API key is read from by default.
    pub fn default_api_key_env(self) -> &'static str {
        match self {
            WireFormat::OpenAiChat | WireFormat::OpenAiResponses => "OPENAI_API_KEY",
            WireFormat::Anthropic => "ANTHROPIC_API_KEY",
            WireFormat::Gemini => "GEMINI_API_KEY",
        }
    }
}

/// Everything [`HttpModel`] needs to know.
#[derive(Debug, Clone)]
pub struct HttpModelConfig {
    /// The wire format the endpoint speaks.
    pub format: WireFormat,
    /// The base URL, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`; the format's path is appended
    /// (`/chat/completions`, `/responses`, `/messages`, `/models/{model}:streamGenerateContent?alt=sse`).
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The environment variable holding the API key, read once by [`HttpModel::new`]; `None` sends no key (local
    /// servers). Sent as `Authorization: Bearer` (OpenAI), `x-api-key` (Anthropic) or `x-goog-api-key` (Gemini).
    pub api_key_env: Option<String>,
    /// The system prompt.
    pub system: Option<String>,
    /// The output token limit (Anthropic requires one; 8192 when `None`).
    pub max_tokens: Option<u32>,
    /// Extra top-level request body fields (`temperature`, `reasoning`, `store`, ...).
    pub extra_body: Map<String, Value>,
    /// Extra request headers.
    pub extra_headers: Vec<(String, String)>,
    /// Limit for establishing the connection. Default 10 s.
    pub connect_timeout: Duration,
    /// Limit from sending the request to the response headers. Default 120 s. Retried when it passes.
    pub headers_timeout: Duration,
    /// Limit on the whole response, from sending the request to the end of its body, whatever arrives meanwhile.
    /// Default 600 s (`headstart run --response-timeout`). Not retried when it passes: the stream ends with
    /// [`ProviderError::ResponseTimeout`].
    pub response_timeout: Duration,
    /// Longest wait for the next SSE event while streaming (keep-alive comments and unfinished events do not
    /// count). Default 120 s. Before the first delta, an attempt that times out is retried.
    pub idle_timeout: Duration,
    /// Conversion options (e.g. `seal_on_next_index` for Chat Completions).
    pub convert: ConvertOptions,
    /// Retries of a request that failed before its first delta (default: 2, with backoff; contract §3.6.6).
    pub retry: RetryPolicy,
}

impl HttpModelConfig {
    /// A configuration for `model` at the format's public endpoint, with the format's usual API key variable and
    /// default timeouts.
    pub fn new(format: WireFormat, model: impl Into<String>) -> Self {
        HttpModelConfig {
            format,
            base_url: format.default_base_url().to_owned(),
            model: model.into(),
            api_key_env: Some(format.default_api_key_env().to_owned()),
            system: None,
            max_tokens: None,
            extra_body: Map::new(),
            extra_headers: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            headers_timeout: Duration::from_secs(120),
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            idle_timeout: Duration::from_secs(120),
            convert: ConvertOptions::default(),
            retry: RetryPolicy::default(),
        }
    }

    /// The same configuration with another base URL.
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// The same configuration reading the key from `variable`, or sending none.
    pub fn with_api_key_env(mut self, variable: Option<&str>) -> Self {
        self.api_key_env = variable.map(str::to_owned);
        self
    }

    /// The endpoint URL.
    pub fn url(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        match self.format {
            WireFormat::OpenAiChat => format!("{base}/chat/completions"),
            WireFormat::OpenAiResponses => format!("{base}/responses"),
            WireFormat::Anthropic => format!("{base}/messages"),
            WireFormat::Gemini => format!("{base}/models/{}:streamGenerateContent?alt=sse", self.model),
        }
    }
}

/// A model reached over HTTP, streaming with SSE.
pub struct HttpModel {
    config: HttpModelConfig,
    api_key: Option<String>,
    client: reqwest::Client,
}

impl fmt::Debug for HttpModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpModel")
            .field("config", &self.config)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Installs rustls' ring crypto provider process-wide unless one is installed already. `reqwest` is built without
/// a provider of its own, so any other `reqwest::Client` in the process (a tool's, say) needs this before it is
/// built; [`HttpModel::new`] calls it.
pub fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race with another installer is fine: a provider is installed either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// An error with its chain of causes, one line (reqwest's own message hides the cause).
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

impl HttpModel {
    /// Builds the client and reads the API key. Fails if the configured key variable is unset or empty.
    pub fn new(config: HttpModelConfig) -> Result<Self, ProviderError> {
        let api_key = match &config.api_key_env {
            None => None,
            Some(variable) => match std::env::var(variable) {
                Ok(key) if !key.trim().is_empty() => Some(key.trim().to_owned()),
                _ => {
                    return Err(ProviderError::Config(format!(
                        "the API key variable {variable} is not set (or set api_key_env to none for a server \
                         without authentication)"
                    )))
                }
            },
        };
        ensure_crypto_provider();
        // No read timeout: the idle limit is measured between SSE events, not between reads (`timed_events`).
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("headstart/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| ProviderError::Config(format!("cannot build the HTTP client: {}", error_chain(&err))))?;
        Ok(HttpModel {
            config,
            api_key,
            client,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &HttpModelConfig {
        &self.config
    }

    /// The request body this model sends for `context` and `tools`.
    pub fn request_body(&self, context: &[Message], tools: &[ToolDefinition]) -> Value {
        let settings = RequestSettings {
            model: self.config.model.clone(),
            system: self.config.system.clone(),
            max_tokens: self.config.max_tokens,
            extra: self.config.extra_body.clone(),
        };
        build_body(self.config.format, &settings, context, tools)
    }

    /// Sends one request and returns its delta stream. A request that fails before its first delta (contract §3.6.6)
    /// is tried again as [`HttpModelConfig::retry`] allows; the engine only ever sees the attempt that streamed.
    pub async fn stream_context(
        &self,
        context: &[Message],
        tools: &[ToolDefinition],
    ) -> Result<DeltaStream, ModelError> {
        let url = self.config.url();
        let body = self.request_body(context, tools).to_string();
        with_retries(&self.config.retry, |_| self.attempt(&url, &body)).await
    }

    /// One attempt: send, check the status, and wait for the first delta after `start`.
    async fn attempt(&self, url: &str, body: &str) -> Result<DeltaStream, Failure<DeltaStream>> {
        let fail = |error: ModelError| Failure { error, fallback: None };
        let mut request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body.to_owned());
        if let Some(key) = &self.api_key {
            request = match self.config.format {
                WireFormat::OpenAiChat | WireFormat::OpenAiResponses => request.bearer_auth(key),
                WireFormat::Anthropic => request.header("x-api-key", key),
                WireFormat::Gemini => request.header("x-goog-api-key", key),
            };
        }
        if self.config.format == WireFormat::Anthropic {
            request = request.header("anthropic-version", ANTHROPIC_VERSION);
        }
        for (name, value) in &self.config.extra_headers {
            request = request.header(name, value);
        }
        let started = Instant::now();
        let deadline = later(started, self.config.response_timeout);
        let headers_at = later(started, self.config.headers_timeout).min(deadline);
        let response = match tokio::time::timeout_at(headers_at, request.send()).await {
            Err(_) if headers_at == deadline => {
                let error = ProviderError::ResponseTimeout {
                    limit: self.config.response_timeout,
                };
                return Err(fail(error.into()));
            }
            Err(_) => {
                let message = format!(
                    "no response from {url} within {} s",
                    self.config.headers_timeout.as_secs_f64()
                );
                return Err(fail(ModelError::transport(message)));
            }
            Ok(Err(err)) => {
                let message = format!("request to {url} failed: {}", error_chain(&err));
                // Connection refused or reset, timeouts: the request may never have reached the provider. A
                // request the client could not even build (a bad URL) fails the same way on every attempt.
                let kind = if err.is_builder() {
                    ModelErrorKind::Other
                } else {
                    ModelErrorKind::Transport
                };
                return Err(fail(ModelError::with_kind(kind, message).with_source(err)));
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        // Error bodies are read for at most one idle period (and never past the deadline).
        let body_read_until = later(Instant::now(), self.config.idle_timeout).min(deadline);
        if status.is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .map_or_else(|| "(no location)".to_owned(), |value| quoted(value.as_bytes()));
            let error = ProviderError::Redirect {
                status: status.as_u16(),
                location,
            };
            return Err(fail(error.into()));
        }
        if !status.is_success() {
            let hint = retry_hint(response.headers(), SystemTime::now());
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .map(|value| format!(" (retry after {})", quoted(value.as_bytes())))
                .unwrap_or_default();
            let body = read_limited(response, body_read_until).await;
            let message = format!("{}{retry_after}", provider_message(&body));
            let error = ProviderError::Http {
                status: status.as_u16(),
                url: url.to_owned(),
                message: format!("{} {message}", status.canonical_reason().unwrap_or(""))
                    .trim()
                    .to_owned(),
                retry_after: hint,
            };
            return Err(fail(error.into()));
        }
        if !content_type.is_empty() && !content_type.starts_with("text/event-stream") {
            let body = read_limited(response, body_read_until).await;
            let message = format!(
                "{url} answered {content_type} instead of an SSE stream: {}",
                provider_message(&body)
            );
            return Err(fail(ModelError::with_kind(ModelErrorKind::Protocol, message)));
        }
        let bytes = futures::stream::unfold(Some(response), |response| async move {
            let mut response = response?;
            match response.chunk().await {
                Ok(Some(chunk)) => Some((Ok(chunk), Some(response))),
                Ok(None) => None,
                Err(err) => Some((Err(error_chain(&err)), None)),
            }
        });
        let events = timed_events(
            sse_events(bytes),
            self.config.idle_timeout,
            self.config.response_timeout,
            started,
        );
        first_delta(typed_delta_stream(self.config.format, &self.config.convert, events)).await
    }
}

/// Reads `stream` up to its first event after `start`. When that is an `error` of a [retryable](retryable) kind (an
/// event the provider typed as overloaded, a connection dropped before any content), the attempt failed before its
/// first delta and may be retried; the stream read so far is the fallback, so the last attempt still ends as a stored failed response
/// (contract §2.12). Otherwise the stream is handed back whole.
async fn first_delta(mut stream: DeltaStream) -> Result<DeltaStream, Failure<DeltaStream>> {
    let mut read = Vec::new();
    let transient = loop {
        match stream.next().await {
            Some(Ok(event @ DeltaEvent::Start { .. })) => read.push(Ok(event)),
            Some(Ok(event)) => {
                let transient = match &event {
                    DeltaEvent::Error {
                        message,
                        kind: Some(kind),
                        ..
                    } if retryable(*kind) => Some(ModelError::with_kind(*kind, message.clone())),
                    _ => None,
                };
                read.push(Ok(event));
                break transient;
            }
            Some(Err(error)) => {
                read.push(Err(error));
                break None;
            }
            None => break None,
        }
    };
    let replayed = futures::stream::iter(read).chain(stream).boxed();
    match transient {
        None => Ok(replayed),
        Some(error) => Err(Failure {
            error,
            fallback: Some(replayed),
        }),
    }
}

#[async_trait::async_trait]
impl headstart_core::Model for HttpModel {
    async fn stream(&self, request: headstart_core::ModelRequest) -> Result<DeltaStream, ModelError> {
        self.stream_context(&request.context, &request.tools).await
    }

    fn provider(&self) -> Option<&str> {
        Some(self.config.format.otel_provider())
    }

    fn model_name(&self) -> Option<&str> {
        Some(&self.config.model)
    }
}

/// Reads at most [`ERROR_BODY_LIMIT`] bytes of a body until `until` (lossy UTF-8): what arrived by then.
async fn read_limited(mut response: reqwest::Response, until: Instant) -> String {
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_LIMIT {
        match tokio::time::timeout_at(until, response.chunk()).await {
            Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(ERROR_BODY_LIMIT);
    String::from_utf8_lossy(&body).into_owned()
}

/// A header value from the server as an error message quotes it: lossy UTF-8, at most [`QUOTED_HEADER_LIMIT`]
/// characters.
fn quoted(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    let mut quoted: String = text.chars().take(QUOTED_HEADER_LIMIT).collect();
    if quoted.len() < text.len() {
        quoted.push('…');
    }
    quoted
}

/// The provider's error message from an error body: `{"error": {"message": ...}}` (OpenAI, Anthropic, Gemini, also
/// wrapped in an array by Gemini), else the body's start.
fn provider_message(body: &str) -> String {
    let value: Option<Value> = serde_json::from_str(body).ok();
    let value = match value {
        Some(Value::Array(items)) => items.into_iter().next(),
        other => other,
    };
    match value {
        Some(value) => {
            let error = value.get("error").unwrap_or(&value);
            error_message(error)
        }
        None => {
            let text: String = body.trim().chars().take(500).collect();
            if text.is_empty() {
                "(empty body)".to_owned()
            } else {
                text
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_per_format() {
        let config = |format| HttpModelConfig::new(format, "m").with_base_url("http://h/v1/");
        assert_eq!(config(WireFormat::OpenAiChat).url(), "http://h/v1/chat/completions");
        assert_eq!(config(WireFormat::OpenAiResponses).url(), "http://h/v1/responses");
        assert_eq!(config(WireFormat::Anthropic).url(), "http://h/v1/messages");
        assert_eq!(
            config(WireFormat::Gemini).url(),
            "http://h/v1/models/m:streamGenerateContent?alt=sse"
        );
    }

    #[test]
    fn provider_messages_are_extracted_from_error_bodies() {
        assert_eq!(
            provider_message(r#"{"error": {"message": "bad key", "type": "invalid_request_error"}}"#),
            "bad key (invalid_request_error)"
        );
        assert_eq!(
            provider_message(r#"[{"error": {"code": 400, "message": "oops", "status": "INVALID_ARGUMENT"}}]"#),
            "oops (400)"
        );
        assert_eq!(provider_message("upstream connect error"), "upstream connect error");
        assert_eq!(provider_message(""), "(empty body)");
    }

    #[test]
    fn a_missing_key_variable_is_a_configuration_error() {
        let config = HttpModelConfig::new(WireFormat::Anthropic, "m")
            .with_api_key_env(Some("HEADSTART_TEST_SURELY_UNSET_VARIABLE"));
        let err = HttpModel::new(config).unwrap_err();
        assert!(
            err.to_string().contains("HEADSTART_TEST_SURELY_UNSET_VARIABLE"),
            "{err}"
        );
        let model = HttpModel::new(HttpModelConfig::new(WireFormat::Anthropic, "m").with_api_key_env(None)).unwrap();
        assert!(format!("{model:?}").contains("api_key: None"));
    }
}
