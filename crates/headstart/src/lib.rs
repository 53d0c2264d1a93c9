//! # headstart
//!
//! Streaming early execution for LLM agents. headstart wraps a model's delta stream; the moment a call to an
//! **early** tool is sealed (`toolcall_end`), it commits the transcript prefix — everything the model said up to
//! and including that call — durably, and only then starts the tool, while the model keeps generating. Calls to
//! other tools wait for the end of the stream and run as one batch. Every executed call has a durable owner in
//! the transcript, so a crash never leaves a side effect nobody can account for.
//!
//! The pieces:
//! - [`tool_fn`] (typed tools), [`Tool`] (dynamic ones) and [`Toolbox`]: what the model can call; [`ToolHook`]/[`Hooks`]: behaviour around calls;
//! - [`layer`]: reusable behaviour around a tool's execution (per-attempt timeout, retry, concurrency limit, span);
//! - [`Engine`]: store + tools + hooks + config; [`Engine::wrap`] turns one model stream into agent events;
//! - [`Agent`]: the multi-request loop over a [`Model`];
//! - [`AgentEvent`]: the single ordered event stream a consumer observes;
//! - re-exported layers: [`core`] (model types, delta events, accumulator) and [`store`] (transcript store).
//!
//! Errors on the tool path, one type per role: a typed tool's body returns a [`ToolFailure`] (`?` on any error); a
//! dynamic [`Tool`], a [layer](layer::ToolMiddleware) or a [`ToolHook`] returns a [`ToolError`], whose message is the
//! error result the model reads; registering a tool can fail with a [`ToolboxError`].
//!
//! ## Wrapping your model stream
//!
//! ```
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use headstart::core::{DoneReason, Usage};
//! use headstart::schemars::JsonSchema;
//! use headstart::{tool_fn, CancellationToken, DeltaEvent, Engine, SqliteStore, ToolContext, Toolbox};
//!
//! /// What to look up.
//! #[derive(serde::Deserialize, JsonSchema)]
//! struct LookupArgs {
//!     /// The search terms.
//!     q: String,
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! let lookup = tool_fn("lookup", |args: LookupArgs, _ctx: ToolContext| async move {
//!     Ok(format!("found {}", args.q))
//! })
//! .early(); // may start as soon as the call is sealed
//! let engine = Engine::builder(Arc::new(SqliteStore::open_in_memory()?))
//!     .toolbox(Toolbox::new().with(lookup)?)
//!     .build();
//! let session = engine.create_session().await?;
//!
//! // Your provider adapter's output: any Stream<Item = Result<DeltaEvent, ModelError>>.
//! let deltas = futures::stream::iter([
//!     DeltaEvent::Start { model: None, response_id: None },
//!     DeltaEvent::ToolcallStart { index: 0, id: "c1".into(), name: "lookup".into(), early: false, provider_async: false },
//!     DeltaEvent::ToolcallDelta { index: 0, delta: r#"{"q": "tokio"}"#.into() },
//!     DeltaEvent::ToolcallEnd { index: 0, arguments: None },
//!     DeltaEvent::Done { stop_reason: DoneReason::ToolUse, usage: Usage::default() },
//! ].map(Ok));
//!
//! // The engine numbers the session's requests itself (0 here, the session's first).
//! let mut events = engine.wrap_next(&session, deltas, CancellationToken::new()).await?;
//! let mut order = Vec::new();
//! while let Some(event) = events.next().await {
//!     order.push(event.type_name());
//! }
//! // The prefix holding c1 was durable before c1 started (contract §3.3).
//! let commit = order.iter().position(|e| *e == "message_end").unwrap();
//! let start = order.iter().position(|e| *e == "tool_execution_start").unwrap();
//! assert!(commit < start);
//! assert_eq!(order.last(), Some(&"turn_end"));
//! let log = engine.store().load_log(&session).await?;
//! let Some(headstart::Message::ToolResult(result)) = log.last().map(|stored| &stored.message) else { panic!() };
//! assert_eq!(result.text(), "found tokio"); // typed arguments: no JSON quotes around the value
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```
//!
//! The same call reads as a stream adapter with [`ModelStreamExt`]: `deltas.early_execute(&engine, &session,
//! cancel).await?`.
//!
//! A tool whose behaviour is decided at run time (an MCP server's, a plugin's) implements the object-safe [`Tool`]
//! trait instead, over untyped [`Arguments`].
//!
//! For the whole multi-request loop, implement [`Model`] and use [`Agent::run`].
#![warn(missing_docs)]

mod agent;
mod body_end;
mod clock;
mod config;
mod context_cache;
mod engine;
mod events;
mod lease;
pub mod metrics;
mod parts;
mod pending;
mod recovery;
mod response;
mod session_setup;
mod stream_ext;
mod tools;

pub use headstart_core as core;
pub use headstart_store as store;
/// `schemars`, re-exported so typed tools derive `JsonSchema` with the version headstart uses.
pub use schemars;

pub use agent::Agent;
pub use body_end::BodyEnd;
pub use clock::{Clock, SystemClock, TokioClock};
pub use config::{
    AsyncDelivery, EngineConfig, ExecutionMode, DEFAULT_CACHED_CONTEXTS, DEFAULT_MAX_CALLS_PER_RESPONSE,
    DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_PENDING_CALLS,
};
pub use engine::{Engine, EngineBuilder, TurnIdSource};
#[allow(deprecated)]
pub use events::event::TurnOutcome;
pub use events::event::{AgentEvent, AgentStop, ResponseOutcome, Role};
pub use events::queue::{Emitted, EventStream};
pub use lease::LeaseGuard;
pub use recovery::{
    expects_answer, recover_all, recover_session, RecoveredCall, RecoveryAction, RecoveryPolicy, Resumed, INTERRUPTED,
};
pub use response::ending::{CANCELLED_BY_CALLER, MISSING_TERMINAL};
pub use response::execute::run_body;
pub use response::lease_guard::LEASE_MAY_HAVE_EXPIRED;
pub use session_setup::SessionSetup;
pub use stream_ext::ModelStreamExt;
#[allow(deprecated)]
pub use tools::error::HookError;
pub use tools::error::{ToolError, ToolFailure};
pub use tools::hooks::{Decision, Hooks, ResultDraft, ResultOverride, ToolHook};
pub use tools::layer;
pub use tools::output::ToolOutput;
pub use tools::spec::ToolSpec;
pub use tools::tool::{Arguments, Tool, ToolContext, ToolResult};
pub use tools::toolbox::{Toolbox, ToolboxError};
pub use tools::typed::{schema_for, tool_fn, ToolFn};
pub use tools::updates::UpdateSink;

pub use headstart_core::{
    DeltaEvent, DeltaStream, Message, Model, ModelError, ModelErrorKind, ModelRequest, StopReason, ToolCall,
    ToolDefinition, UserMessage,
};
pub use headstart_store::{SessionId, SqliteStore, TranscriptStore};
pub use tokio_util::sync::CancellationToken;

/// Engine internals that headstart's own benchmarks drive directly (the `bench-internals` feature, which only
/// `headstart-bench` enables). Not part of the public API: no stability promise, hidden from the docs.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod bench_internals {
    pub use crate::response::scheduler::{Action, Prepared, Scheduler};
}
