//! [`RetryLayer`]: retries for idempotent tools, with exponential backoff.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::tools::layer::around::{Around, ToolLayer, ToolMiddleware};
use crate::tools::tool::{Arguments, Tool, ToolContext, ToolResult};

/// Retries a failed call of an idempotent tool ([`ToolSpec::idempotent`](crate::ToolSpec::idempotent)), waiting `backoff`, then twice that, and so
/// on (capped by `max_backoff`). A tool that is not idempotent runs once: running a side effect twice is not a
/// decision a layer may take. A call whose token is cancelled is not retried.
#[derive(Debug, Clone, Copy)]
pub struct RetryLayer {
    attempts: u32,
    backoff: Duration,
    max_backoff: Duration,
}

impl RetryLayer {
    /// At most `attempts` attempts (at least one), 100 ms apart at first, doubling up to 10 s.
    pub fn new(attempts: u32) -> Self {
        RetryLayer {
            attempts: attempts.max(1),
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
        }
    }

    /// The wait before the second attempt, and the cap on later ones.
    pub fn backoff(mut self, first: Duration, max: Duration) -> Self {
        self.backoff = first;
        self.max_backoff = max.max(first);
        self
    }

    /// The wait after failed attempt `attempt` (1-based).
    fn wait(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.saturating_sub(1)).unwrap_or(u32::MAX);
        self.backoff.saturating_mul(factor).min(self.max_backoff)
    }
}

impl ToolLayer for RetryLayer {
    fn layer(&self, tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
        Arc::new(Around::new(tool, *self))
    }
}

#[async_trait]
impl ToolMiddleware for RetryLayer {
    async fn execute(&self, next: &dyn Tool, arguments: Arguments, context: ToolContext) -> ToolResult {
        if !next.spec().idempotent {
            return next.execute(arguments, context).await;
        }
        let mut attempt = 1;
        loop {
            let error = match next.execute(arguments.clone(), context.clone()).await {
                Ok(output) => return Ok(output),
                Err(error) => error,
            };
            if attempt >= self.attempts || context.cancel.is_cancelled() {
                return Err(error);
            }
            tracing::debug!(tool = %next.spec().name, attempt, %error, "retrying an idempotent tool");
            tokio::select! {
                () = tokio::time::sleep(self.wait(attempt)) => {}
                () = context.cancel.cancelled() => return Err(error),
            }
            attempt += 1;
        }
    }
}
