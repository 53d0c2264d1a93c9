//! Layers around a tool's execution, in tower's spirit: reusable behaviour (a per-attempt timeout, retries for
//! idempotent tools, a concurrency limit, a span) wrapped around a tool without touching the engine.
//!
//! A [`ToolLayer`] turns a tool into another tool, like `tower::Layer` turns a service into a service. The layered
//! tool keeps the inner tool's name, schema and flags (early, idempotent, conflict key, timeout…), so the engine
//! schedules it exactly as before; only `execute` goes through the layer's [`ToolMiddleware`]. Apply a layer to
//! one tool with [`ToolLayer::layer`], or to every tool of a toolbox, registered before or after, with
//! [`Toolbox::layer`](crate::Toolbox::layer).
//! Layers applied later wrap the earlier ones: `toolbox.layer(timeout).layer(retry)` retries timed-out attempts.
//!
//! `before`/`after` [hooks](crate::ToolHook) stay where decisions are made (block a call, override a result); a
//! layer only changes how a body runs. None of these is a `tower::Layer`: see docs/decisions.md.
//!
//! ```
//! use std::time::Duration;
//! use headstart::layer::{ConcurrencyLimitLayer, RetryLayer, TimeoutLayer};
//! use headstart::{tool_fn, ToolContext, Toolbox};
//!
//! #[derive(serde::Deserialize, headstart::schemars::JsonSchema)]
//! struct Query { q: String }
//!
//! let search = tool_fn("search", |args: Query, _ctx: ToolContext| async move { Ok(args.q) }).idempotent();
//! let toolbox = Toolbox::new()
//!     .with(search)?
//!     .layer(TimeoutLayer::new(Duration::from_secs(2)))   // each attempt
//!     .layer(RetryLayer::new(3))                         // up to 3 attempts, idempotent tools only
//!     .layer(ConcurrencyLimitLayer::new(4));             // at most 4 bodies of each tool at once
//! assert!(toolbox.get("search").is_some_and(|tool| tool.spec().idempotent));
//! # Ok::<(), headstart::ToolboxError>(())
//! ```

mod around;
mod limit;
mod provider_async;
mod retry;
mod span;
#[cfg(test)]
mod tests;
mod timeout;

pub use around::{Around, ToolLayer, ToolMiddleware};
pub use limit::{ConcurrencyLimitLayer, SharedConcurrencyLimitLayer};
pub use provider_async::ProviderAsyncLayer;
pub use retry::RetryLayer;
pub use span::SpanLayer;
pub use timeout::TimeoutLayer;
