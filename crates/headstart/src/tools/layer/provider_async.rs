//! [`ProviderAsyncLayer`]: declares a tool provider-async without touching it.

use std::sync::Arc;

use async_trait::async_trait;

use super::around::{Around, ToolLayer, ToolMiddleware};
use crate::tools::tool::{Arguments, Tool, ToolContext, ToolResult};

/// Declares the tools it wraps provider-async ([`ToolSpec::provider_async`](crate::ToolSpec::provider_async)): the provider is told the model need not
/// wait for their results, and their calls start at their seal (early). For a tool you did not write (a built-in,
/// an MCP server's); a tool of your own can answer `provider_async` itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProviderAsyncLayer;

impl ToolLayer for ProviderAsyncLayer {
    fn layer(&self, tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
        Arc::new(Around::new(tool, Unchanged).declared_provider_async())
    }
}

/// Runs the body as it is.
struct Unchanged;

#[async_trait]
impl ToolMiddleware for Unchanged {
    async fn execute(&self, next: &dyn Tool, arguments: Arguments, context: ToolContext) -> ToolResult {
        next.execute(arguments, context).await
    }
}
