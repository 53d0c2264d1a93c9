//! [`ToolLayer`], [`ToolMiddleware`] and [`Around`]: the parts every layer is made of.

use std::sync::Arc;

use async_trait::async_trait;

use crate::tools::spec::ToolSpec;
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
    /// The inner tool's spec, changed where the layer says so ([`ProviderAsyncLayer`](super::ProviderAsyncLayer)).
    spec: ToolSpec,
}

impl<M: ToolMiddleware> Around<M> {
    /// `inner`, executed through `middleware`.
    pub fn new(inner: Arc<dyn Tool>, middleware: M) -> Self {
        let spec = inner.spec().clone();
        Around {
            inner,
            middleware,
            spec,
        }
    }

    /// The same tool, declared provider-async ([`ToolSpec::provider_async`]), and so early too, as
    /// `ToolFn::provider_async` makes it.
    pub(super) fn declared_provider_async(mut self) -> Self {
        self.spec.provider_async = true;
        self.spec.early = true;
        self
    }
}

impl<M> std::fmt::Debug for Around<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Around")
            .field("tool", &self.spec.name)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<M: ToolMiddleware> Tool for Around<M> {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn conflict_key(&self, arguments: &Arguments) -> Option<String> {
        self.inner.conflict_key(arguments)
    }
    fn prepare_arguments(&self, arguments: Arguments) -> Result<Arguments, String> {
        self.inner.prepare_arguments(arguments)
    }
    async fn execute(&self, arguments: Arguments, context: ToolContext) -> ToolResult {
        self.middleware.execute(self.inner.as_ref(), arguments, context).await
    }
}
