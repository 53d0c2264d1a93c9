//! Test support (feature `testing`): the provider replay server and the Rust-only conversion of a recording, for
//! the Python suite's differential tests. Not in the published package.

use std::collections::HashMap;
use std::time::Duration;

use headstart_providers::replay_server::gate::second_call_start;
use headstart_providers::replay_server::responses_input::Checked;
use headstart_providers::replay_server::{cassette_events, Page, ReplayServer as Server, Reply};
use headstart_providers::{convert_capture, ConvertOptions, WireFormat};
use pyo3::prelude::*;

use crate::errors::ConfigError;
use crate::json::Json;
use crate::runtime::block_on;

/// A local HTTP server replaying a recorded cassette: the k-th POST gets the k-th exchange's SSE body, one event
/// per `delay_ms`; with `statuses`, the first POSTs get those HTTP errors instead (`Retry-After: 0`).
#[pyclass(module = "headstart._native", frozen)]
struct ReplayServer {
    server: Server,
    /// Events of the first reply held back by the gate.
    held_back: usize,
}

#[pymethods]
impl ReplayServer {
    /// Starts serving the cassette at `path`.
    #[new]
    /// With `gate` (a path), the first recorded reply holds its second tool call back until a GET of that path
    /// arrived (at most `gate_timeout_ms`): the test's first early tool fetches it.
    #[pyo3(signature = (path, delay_ms=0.0, statuses=Vec::new(), gate=None, gate_timeout_ms=30_000.0))]
    fn new(
        py: Python<'_>,
        path: &str,
        delay_ms: f64,
        statuses: Vec<u16>,
        gate: Option<String>,
        gate_timeout_ms: f64,
    ) -> PyResult<Self> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::new_err(format!("{path}: {error}")))?;
        let errors = statuses.into_iter().map(|status| Reply::Status {
            status,
            headers: vec![("retry-after".to_owned(), "0".to_owned())],
            body: format!(r#"{{"error": {{"message": "scripted {status}"}}}}"#),
        });
        let recorded = cassette_events(&text)
            .map_err(|error| ConfigError::new_err(error.to_string()))?
            .into_iter()
            .enumerate()
            .map(|(number, events)| match (&gate, second_call_start(&events)) {
                (Some(path), Some(before)) if number == 0 => Reply::Gated {
                    events,
                    before,
                    path: path.clone(),
                    timeout: Duration::from_secs_f64(gate_timeout_ms.max(0.0) / 1000.0),
                },
                _ => Reply::Events(events),
            });
        let replies: Vec<Reply> = errors.chain(recorded).collect();
        let held_back = replies
            .iter()
            .find_map(|reply| match reply {
                Reply::Gated { events, before, .. } => Some(events.len() - before),
                _ => None,
            })
            .unwrap_or(0);
        let pages = gate
            .iter()
            .map(|path| {
                let page = Page {
                    delay: Duration::ZERO,
                    body: "open".to_owned(),
                };
                (path.clone(), page)
            })
            .collect::<HashMap<_, _>>();
        let delay = Duration::from_secs_f64(delay_ms.max(0.0) / 1000.0);
        let server = block_on(py, Server::start(replies, pages, delay))
            .map_err(|error| ConfigError::new_err(error.to_string()))?;
        Ok(ReplayServer { server, held_back })
    }

    /// Serves `replies` (each a list of SSE events, each with its blank line) to the model requests in order, one
    /// event every `delay_ms`. With `checked`, a request that breaks the Responses API's rules on call outputs gets
    /// its 400 instead (`replay_server::responses_input`).
    #[staticmethod]
    #[pyo3(signature = (replies, delay_ms=0.0, checked=false))]
    fn scripted(py: Python<'_>, replies: Vec<Vec<String>>, delay_ms: f64, checked: bool) -> PyResult<Self> {
        let replies: Vec<Reply> = replies.into_iter().map(Reply::Events).collect();
        let delay = Duration::from_secs_f64(delay_ms.max(0.0) / 1000.0);
        let server = match checked {
            true => block_on(py, Server::start_choosing(Checked::new(replies), HashMap::new(), delay)),
            false => block_on(py, Server::start(replies, HashMap::new(), delay)),
        }
        .map_err(|error| ConfigError::new_err(error.to_string()))?;
        Ok(ReplayServer { server, held_back: 0 })
    }

    /// `http://127.0.0.1:PORT`.
    #[getter]
    fn url(&self) -> String {
        self.server.url("")
    }

    /// How far the first GET of `path` led the end of the reply to POST `number`: the milliseconds from the GET
    /// to the reply's last event being sent (negative: the GET came after), and how many of the reply's events were
    /// sent after the GET. `None` when either did not happen.
    #[pyo3(signature = (path, number=0))]
    fn lead(&self, path: &str, number: usize) -> Option<(f64, usize)> {
        self.server.lead(path, number).map(|lead| (lead.ms, lead.events_after))
    }

    /// How many events of the first reply the gate holds back (0 without a gate, or when it has no second call).
    #[getter]
    fn held_back(&self) -> usize {
        self.held_back
    }

    /// The JSON bodies of the model requests (POSTs) so far.
    fn request_bodies(&self) -> Json {
        let bodies = self
            .server
            .model_requests()
            .into_iter()
            .map(|request| request.body)
            .collect();
        Json(serde_json::Value::Array(bodies))
    }
}

/// The Rust-only path on a recording: each exchange of the capture at `path`, read in `format` by the converter,
/// as its list of delta dicts.
#[pyfunction]
fn convert_recording(path: &str, format: &str) -> PyResult<Json> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::new_err(format!("{path}: {error}")))?;
    let format: WireFormat = format
        .parse()
        .map_err(|error: headstart_providers::ProviderError| ConfigError::new_err(error.to_string()))?;
    let logs = convert_capture(format, &text, &ConvertOptions::default())
        .map_err(|error| ConfigError::new_err(error.to_string()))?;
    let logs = logs
        .into_iter()
        .map(|log| {
            log.into_iter()
                .map(|timed| serde_json::to_value(timed.event).unwrap_or_default())
                .collect()
        })
        .collect();
    Ok(Json(serde_json::Value::Array(logs)))
}

/// `headstart demo`'s run (the Rust demo, on the wall clock) into the SQLite file `db`: its savings, as
/// `headstart.savings` gives them.
#[pyfunction]
fn rust_demo(py: Python<'_>, db: &str, out_dir: &str) -> PyResult<Json> {
    let outcome = block_on(py, headstart_sim::demo::run(db.as_ref(), out_dir.into(), |_, _| {}));
    let outcome = outcome.map_err(crate::errors::EngineError::new_err)?;
    Ok(Json(crate::savings::savings_json(&outcome.timeline)))
}

/// Adds the test support to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<ReplayServer>()?;
    module.add_function(wrap_pyfunction!(convert_recording, module)?)?;
    module.add_function(wrap_pyfunction!(rust_demo, module)?)?;
    Ok(())
}
