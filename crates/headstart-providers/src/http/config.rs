//! What an [`HttpModel`](super::HttpModel) is configured with.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::converter::ConvertOptions;
use crate::retry::RetryPolicy;
use crate::wire_format::WireFormat;

/// [`HttpModelConfig::response_timeout`]'s default: 600 s.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(600);

/// Everything [`HttpModel`](super::HttpModel) needs to know.
#[derive(Debug, Clone)]
pub struct HttpModelConfig {
    /// The wire format the endpoint speaks.
    pub format: WireFormat,
    /// The base URL, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`; the format's path is appended
    /// (`/chat/completions`, `/responses`, `/messages`, `/models/{model}:streamGenerateContent?alt=sse`).
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The environment variable holding the API key, read once by [`HttpModel::new`](super::HttpModel::new); `None` sends no key (local
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
    /// Declare provider-async tools to the model ([`RequestSettings::provider_async`]; OpenAI Responses only).
    /// Default off.
    ///
    /// [`RequestSettings::provider_async`]: crate::request::RequestSettings::provider_async
    pub provider_async: bool,
    /// Limit for establishing the connection. Default 10 s.
    pub connect_timeout: Duration,
    /// Limit from sending the request to the response headers. Default 120 s. Retried when it passes.
    pub headers_timeout: Duration,
    /// Limit on the whole response, from sending the request to the end of its body, whatever arrives meanwhile.
    /// Default 600 s (`headstart run --response-timeout`). Not retried when it passes: the stream ends with
    /// [`ProviderError::ResponseTimeout`](crate::ProviderError::ResponseTimeout).
    pub response_timeout: Duration,
    /// Longest wait for the next SSE event while streaming (keep-alive comments and unfinished events do not
    /// count). Default 120 s. Before the first delta, an attempt that times out is retried.
    pub idle_timeout: Duration,
    /// Conversion options (when a Chat Completions call is sealed: [`ConvertOptions::seal_at`]).
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
            provider_async: false,
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
        self.format.endpoint(&self.base_url, &self.model)
    }
}
