//! [`PyModel`]: a Python callable as the agent loop's [`Model`], and the [`ModelRequest`] it is given.
//!
//! The loop (Rust) asks for each response: the callable is called on the run's loop with the request built from the
//! transcript; it returns its SDK's stream (or an awaitable of it), which the package's pump reads on that loop into
//! a [`Feed`]. The feed's delta stream is what the loop wraps, so the Agent's responses go through the same
//! converters as `engine.wrap`'s.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;
use futures::{Stream, StreamExt};
use headstart::core::DeltaStream;
use headstart::{DeltaEvent, Model, ModelError};
use headstart_providers::request::{build_body, RequestSettings};
use pyo3::prelude::*;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::errors::ConfigError;
use crate::feed::{Feed, Format};
use crate::home::Home;
use crate::json::{to_python, Json};
use crate::mailbox::Letter;
use crate::task::CancelOnDrop;
use crate::tool::CallDone;

/// A Python model callable: `async def model(request: headstart.ModelRequest) -> <the SDK's stream>`.
pub(crate) struct PyModel {
    pub function: Arc<Py<PyAny>>,
    pub format: Format,
    pub home: Home,
}

/// One model request as Python sees it (`_native.ModelRequest`): its number, its context, and its body in the
/// agent's wire format.
#[pyclass(module = "headstart._native", frozen)]
pub(crate) struct ModelRequest {
    request: headstart::ModelRequest,
    format: Format,
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
    /// `model`, the context as the format's messages, the tools, `system` and `max_tokens` when given.
    #[pyo3(signature = (model, system=None, max_tokens=None))]
    fn body<'py>(
        &self,
        py: Python<'py>,
        model: String,
        system: Option<String>,
        max_tokens: Option<u32>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let Format::Wire(wire) = self.format else {
            return Err(ConfigError::new_err(
                "an agent of format 'headstart' has no request body",
            ));
        };
        let settings = RequestSettings {
            model,
            system,
            max_tokens,
            ..RequestSettings::default()
        };
        let mut body = build_body(wire, &settings, &self.request.context, &self.request.tools);
        if let Value::Object(fields) = &mut body {
            fields.remove("stream");
        }
        to_python(py, &body)
    }
}

/// The feed's delta stream, holding the Python task that pumps it: dropping the stream cancels the pump.
struct Pumped {
    deltas: DeltaStream,
    _pump: CancelOnDrop,
}

impl Stream for Pumped {
    type Item = Result<DeltaEvent, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.deltas.poll_next_unpin(cx)
    }
}

#[async_trait]
impl Model for PyModel {
    async fn stream(&self, request: headstart::ModelRequest) -> Result<DeltaStream, ModelError> {
        let mailbox = self.home.mailbox().map_err(ModelError::new)?;
        let (feed, deltas) = Feed::open(self.format);
        let (sender, receiver) = oneshot::channel();
        let id = mailbox.next_id();
        mailbox.send(Letter::Model {
            id,
            function: Arc::clone(&self.function),
            request: ModelRequest {
                request,
                format: self.format,
            },
            format: self.format.name(),
            feed,
            done: CallDone::new(sender),
        });
        let pump = CancelOnDrop::new(mailbox.clone(), id);
        match receiver.await {
            Ok(Ok(_)) => Ok(Pumped { deltas, _pump: pump }.boxed()),
            Ok(Err(message)) => Err(ModelError::new(message)),
            Err(_) => Err(ModelError::new("the Python model's task ended without a stream")),
        }
    }
}
