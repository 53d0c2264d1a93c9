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
#![warn(missing_docs)]

mod agent;
mod clock;
mod config;
mod engine;
mod event;
mod execute;
mod hooks;
mod model;
mod prepare;
mod response;
mod runner;
pub mod scheduler;
mod tool;
mod toolbox;

pub use headstart_core as core;
pub use headstart_store as store;

pub use agent::Agent;
pub use clock::{Clock, SystemClock, TokioClock};
pub use config::{EngineConfig, ExecutionMode};
pub use engine::{Engine, EngineBuilder, EventStream, TurnIdSource};
pub use event::{AgentEvent, AgentStop, Role, TurnOutcome};
pub use hooks::{Decision, HookError, Hooks, ResultDraft, ResultOverride, ToolHook};
pub use model::{DeltaStream, Model, ModelRequest, ToolDefinition};
pub use response::{CANCELLED_BY_CALLER, MISSING_TERMINAL};
pub use tool::{Arguments, Tool, ToolContext, ToolError, ToolOutput, UpdateSink};
pub use toolbox::{Toolbox, ToolboxError};

pub use headstart_core::{DeltaEvent, Message, ModelError, StopReason, ToolCall, UserMessage};
pub use headstart_store::{SessionId, SqliteStore, TranscriptStore};
pub use tokio_util::sync::CancellationToken;
