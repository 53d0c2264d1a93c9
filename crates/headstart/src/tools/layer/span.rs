//! [`SpanLayer`]: each execution inside a span of the application's making.

use std::sync::Arc;

use async_trait::async_trait;
use tracing::{Instrument, Span};

use crate::tools::layer::around::{Around, ToolLayer, ToolMiddleware};
use crate::tools::tool::{Arguments, Tool, ToolContext, ToolResult};

/// Runs each execution inside a span made by a function of the tool and the call: an application's own span
/// (with its own fields) in addition to the engine's `execute_tool`; inside a [`RetryLayer`](crate::layer::RetryLayer), one per attempt.
pub struct SpanLayer<F> {
    make: Arc<F>,
}

impl<F> SpanLayer<F>
where
    F: Fn(&dyn Tool, &ToolContext) -> Span + Send + Sync + 'static,
{
    /// Spans made by `make`.
    pub fn new(make: F) -> Self {
        SpanLayer { make: Arc::new(make) }
    }
}

impl<F> std::fmt::Debug for SpanLayer<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanLayer").finish_non_exhaustive()
    }
}

impl<F> ToolLayer for SpanLayer<F>
where
    F: Fn(&dyn Tool, &ToolContext) -> Span + Send + Sync + 'static,
{
    fn layer(&self, tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
        Arc::new(Around::new(tool, InSpan(Arc::clone(&self.make))))
    }
}

/// The middleware behind [`SpanLayer`].
struct InSpan<F>(Arc<F>);

#[async_trait]
impl<F> ToolMiddleware for InSpan<F>
where
    F: Fn(&dyn Tool, &ToolContext) -> Span + Send + Sync + 'static,
{
    async fn execute(&self, next: &dyn Tool, arguments: Arguments, context: ToolContext) -> ToolResult {
        let span = (self.0)(next, &context);
        next.execute(arguments, context).instrument(span).await
    }
}
