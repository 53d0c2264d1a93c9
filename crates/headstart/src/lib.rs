//! # headstart
//!
//! Streaming early execution for LLM agents. headstart wraps a model's delta stream; the moment a call to an
//! **async** tool is sealed (`toolcall_end`), it commits the transcript prefix — everything the model said up to
//! and including that call — durably, and only then starts the tool, while the model keeps generating. Calls to
//! other tools wait for the end of the stream and run as one batch. Every executed call has a durable owner in
//! the transcript, so a crash never leaves a side effect nobody can account for.
//!
//! The pieces:
//! - [`Tool`] and [`Toolbox`]: what the model can call; [`ToolHook`]/[`Hooks`]: behaviour around calls;
//! - [`Engine`]: store + tools + hooks + config; [`Engine::wrap`] turns one model stream into agent events;
//! - [`Agent`]: the multi-request loop over a [`Model`];
//! - [`AgentEvent`]: the single ordered event stream a consumer observes;
//! - re-exported layers: [`core`] (model types, delta events, accumulator) and [`store`] (transcript store).
//!
//! ## Wrapping your model stream
//!
//! ```
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use headstart::core::{DoneReason, Usage};
//! use headstart::{AgentEvent, Arguments, CancellationToken, DeltaEvent, Engine, SqliteStore, Tool, ToolContext,
//!                 ToolError, ToolOutput, Toolbox, TranscriptStore};
//!
//! struct Lookup;
//!
//! #[async_trait::async_trait]
//! impl Tool for Lookup {
//!     fn name(&self) -> &str { "lookup" }
//!     fn is_async(&self) -> bool { true } // may start as soon as the call is sealed
//!     async fn execute(&self, args: Arguments, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
//!         Ok(ToolOutput::text(format!("found {}", args["q"])))
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! let store = Arc::new(SqliteStore::open_in_memory()?);
//! let engine = Engine::builder(store.clone()).toolbox(Toolbox::new().with(Lookup)?).build();
//! let session = store.create_session(0).await?;
//!
//! // Your provider adapter's output: any Stream<Item = Result<DeltaEvent, ModelError>>.
//! let deltas = futures::stream::iter([
//!     DeltaEvent::Start { model: None, response_id: None },
//!     DeltaEvent::ToolcallStart { index: 0, id: "c1".into(), name: "lookup".into(), is_async: false },
//!     DeltaEvent::ToolcallDelta { index: 0, delta: r#"{"q": "tokio"}"#.into() },
//!     DeltaEvent::ToolcallEnd { index: 0, arguments: None },
//!     DeltaEvent::Done { stop_reason: DoneReason::ToolUse, usage: Usage::default() },
//! ].map(Ok));
//!
//! let mut events = engine.wrap(&session, 0, deltas, CancellationToken::new());
//! let mut order = Vec::new();
//! while let Some(event) = events.next().await {
//!     order.push(event.type_name());
//! }
//! // The prefix holding c1 was durable before c1 started (SPEC §3.3).
//! let commit = order.iter().position(|e| *e == "message_end").unwrap();
//! let start = order.iter().position(|e| *e == "tool_execution_start").unwrap();
//! assert!(commit < start);
//! assert_eq!(order.last(), Some(&"turn_end"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```
//!
//! For the whole multi-request loop, implement [`Model`] and use [`Agent::run`].
#![warn(missing_docs)]

mod admission;
mod agent;
mod clock;
mod config;
mod engine;
mod event;
mod execute;
mod hooks;
mod lease_guard;
mod panic;
mod prepare;
mod queue;
mod recovery;
mod response;
mod runner;
pub mod scheduler;
mod shared;
mod tool;
mod toolbox;
mod updates;

pub use headstart_core as core;
pub use headstart_store as store;

pub use agent::Agent;
pub use clock::{Clock, SystemClock, TokioClock};
pub use config::{EngineConfig, ExecutionMode};
pub use engine::{Engine, EngineBuilder, TurnIdSource};
pub use event::{AgentEvent, AgentStop, Role, TurnOutcome};
pub use hooks::{Decision, HookError, Hooks, ResultDraft, ResultOverride, ToolHook};
pub use lease_guard::{LeaseGuard, LEASE_MAY_HAVE_EXPIRED};
pub use queue::{Emitted, EventStream};
pub use recovery::{
    expects_answer, recover_all, recover_session, RecoveredCall, RecoveryAction, RecoveryPolicy, Resumed, INTERRUPTED,
};
pub use response::{CANCELLED_BY_CALLER, MISSING_TERMINAL};
pub use tool::{Arguments, Tool, ToolContext, ToolError, ToolOutput};
pub use toolbox::{Toolbox, ToolboxError};
pub use updates::UpdateSink;

pub use headstart_core::{
    DeltaEvent, DeltaStream, Message, Model, ModelError, ModelRequest, StopReason, ToolCall, ToolDefinition,
    UserMessage,
};
pub use headstart_store::{SessionId, SqliteStore, TranscriptStore};
pub use tokio_util::sync::CancellationToken;
