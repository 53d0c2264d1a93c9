//! What users implement and compose: the [`Tool`](crate::Tool) trait and typed tools ([`tool_fn`](crate::tool_fn)),
//! the [`Toolbox`](crate::Toolbox) that holds them, [hooks](crate::ToolHook) around their calls, [layers](crate::layer)
//! around their bodies, and the board their partial updates go through.
//!
//! ## Errors: which to use when
//!
//! One error type per role:
//!
//! - [`ToolFailure`](crate::ToolFailure): what a **typed** tool's body returns ([`tool_fn`](crate::tool_fn)). Any
//!   `std::error::Error` converts into it, so `?` works on `io::Error`, `serde_json::Error`, `reqwest::Error`…;
//!   [`ToolFailure::msg`](crate::ToolFailure::msg) makes one from a message. Its text (the error, then each source)
//!   becomes the call's error result.
//! - [`ToolError`](crate::ToolError): a call failed, on the object-safe side of the tool path. What
//!   [`Tool::execute`](crate::Tool::execute), a [`ToolMiddleware`](crate::layer::ToolMiddleware) and a
//!   [`ToolHook`](crate::ToolHook) return; its message is the error result the model reads. It converts from a
//!   `String`, a `&str` and a `ToolFailure`. (Hooks once had a look-alike `HookError`; it is now an alias.)
//! - [`ToolboxError`](crate::ToolboxError): a tool could not be registered (its schema does not compile, or its name
//!   is taken). It is not a call's failure: it happens before any call, when the toolbox is built.
//!
//! A call's *outcome* (finished, error, timed out, blocked, …) is not an error type: the engine records it with the
//! result (`RunOutcome`, contract §5).
//!
//! Nothing here knows about responses: the engine's per-response machinery (`response/`) uses these types, never the
//! other way round.

pub(crate) mod error;
pub(crate) mod hooks;
pub mod layer;
pub(crate) mod output;
pub(crate) mod spec;
pub(crate) mod tool;
pub(crate) mod toolbox;
pub(crate) mod typed;
pub(crate) mod updates;
