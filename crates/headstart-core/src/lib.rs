//! # headstart-core
//!
//! The pure layer of headstart: the conversation model ([`model`]), the normalized delta events a model stream
//! produces ([`delta`], contract §2), the [`accumulator`] that rebuilds an assistant message from them and rejects every
//! protocol violation with a typed error, delta-log reading and writing ([`delta_log`]), and the canonical model view
//! of a stored transcript ([`context`], contract §7.3), and the model API a provider adapter implements
//! ([`model_api`]: the [`Model`] trait, its [`ModelRequest`] and the [`DeltaStream`] it returns), with the typed
//! [`ModelError`] a model stream fails with ([`model_error`]).
//!
//! Nothing here performs I/O except reading and writing delta logs through caller-supplied readers and writers, so
//! every rule can be tested exhaustively.
//!
//! Hostile input is bounded: one response holds at most 16 MiB per block and 64 MiB in all, in at most 100,000
//! blocks (the [`accumulator`]'s limits, enforced as protocol violations); valid tool-call arguments nest at most
//! [`model::MAX_ARGUMENT_DEPTH`] levels; a delta-log line is at most [`delta_log::MAX_LINE_BYTES`].
#![warn(missing_docs)]

pub mod accumulator;
pub mod context;
pub mod delta;
pub mod delta_log;
pub mod model;
pub mod model_api;
pub mod model_error;

pub use accumulator::{Accumulator, AccumulatorError, Applied, Violation};
pub use context::ModelContext;
pub use delta::{DeltaEvent, DoneReason, ErrorReason};
pub use model::{
    AssistantMessage, ContentBlock, Message, StopReason, ToolArguments, ToolCall, ToolResultMessage, Usage, UserMessage,
};
pub use model_api::{DeltaStream, Model, ModelRequest, ToolDefinition};
pub use model_error::{ModelError, ModelErrorKind};
