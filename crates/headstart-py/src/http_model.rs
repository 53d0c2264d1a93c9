//! `headstart.HttpModel` (`_native.HttpModel`): a provider's HTTP API as the agent's model, for applications without
//! an SDK. Rust owns the request, its retries and the SSE stream: the same client as `headstart run`.

use std::sync::Arc;

use headstart_providers::http::{HttpModel as Client, HttpModelConfig};
use headstart_providers::WireFormat;
use pyo3::prelude::*;

use crate::errors::ConfigError;

/// A model reached over HTTP in one of the wire formats.
#[pyclass(module = "headstart._native", frozen)]
pub(crate) struct HttpModel {
    pub(crate) client: Arc<Client>,
}

#[pymethods]
impl HttpModel {
    /// `provider` is the wire format (`openai-chat`, `openai-responses`, `anthropic`, `gemini`); `base_url` defaults
    /// to the provider's public endpoint; `api_key_env` names the variable holding the key (default: the provider's
    /// usual one; `""` sends no key, for local servers). A request that fails before its first delta is retried
    /// (twice, with backoff; `Retry-After` honoured), as `headstart run` does. `provider_async` declares the
    /// provider-async tools async to the model (OpenAI Responses only).
    #[new]
    #[pyo3(signature = (provider, model, *, base_url=None, api_key_env=None, system=None, max_tokens=None, seal="complete", provider_async=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        provider: &str,
        model: String,
        base_url: Option<String>,
        api_key_env: Option<String>,
        system: Option<String>,
        max_tokens: Option<u32>,
        seal: &str,
        provider_async: bool,
    ) -> PyResult<Self> {
        let format: WireFormat = provider
            .parse()
            .map_err(|error: headstart_providers::ProviderError| ConfigError::new_err(error.to_string()))?;
        let mut config = HttpModelConfig::new(format, model);
        if let Some(base_url) = base_url {
            config = config.with_base_url(base_url);
        }
        if let Some(variable) = api_key_env {
            config = config.with_api_key_env((!variable.is_empty()).then_some(variable.as_str()));
        }
        config.system = system;
        config.max_tokens = max_tokens;
        config.convert = crate::feed::convert_options(seal, None)?;
        if provider_async && format != WireFormat::OpenAiResponses {
            return Err(ConfigError::new_err(
                "provider_async=True needs provider 'openai-responses' (the only wire format with async tools)",
            ));
        }
        config.provider_async = provider_async;
        let client = Client::new(config).map_err(|error| ConfigError::new_err(error.to_string()))?;
        Ok(HttpModel {
            client: Arc::new(client),
        })
    }
}
