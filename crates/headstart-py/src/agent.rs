//! [`Agent`] (`_native.Agent`): the engine's multi-request loop over a Python model callable.

use std::sync::Arc;

use headstart::{CancellationToken, SessionId, UserMessage};
use pyo3::prelude::*;

use crate::engine::Engine;
use crate::events::Events;
use crate::feed::convert_options;
use crate::home::Home;
use crate::http_model::HttpModel;
use crate::model::PyModel;
use crate::runtime::awaitable;

/// An agent: an engine (with its own request limit) and a model callable.
#[pyclass(module = "headstart._native", frozen)]
pub(crate) struct Agent {
    agent: headstart::Agent,
    home: Home,
}

#[pymethods]
impl Agent {
    /// An agent over `engine` asking `model` (an `HttpModel`, or a callable given a `headstart.ModelRequest` and
    /// returning its SDK's stream in `format`, whose Chat Completions calls are sealed by the rule `seal`), for at
    /// most `max_requests` requests a run.
    #[new]
    #[pyo3(signature = (engine, model, format, max_requests, seal="complete"))]
    fn new(engine: &Engine, model: Bound<'_, PyAny>, format: &str, max_requests: u32, seal: &str) -> PyResult<Self> {
        let format = crate::feed::parse_format(format)?;
        let options = convert_options(seal, None)?;
        let inner = &engine.engine;
        let limited = headstart::Engine::builder(Arc::clone(inner.store()))
            .toolbox(inner.toolbox().clone())
            .hooks(engine.hooks.clone())
            .config(inner.config().clone().max_requests(max_requests))
            .build();
        let model: Arc<dyn headstart::Model> = match model.cast::<HttpModel>() {
            Ok(http) => http.get().client.clone(),
            Err(_) => Arc::new(PyModel {
                function: Arc::new(model.unbind()),
                format,
                options,
                home: engine.home.clone(),
            }),
        };
        Ok(Agent {
            agent: headstart::Agent::new(limited, model),
            home: engine.home.clone(),
        })
    }

    /// Awaitable: appends `prompt` to `session` and runs the loop; resolves to the run's events. Must be called
    /// from a coroutine: the model and the tools run on its loop.
    fn run<'py>(&self, py: Python<'py>, session: String, prompt: String) -> PyResult<Bound<'py, PyAny>> {
        self.home.capture(py)?;
        let agent = self.agent.clone();
        let home = self.home.clone();
        awaitable(py, async move {
            let cancel = CancellationToken::new();
            let events = agent.run(&SessionId(session), UserMessage::new(prompt), cancel.clone());
            Ok(Events::new(events, cancel, home))
        })
    }
}
