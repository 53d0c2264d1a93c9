//! [`ToolLayer`], [`ToolMiddleware`] and [`Around`]: the parts every layer is made of.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::config::ExecutionMode;
use crate::tools::tool::{Arguments, Tool, ToolContext, ToolResult};

/// Turns a tool into a tool with added behaviour (tower's `Layer`, for tools).
pub trait ToolLayer {
    /// The layered tool.
    fn layer(&self, tool: Arc<dyn Tool>) -> Arc<dyn Tool>;
}

impl<F> ToolLayer for F
where
    F: Fn(Arc<dyn Tool>) -> Arc<dyn Tool>,
{
    fn layer(&self, tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
        self(tool)
    }
}

/// What a layer does around one execution; `next` is the tool it wraps (call `next.execute` to run it).
#[async_trait]
pub trait ToolMiddleware: Send + Sync + 'static {
    /// Runs the call through `next`.
    async fn execute(&self, next: &dyn Tool, arguments: Arguments, context: ToolContext) -> ToolResult;
}

/// A tool whose execution goes through a [`ToolMiddleware`]; everything else is the inner tool's.
pub struct Around<M> {
    inner: Arc<dyn Tool>,
    middleware: M,
    /// Declared provider-async here, whatever the inner tool says ([`ProviderAsyncLayer`](super::ProviderAsyncLayer)).
    provider_async: bool,
}

impl<M: ToolMiddleware> Around<M> {
    /// `inner`, executed through `middleware`.
    pub fn new(inner: Arc<dyn Tool>, middleware: M) -> Self {
        Around {
            inner,
            middleware,
            provider_async: false,
        }
    }

    /// The same tool, declared provider-async ([`Tool::provider_async`]).
    pub(super) fn declared_provider_async(mut self) -> Self {
        self.provider_async = true;
        self
    }
}

impl<M> std::fmt::Debug for Around<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Around")
            .field("tool", &self.inner.name())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<M: ToolMiddleware> Tool for Around<M> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn parameters(&self) -> Value {
        self.inner.parameters()
    }
    // A tool declared provider-async here is early too, as `ToolFn::provider_async` makes it.
    fn early(&self) -> bool {
        self.provider_async || self.inner.early()
    }
    fn provider_async(&self) -> bool {
        self.provider_async || self.inner.provider_async()
    }
    // Callers of the deprecated name get the same answer until it goes.
    fn is_async(&self) -> bool {
        self.early()
    }
    fn execution_mode(&self) -> ExecutionMode {
        self.inner.execution_mode()
    }
    fn conflict_key(&self, arguments: &Arguments) -> Option<String> {
        self.inner.conflict_key(arguments)
    }
    fn timeout(&self) -> Option<Duration> {
        self.inner.timeout()
    }
    fn prepare_arguments(&self, arguments: Arguments) -> Result<Arguments, String> {
        self.inner.prepare_arguments(arguments)
    }
    fn idempotent(&self) -> bool {
        self.inner.idempotent()
    }
    async fn execute(&self, arguments: Arguments, context: ToolContext) -> ToolResult {
        self.middleware.execute(self.inner.as_ref(), arguments, context).await
    }
}
