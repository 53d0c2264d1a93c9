//! [`HttpModel`]: a model reached over HTTP, streaming with SSE.

use std::fmt;
use std::sync::Arc;

use headstart_core::{Message, ModelError};
use serde_json::Value;

use super::attempt::attempt;
use super::config::HttpModelConfig;
use super::error_text::error_chain;
use crate::error::ProviderError;
use crate::request::{build_body, BodyCache, RequestSettings, ToolDefinition};
use crate::retry::with_retries;
use crate::stream::DeltaStream;

/// A model reached over HTTP, streaming with SSE.
pub struct HttpModel {
    config: HttpModelConfig,
    api_key: Option<String>,
    client: reqwest::Client,
    /// Each context message's serialized items, shared by the model's clones (every session it serves).
    bodies: Arc<BodyCache>,
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
            bodies: Arc::default(),
        })
    }

    /// This model asking `model` instead of its own and with `system` as its system prompt, each only where
    /// given: the same client (its connection pool), key, endpoint, retries and timeouts. A fleet worker answers
    /// a session submitted with its own model or system prompt this way.
    pub fn with_overrides(&self, model: Option<&str>, system: Option<&str>) -> HttpModel {
        let mut config = self.config.clone();
        if let Some(model) = model {
            model.clone_into(&mut config.model);
        }
        if let Some(system) = system {
            config.system = Some(system.to_owned());
        }
        HttpModel {
            config,
            api_key: self.api_key.clone(),
            client: self.client.clone(),
            bodies: Arc::clone(&self.bodies),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &HttpModelConfig {
        &self.config
    }

    /// The request body this model sends for `context` and `tools`.
    pub fn request_body<'a>(&self, context: impl IntoIterator<Item = &'a Message>, tools: &[ToolDefinition]) -> Value {
        build_body(self.config.format, &self.settings(), context, tools)
    }

    fn settings(&self) -> RequestSettings {
        RequestSettings {
            model: self.config.model.clone(),
            system: self.config.system.clone(),
            max_tokens: self.config.max_tokens,
            extra: self.config.extra_body.clone(),
            provider_async: self.config.provider_async,
        }
    }

    /// Sends one request and returns its delta stream. A request that fails before its first delta (contract §3.6.6)
    /// is tried again as [`HttpModelConfig::retry`] allows; the engine only ever sees the attempt that streamed.
    pub async fn stream_context<'a>(
        &self,
        context: impl IntoIterator<Item = &'a Message>,
        tools: &[ToolDefinition],
    ) -> Result<DeltaStream, ModelError> {
        self.send(self.request_body(context, tools).to_string()).await
    }

    /// Sends a request with `body`, retrying as [`HttpModelConfig::retry`] allows.
    async fn send(&self, body: String) -> Result<DeltaStream, ModelError> {
        let url = self.config.url();
        let key = self.api_key.as_deref();
        with_retries(&self.config.retry, |_| {
            attempt(&self.client, &self.config, key, &url, &body)
        })
        .await
    }
}

#[async_trait::async_trait]
impl headstart_core::Model for HttpModel {
    async fn stream(&self, request: headstart_core::ModelRequest) -> Result<DeltaStream, ModelError> {
        // From the items kept from this model's last requests: a step serializes what is new in the context.
        let body = (self.bodies).body_text(self.config.format, &self.settings(), &request.context, &request.tools);
        self.send(body).await
    }

    fn provider(&self) -> Option<&str> {
        Some(self.config.format.otel_provider())
    }

    fn model_name(&self) -> Option<&str> {
        Some(&self.config.model)
    }
}
