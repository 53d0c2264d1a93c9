//! What users implement and compose: the [`Tool`](crate::Tool) trait and typed tools ([`tool_fn`](crate::tool_fn)),
//! the [`Toolbox`](crate::Toolbox) that holds them, [hooks](crate::ToolHook) around their calls, [layers](crate::layer)
//! around their bodies, and the board their partial updates go through.
//!
//! Nothing here knows about responses: the engine's per-response machinery (`response/`) uses these types, never the
//! other way round.

pub(crate) mod error;
pub(crate) mod hooks;
pub mod layer;
pub(crate) mod output;
pub(crate) mod tool;
pub(crate) mod toolbox;
pub(crate) mod typed;
pub(crate) mod updates;
