//! [`TimeoutLayer`]: a limit on each attempt.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::tools::error::ToolError;
use crate::tools::layer::around::{Around, ToolLayer, ToolMiddleware};
use crate::tools::tool::{Arguments, Tool, ToolContext, ToolResult};

/// Ends each attempt that runs longer than a limit with the error `"attempt timed out after <N>ms"`, cancelling
/// the attempt's token. Unlike [`ToolSpec::timeout`](crate::ToolSpec::timeout), which bounds the whole call and ends it as `timed_out`, this
/// bounds one attempt, so a [`RetryLayer`](crate::layer::RetryLayer) outside it can try again.
#[derive(Debug, Clone, Copy)]
pub struct TimeoutLayer {
    limit: Duration,
}

impl TimeoutLayer {
    /// Attempts end after `limit`.
    pub fn new(limit: Duration) -> Self {
        TimeoutLayer { limit }
    }
}

impl ToolLayer for TimeoutLayer {
    fn layer(&self, tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
        Arc::new(Around::new(tool, *self))
    }
}

#[async_trait]
impl ToolMiddleware for TimeoutLayer {
    async fn execute(&self, next: &dyn Tool, arguments: Arguments, context: ToolContext) -> ToolResult {
        // The attempt gets a token of its own: cancelling it on timeout tells the body to stop, without marking the
        // call itself cancelled.
        let attempt = context.cancel.child_token();
        let context = ToolContext {
            cancel: attempt.clone(),
            ..context
        };
        match tokio::time::timeout(self.limit, next.execute(arguments, context)).await {
            Ok(returned) => returned,
            Err(_) => {
                attempt.cancel();
                Err(ToolError::new(format!(
                    "attempt timed out after {}ms",
                    self.limit.as_millis()
                )))
            }
        }
    }
}
