//! [`ConcurrencyLimitLayer`]: at most so many bodies at once, per tool or shared.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Semaphore;

use crate::tools::error::ToolError;
use crate::tools::layer::around::{Around, ToolLayer, ToolMiddleware};
use crate::tools::tool::{Arguments, Tool, ToolContext, ToolResult};

/// At most `limit` bodies of each layered tool run at once; further calls wait for a slot (a call waiting here
/// has started for the engine: the wait counts toward its [`ToolSpec::timeout`](crate::ToolSpec::timeout)). Applied with
/// [`Toolbox::layer`](crate::Toolbox::layer), each tool gets its own limit; for one limit shared by several tools,
/// wrap them with [`ConcurrencyLimitLayer::shared`].
#[derive(Debug, Clone, Copy)]
pub struct ConcurrencyLimitLayer {
    limit: usize,
}

impl ConcurrencyLimitLayer {
    /// `limit` bodies per tool (at least one).
    pub fn new(limit: usize) -> Self {
        ConcurrencyLimitLayer { limit: limit.max(1) }
    }

    /// A layer whose every tool takes its slots from one shared pool of `limit` (at least one).
    pub fn shared(limit: usize) -> SharedConcurrencyLimitLayer {
        SharedConcurrencyLimitLayer(Arc::new(Semaphore::new(limit.max(1))))
    }
}

/// One pool of slots for every tool it wraps; see [`ConcurrencyLimitLayer::shared`]. Clones share the pool.
#[derive(Debug, Clone)]
pub struct SharedConcurrencyLimitLayer(Arc<Semaphore>);

impl ToolLayer for SharedConcurrencyLimitLayer {
    fn layer(&self, tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
        Arc::new(Around::new(tool, Limit(Arc::clone(&self.0))))
    }
}

impl ToolLayer for ConcurrencyLimitLayer {
    fn layer(&self, tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
        Arc::new(Around::new(tool, Limit(Arc::new(Semaphore::new(self.limit)))))
    }
}

/// The semaphore behind [`ConcurrencyLimitLayer`].
struct Limit(Arc<Semaphore>);

#[async_trait]
impl ToolMiddleware for Limit {
    async fn execute(&self, next: &dyn Tool, arguments: Arguments, context: ToolContext) -> ToolResult {
        let permit = tokio::select! {
            permit = self.0.acquire() => permit,
            () = context.cancel.cancelled() => {
                return Err(ToolError::new("cancelled while waiting for a concurrency slot"));
            }
        };
        // The semaphore is never closed, so acquiring fails only if that changes; run unlimited rather than fail.
        let _permit = permit.ok();
        next.execute(arguments, context).await
    }
}
