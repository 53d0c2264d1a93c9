//! [`ModelRequest`] (`_native.ModelRequest`): one request of the agent loop as the Python model callable gets it.

use headstart_providers::request::{build_body, RequestSettings};
use pyo3::prelude::*;
use serde_json::Value;

use crate::errors::ConfigError;
use crate::feed::Format;
use crate::json::{to_python, Json};

/// One model request as Python sees it (`_native.ModelRequest`): its number, its context, and its body in the
/// agent's wire format.
#[pyclass(module = "headstart._native", frozen)]
pub(crate) struct ModelRequest {
    pub(crate) request: headstart::ModelRequest,
    pub(crate) format: Format,
}

#[pymethods]
impl ModelRequest {
    /// The 0-based number of the request in the session.
    #[getter]
    fn number(&self) -> u32 {
        self.request.request
    }

    /// The canonical context (contract §7.3) as stored messages' JSON.
    #[getter]
    fn context(&self) -> Json {
        Json(serde_json::to_value(&self.request.context).unwrap_or_default())
    }

    /// The request body in the agent's wire format, without `stream` (the SDK call passes `stream=True` itself):
    /// `model`, the context as the format's messages, the tools, `system` and `max_tokens` when given; with
    /// `provider_async`, the provider-async tools declared so (OpenAI Responses).
    #[pyo3(signature = (model, system=None, max_tokens=None, provider_async=false))]
    fn body<'py>(
        &self,
        py: Python<'py>,
        model: String,
        system: Option<String>,
        max_tokens: Option<u32>,
        provider_async: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let Some(wire) = self.format.wire() else {
            return Err(ConfigError::new_err(
                "an agent of format 'headstart' has no request body",
            ));
        };
        let settings = RequestSettings {
            model,
            system,
            max_tokens,
            provider_async,
            ..RequestSettings::default()
        };
        let mut body = build_body(wire, &settings, &self.request.context, &self.request.tools);
        if let Value::Object(fields) = &mut body {
            fields.remove("stream");
        }
        to_python(py, &body)
    }
}
