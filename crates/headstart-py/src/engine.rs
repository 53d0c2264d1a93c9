//! [`Engine`] (`_native.Engine`): a store, the Python tools, and the entry points the package's `Engine` class
//! calls (`create_session`, `tool_specs`, `open` for one wrapped response).

use headstart::store::owner::OwnershipError;
use headstart::store::Durability;
use headstart_host::{open_response, Host, HostHook, HostTool, HostToolSpec, OpenError, Opening};
use headstart_postgres::SessionLocksAt;
use std::collections::HashMap;
use std::sync::Arc;

use headstart::{
    AsyncDelivery, CancellationToken, Clock, EngineConfig, ExecutionMode, Hooks, RecoveryPolicy, SessionId,
    ToolDefinition, Toolbox,
};
use headstart_providers::request::{build_body, RequestSettings};
use pyo3::prelude::*;
use serde_json::Value;

use crate::errors::{store_error, ConfigError, EngineError, SessionBusy};
use crate::events::Events;
use crate::feed::{convert_options, Feed};
use crate::home::Home;
use crate::host::PyHost;
use crate::json::{from_python, to_python, Json};
use crate::runtime::awaitable;
use crate::store::{open_store, Access};

/// The engine over one store, with its Python tools.
#[pyclass(module = "headstart._native", frozen)]
pub(crate) struct Engine {
    pub(crate) engine: headstart::Engine,
    pub(crate) home: Home,
    /// The hooks the engine was built with (an agent's engine, built anew with its own request limit, gets them too).
    pub(crate) hooks: Hooks,
    /// The session locks of the store (beside a SQLite file, or the database's): a recovery takes its session's, as
    /// the CLI's `recover` does.
    locks: SessionLocksAt,
}

#[pymethods]
impl Engine {
    /// Opens `store` (a SQLite path or a `postgresql://` URL) with `tools` (`headstart.Tool` objects).
    /// `tool_execution` is `parallel` or `sequential`; `max_in_flight` bounds the bodies running at once (`None`:
    /// unbounded); `early_execution=False` runs every call after its stream, as a batch; `durability` (SQLite) is
    /// `full` (each commit synced: survives power loss) or `normal` (survives a crash of the process);
    /// `async_delivery` (`all_pending` or `as_ready`) and `max_pending_calls` govern provider-async results
    /// delivered later (contract §3.7.5, §3.7.6); `before_tool_call` / `after_tool_call` are Python hooks (see
    /// `crate::hook`).
    #[new]
    // The keyword arguments of Python's `Engine(...)`, one parameter each, as pyo3 maps them.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (
        store,
        tools,
        *,
        tool_execution = "parallel",
        max_in_flight = Some(headstart::DEFAULT_MAX_IN_FLIGHT),
        early_execution = true,
        max_requests = 32,
        durability = "full",
        async_delivery = "all_pending",
        max_pending_calls = headstart::DEFAULT_MAX_PENDING_CALLS,
        before_tool_call = None,
        after_tool_call = None,
    ))]
    fn new(
        py: Python<'_>,
        store: &str,
        tools: Vec<Bound<'_, PyAny>>,
        tool_execution: &str,
        max_in_flight: Option<usize>,
        early_execution: bool,
        max_requests: u32,
        durability: &str,
        async_delivery: &str,
        max_pending_calls: usize,
        before_tool_call: Option<Bound<'_, PyAny>>,
        after_tool_call: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let durability = one_of(
            "durability",
            durability,
            [("full", Durability::Full), ("normal", Durability::Normal)],
        )?;
        let mode = one_of(
            "tool_execution",
            tool_execution,
            [
                ("parallel", ExecutionMode::Parallel),
                ("sequential", ExecutionMode::Sequential),
            ],
        )?;
        let delivery = one_of(
            "async_delivery",
            async_delivery,
            [
                ("all_pending", AsyncDelivery::AllPending),
                ("as_ready", AsyncDelivery::AsReady),
            ],
        )?;
        let home = Home::new()?;
        let mut specs = Vec::with_capacity(tools.len());
        let mut functions = HashMap::with_capacity(tools.len());
        for tool in &tools {
            let spec = HostToolSpec::from_json(from_python(&tool.call_method0("spec")?)?)
                .map_err(|error| ConfigError::new_err(error.to_string()))?;
            functions.insert(spec.name.clone(), Arc::new(tool.clone().unbind()));
            specs.push(spec);
        }
        let host: Arc<dyn Host> = Arc::new(PyHost {
            home: home.clone(),
            tools: functions,
            before: before_tool_call.as_ref().map(|hook| Arc::new(hook.clone().unbind())),
            after: after_tool_call.as_ref().map(|hook| Arc::new(hook.clone().unbind())),
        });
        let mut toolbox = Toolbox::new();
        for spec in specs {
            let tool =
                HostTool::new(spec, Arc::clone(&host)).map_err(|error| ConfigError::new_err(error.to_string()))?;
            toolbox
                .register(tool)
                .map_err(|error| ConfigError::new_err(error.to_string()))?;
        }
        let config = EngineConfig::default()
            .tool_execution(mode)
            .max_in_flight(max_in_flight)
            .early_execution(early_execution)
            .max_requests(max_requests)
            .async_delivery(delivery)
            .max_pending_calls(max_pending_calls);
        let mut hooks = Hooks::new();
        if before_tool_call.is_some() || after_tool_call.is_some() {
            hooks.push(HostHook {
                before: before_tool_call.is_some(),
                after: after_tool_call.is_some(),
                host,
            });
        }
        let engine = headstart::Engine::builder(open_store(py, store, Access::Write(durability))?)
            .toolbox(toolbox)
            .hooks(hooks.clone())
            .config(config)
            .build();
        Ok(Engine {
            engine,
            home,
            hooks,
            locks: headstart_postgres::session_locks(store),
        })
    }

    /// Awaitable: a new session's id.
    fn create_session<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let engine = self.engine.clone();
        awaitable(py, async move {
            let session = engine.create_session().await.map_err(store_error)?;
            Ok(session.0)
        })
    }

    /// The tools as `format`'s request declares them (`headstart`: name, description and parameters).
    fn tool_specs<'py>(&self, py: Python<'py>, format: &str) -> PyResult<Bound<'py, PyAny>> {
        let definitions = self.engine.toolbox().definitions();
        let specs = match crate::feed::parse_format(format)?.wire() {
            None => serde_json::to_value(&definitions).unwrap_or_default(),
            Some(wire) => {
                let mut body = build_body(wire, &RequestSettings::default(), &[], &definitions);
                body.get_mut("tools")
                    .map(Value::take)
                    .unwrap_or(Value::Array(Vec::new()))
            }
        };
        to_python(py, &specs)
    }

    /// The tool definitions (name, description, JSON schema of the parameters), in registration order.
    fn definitions(&self) -> Json {
        let definitions: Vec<ToolDefinition> = self.engine.toolbox().definitions();
        Json(serde_json::to_value(definitions).unwrap_or_default())
    }

    /// Awaitable: recovers `session` after a crash (contract §7.4): every admitted call without a result gets one,
    /// `interrupted` (policy `fail`), or, for idempotent tools, a new run (policy `rerun_idempotent`). Resolves to
    /// what was done with each call. Must be called from a coroutine: re-run tools run on its loop.
    #[pyo3(signature = (session, policy="fail"))]
    fn recover<'py>(&self, py: Python<'py>, session: String, policy: &str) -> PyResult<Bound<'py, PyAny>> {
        let policy = match policy {
            "fail" => RecoveryPolicy::FailAll,
            "rerun_idempotent" => RecoveryPolicy::ReExecuteIdempotent,
            other => {
                return Err(ConfigError::new_err(format!(
                    "policy must be 'fail' or 'rerun_idempotent', not {other:?}"
                )))
            }
        };
        let session = SessionId(session);
        // One recoverer at a time (contract §7.4.4): another process that holds the session is named, and nothing
        // is written.
        self.home.capture(py)?;
        let engine = self.engine.clone();
        let locks = self.locks.clone();
        awaitable(py, async move {
            let lock = locks
                .take(&session, headstart::SystemClock.now_us())
                .await
                .map_err(|error| match error {
                    OwnershipError::Refused(refusal) => SessionBusy::new_err(refusal.to_string()),
                    other => store_error(other),
                })?;
            let recovered = engine.recover(&session, policy).await.map_err(store_error)?;
            drop(lock);
            Ok(Json(serde_json::to_value(recovered).unwrap_or_default()))
        })
    }

    /// Awaitable: the figures of `session` from its stored times (issue 29): per call `sealed_ms`, `headroom_ms`,
    /// `seal_to_start_ms`, `run_ms` and `overlap_ms`; per response its model, `tool_round_ms` and
    /// `batching_round_ms` (what end-of-stream batching would have taken), as `headstart inspect --json` shows them.
    ///
    /// With `after`, only what was stored after sequence number `after` is read: the figures of the responses whose
    /// fragments come after `after + 1`, timed from the message at `after + 1` (a run passes the sequence number two
    /// below its first fragment's, so a step reads what the step wrote, not the session's history).
    #[pyo3(signature = (session, after=None))]
    fn figures<'py>(&self, py: Python<'py>, session: String, after: Option<u64>) -> PyResult<Bound<'py, PyAny>> {
        let store = Arc::clone(self.engine.store());
        awaitable(py, async move {
            let figures = headstart_timeline::stored::figures_json(store.as_ref(), &SessionId(session), after)
                .await
                .map_err(store_error)?;
            Ok(Json(figures))
        })
    }

    /// Opens one response of `session` read in `format`: the feed the stream's events go into, and an awaitable of
    /// the run's events. `seal` is the Chat Completions sealing rule; `record`, a file the response is appended to
    /// with its events' arrival times. Before the response, as a framework's chat asks (`headstart_host::Opening`):
    /// `create` creates the session under its id, `users` are recorded as the prompt's new user messages, and
    /// `after_previous` (an earlier response of the chat has ended) refuses to open while that response's calls
    /// lack stored results. Must be called from a coroutine: the tools run on its loop.
    #[pyo3(signature = (session, format, seal="complete", record=None, *, users=Vec::new(), create=false, after_previous=false))]
    #[allow(clippy::too_many_arguments)]
    fn open<'py>(
        &self,
        py: Python<'py>,
        session: String,
        format: &str,
        seal: &str,
        record: Option<&str>,
        users: Vec<String>,
        create: bool,
        after_previous: bool,
    ) -> PyResult<(Feed, Bound<'py, PyAny>)> {
        let (feed, deltas) = Feed::open(crate::feed::parse_format(format)?, &convert_options(seal, record)?);
        self.home.capture(py)?;
        let engine = self.engine.clone();
        let home = self.home.clone();
        let opening = Opening {
            create,
            users,
            after_previous,
        };
        let pending = awaitable(py, async move {
            let cancel = CancellationToken::new();
            let events = open_response(&engine, &SessionId(session), opening, deltas, cancel.clone())
                .await
                .map_err(|error| match error {
                    OpenError::Store(error) => store_error(error),
                    unfinished @ OpenError::Unfinished { .. } => EngineError::new_err(unfinished.to_string()),
                })?;
            Ok(Events::new(events, cancel, home))
        })?;
        Ok((feed, pending))
    }

    /// A fresh session id (a UUIDv7, as the stores make them), at once: the first response opened with `create`
    /// creates the session.
    fn new_session_id(&self) -> String {
        headstart_host::new_session_id()
    }

    /// Awaitable: the stored log of `session` (every message with its sequence number, request and times), as a
    /// list of dicts: what a framework's chat reads to go on with a session, or to rebuild its messages.
    fn log<'py>(&self, py: Python<'py>, session: String) -> PyResult<Bound<'py, PyAny>> {
        let store = Arc::clone(self.engine.store());
        awaitable(py, async move {
            let log = store.load_log(&SessionId(session)).await.map_err(store_error)?;
            Ok(Json(serde_json::to_value(log).unwrap_or_default()))
        })
    }
}

/// The value `name` stands for among two `choices`, or the `ConfigError` naming both: `<parameter> must be 'a' or
/// 'b', not "x"`.
fn one_of<T: Copy>(parameter: &str, name: &str, choices: [(&str, T); 2]) -> PyResult<T> {
    match choices.iter().find(|(choice, _)| *choice == name) {
        Some(&(_, value)) => Ok(value),
        None => Err(ConfigError::new_err(format!(
            "{parameter} must be '{}' or '{}', not {name:?}",
            choices[0].0, choices[1].0
        ))),
    }
}
