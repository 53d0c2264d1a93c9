//! [`NativeEngine`]: the engine over an open store, with JavaScript tools and hooks.

use std::sync::Arc;

use headstart::store::StoreError;
use headstart::{
    CancellationToken, Clock, EngineConfig, ExecutionMode, Hooks, RecoveryPolicy, SessionId, Toolbox, UserMessage,
};
use headstart_host::{open_response, Host, HostHook, HostTool, HostToolSpec, Opening};
use headstart_postgres::SessionLocksAt;
use headstart_providers::feed::convert_options;
use headstart_providers::{Feed, FeedFormat};
use napi_derive::napi;
use serde::Deserialize;
use serde_json::Value;

use crate::bridge::{Bridge, Dispatch};
use crate::response::NativeResponse;
use crate::store::NativeStore;
use crate::{js_error, one_of};

/// The engine's options, as the package's `Engine` gives them (JSON).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EngineOptions {
    /// `parallel` (the default) or `sequential`.
    tool_execution: Option<String>,
    /// Whether early tools start at their seal (the default) or with the batch.
    early_execution: Option<bool>,
    /// How many bodies may run at once: absent, the engine's default; `null`, no bound.
    #[serde(default, deserialize_with = "present")]
    max_in_flight: Option<Option<u64>>,
    /// How many model requests one agent run may make.
    max_requests: Option<u32>,
    /// JavaScript has a `beforeToolCall` hook.
    #[serde(default)]
    before_tool_call: bool,
    /// JavaScript has an `afterToolCall` hook.
    #[serde(default)]
    after_tool_call: bool,
}

/// A field that is `Some` whenever present, `null` included.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Option<u64>>, D::Error> {
    Option::<u64>::deserialize(deserializer).map(Some)
}

/// How one response is opened ([`NativeEngine::open`]).
#[napi(object)]
pub struct OpenOptions {
    /// The stream's format: `headstart` (the default), a wire format, or `sse-` and a wire format.
    pub format: Option<String>,
    /// The Chat Completions sealing rule (`complete`, the default; `next-index`; `finish`).
    pub seal: Option<String>,
    /// A file the response is appended to, as a recording.
    pub record: Option<String>,
    /// User messages to append to the session first, in order.
    pub users: Option<Vec<String>>,
    /// Create the session first, under its id (from [`NativeEngine::new_session_id`]).
    pub create: Option<bool>,
}

/// The engine over one store, with the JavaScript tools of its spec.
#[napi]
pub struct NativeEngine {
    engine: headstart::Engine,
    bridge: Arc<Bridge>,
    locks: SessionLocksAt,
}

#[napi]
impl NativeEngine {
    /// An engine over `store` with the tools of `tools` (the JSON array of their specs,
    /// [`HostToolSpec`]s: `{name, description, parameters, early, providerAsync, idempotent, sequential,
    /// timeoutMs, conflictKey}`, all but `name` optional) and the options of `options` (JSON: `toolExecution`
    /// `parallel`|`sequential`, `earlyExecution`, `maxInFlight` (a number, or `null` for no bound), `maxRequests`,
    /// and `beforeToolCall`, `afterToolCall`: whether the hook exists). Every ask of JavaScript (a call, a hook) goes
    /// to `dispatch` as a JSON letter.
    #[napi(constructor)]
    pub fn new(store: &NativeStore, tools: String, options: String, dispatch: Dispatch) -> napi::Result<Self> {
        let bridge = Arc::new(Bridge::new(dispatch));
        let host = Arc::clone(&bridge) as Arc<dyn Host>;
        let specs: Vec<Value> = serde_json::from_str(&tools)
            .map_err(|error| js_error(format!("the tools are not a JSON array: {error}")))?;
        let options: EngineOptions =
            serde_json::from_str(&options).map_err(|error| js_error(format!("the engine's options: {error}")))?;
        let mut toolbox = Toolbox::new();
        for spec in specs {
            let spec = HostToolSpec::from_json(spec).map_err(js_error)?;
            toolbox
                .register(HostTool::new(spec, Arc::clone(&host)).map_err(js_error)?)
                .map_err(js_error)?;
        }
        let mode = one_of(
            "toolExecution",
            options.tool_execution.as_deref().unwrap_or("parallel"),
            [
                ("parallel", ExecutionMode::Parallel),
                ("sequential", ExecutionMode::Sequential),
            ],
        )?;
        let max_in_flight = match options.max_in_flight {
            None => Some(headstart::DEFAULT_MAX_IN_FLIGHT),
            Some(limit) => limit.map(|limit| usize::try_from(limit).unwrap_or(usize::MAX)),
        };
        let mut config = EngineConfig::default()
            .tool_execution(mode)
            .max_in_flight(max_in_flight)
            .early_execution(options.early_execution.unwrap_or(true));
        if let Some(limit) = options.max_requests {
            config = config.max_requests(limit);
        }
        let mut hooks = Hooks::new();
        if options.before_tool_call || options.after_tool_call {
            hooks.push(HostHook {
                before: options.before_tool_call,
                after: options.after_tool_call,
                host,
            });
        }
        let engine = headstart::Engine::builder(Arc::clone(&store.store))
            .toolbox(toolbox)
            .hooks(hooks)
            .config(config)
            .build();
        Ok(NativeEngine {
            engine,
            bridge,
            locks: store.locks.clone(),
        })
    }

    /// Creates a new session: under `id` when given (one [`new_session_id`](Self::new_session_id) gave; an id
    /// already taken is refused), else under a fresh one; resolves to its id.
    #[napi]
    pub async fn create_session(&self, id: Option<String>) -> napi::Result<String> {
        match id {
            Some(id) => {
                let session = SessionId(id);
                create_session_with_id(&self.engine, &session).await.map_err(js_error)?;
                Ok(session.0)
            }
            None => Ok(self.engine.create_session().await.map_err(js_error)?.0),
        }
    }

    /// A fresh session id (a UUIDv7, as the stores make them), at once: the session is created by the first
    /// response [`open`](Self::open)ed with `create`, so the first request need not wait for the store.
    #[napi]
    pub fn new_session_id(&self) -> String {
        headstart_host::new_session_id()
    }

    /// Appends a user message with `text` to `session`; resolves to its sequence number.
    #[napi]
    pub async fn append_user(&self, session: String, text: String) -> napi::Result<i64> {
        let seq = append_user(&self.engine, &SessionId(session), text)
            .await
            .map_err(js_error)?;
        Ok(i64::try_from(seq).unwrap_or(i64::MAX))
    }

    /// Opens one response of `session` ([`OpenOptions`]: its format, the users' messages to append first, whether to
    /// create the session first).
    ///
    /// With `after` (the session's previous response), the opening waits until that response's run has ended,
    /// every result of it stored, so the log stays in order while the next request already goes out; and it fails
    /// if a result could not be stored.
    ///
    /// Returns at once: the feed takes the model's stream from now on, while the engine creates the session,
    /// appends the users' messages and finds the request's number off Node's thread, so the model's request need not
    /// wait for the store. Nothing of the stream is read before all that is durable; a failure there (an unknown
    /// session, a broken store) is the first `nextBatch`'s rejection.
    #[napi]
    pub fn open(
        &self,
        session: String,
        options: OpenOptions,
        after: Option<&NativeResponse>,
    ) -> napi::Result<NativeResponse> {
        let OpenOptions {
            format,
            seal,
            record,
            users,
            create,
        } = options;
        let format = format.unwrap_or_else(|| "headstart".to_owned());
        let format = FeedFormat::parse(&format).map_err(js_error)?;
        let options = convert_options(seal.as_deref().unwrap_or("complete"), record.as_deref()).map_err(js_error)?;
        let (feed, deltas) = Feed::open(format, &options);
        let cancel = CancellationToken::new();
        let engine = self.engine.clone();
        let opening = Opening {
            create: create == Some(true),
            users: users.unwrap_or_default(),
            after_previous: after.is_some(),
        };
        let previous = after.map(NativeResponse::settled_future);
        let opening = {
            let cancel = cancel.clone();
            async move {
                if let Some(previous) = previous {
                    previous.await;
                }
                open_response(&engine, &SessionId(session), opening, deltas, cancel)
                    .await
                    .map_err(|error| error.to_string())
            }
        };
        Ok(NativeResponse::opening(feed, opening, cancel))
    }

    /// Recovers `session` after a crash (contract §7.4): every admitted call without a result gets one,
    /// `interrupted` (policy `fail`), or a new run for idempotent tools (policy `rerun_idempotent`). Resolves to the
    /// JSON of what was done with each call. The recovery holds the session's lock (a lock file beside a SQLite file,
    /// as `headstart recover` takes; an advisory lock of a PostgreSQL database): while another process, or a
    /// worker's lease, holds it, it rejects naming the holder, and writes nothing.
    #[napi]
    pub async fn recover(&self, session: String, policy: String) -> napi::Result<String> {
        let policy = one_of(
            "policy",
            &policy,
            [
                ("fail", RecoveryPolicy::FailAll),
                ("rerun_idempotent", RecoveryPolicy::ReExecuteIdempotent),
            ],
        )?;
        let session = SessionId(session);
        let _lock = self
            .locks
            .take(&session, headstart::SystemClock.now_us())
            .await
            .map_err(js_error)?;
        let recovered = self.engine.recover(&session, policy).await.map_err(js_error)?;
        serde_json::to_string(&recovered).map_err(js_error)
    }

    /// JavaScript's answer to letter `id` (JSON text: `{"ok": value}` or `{"error": message}`).
    #[napi]
    pub fn settle(&self, id: i64, answer: String) {
        if let Ok(id) = u64::try_from(id) {
            self.bridge.settle(id, &answer);
        }
    }

    /// A partial result of the running call of letter `id` (JSON text of a tool result).
    #[napi]
    pub fn update(&self, id: i64, partial: String) {
        if let Ok(id) = u64::try_from(id) {
            self.bridge.update(id, &partial);
        }
    }
}

/// Creates `session` under its own id, stamped now.
async fn create_session_with_id(engine: &headstart::Engine, session: &SessionId) -> Result<(), StoreError> {
    engine
        .store()
        .create_session_with_id(session, headstart::SystemClock.now_us())
        .await
}

/// Appends a user message with `text` to `session`, stamped now; its sequence number.
async fn append_user(engine: &headstart::Engine, session: &SessionId, text: String) -> Result<u64, StoreError> {
    engine
        .store()
        .append_user(session, &UserMessage::new(text), headstart::SystemClock.now_us())
        .await
}
