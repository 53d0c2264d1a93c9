//! Layers around a tool's execution, in tower's spirit: reusable behaviour (a per-attempt timeout, retries for
//! idempotent tools, a concurrency limit, a span) wrapped around a tool without touching the engine.
//!
//! A [`ToolLayer`] turns a tool into another tool, like `tower::Layer` turns a service into a service. The layered
//! tool keeps the inner tool's name, schema and flags (early, idempotent, conflict key, timeout…), so the engine
//! schedules it exactly as before; only `execute` goes through the layer's [`ToolMiddleware`]. Apply a layer to
//! one tool with [`ToolLayer::layer`], or to every registered tool with [`Toolbox::layer`](crate::Toolbox::layer).
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
//! assert!(toolbox.get("search").is_some_and(|tool| tool.idempotent()));
//! # Ok::<(), headstart::ToolboxError>(())
//! ```

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::Semaphore;
use tracing::{Instrument, Span};

use crate::config::ExecutionMode;
use crate::tool::{Arguments, Tool, ToolContext, ToolError, ToolOutput};

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
    async fn execute(
        &self,
        next: &dyn Tool,
        arguments: Arguments,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError>;
}

/// A tool whose execution goes through a [`ToolMiddleware`]; everything else is the inner tool's.
pub struct Around<M> {
    inner: Arc<dyn Tool>,
    middleware: M,
}

impl<M: ToolMiddleware> Around<M> {
    /// `inner`, executed through `middleware`.
    pub fn new(inner: Arc<dyn Tool>, middleware: M) -> Self {
        Around { inner, middleware }
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
    fn is_async(&self) -> bool {
        self.inner.is_async()
    }
    fn execution_mode(&self) -> Option<ExecutionMode> {
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
    async fn execute(&self, arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        self.middleware.execute(self.inner.as_ref(), arguments, context).await
    }
}

/// Ends each attempt that runs longer than a limit with the error `"attempt timed out after <N>ms"`, cancelling
/// the attempt's token. Unlike [`Tool::timeout`], which bounds the whole call and ends it as `timed_out`, this
/// bounds one attempt, so a [`RetryLayer`] outside it can try again.
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
    async fn execute(
        &self,
        next: &dyn Tool,
        arguments: Arguments,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
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

/// Retries a failed call of an idempotent tool ([`Tool::idempotent`]), waiting `backoff`, then twice that, and so
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
    async fn execute(
        &self,
        next: &dyn Tool,
        arguments: Arguments,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        if !next.idempotent() {
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
            tracing::debug!(tool = next.name(), attempt, %error, "retrying an idempotent tool");
            tokio::select! {
                () = tokio::time::sleep(self.wait(attempt)) => {}
                () = context.cancel.cancelled() => return Err(error),
            }
            attempt += 1;
        }
    }
}

/// At most `limit` bodies of each layered tool run at once; further calls wait for a slot (a call waiting here
/// has started for the engine: the wait counts toward its [`Tool::timeout`]). Applied with
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
    async fn execute(
        &self,
        next: &dyn Tool,
        arguments: Arguments,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
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

/// Runs each execution inside a span made by a function of the tool and the call: an application's own span
/// (with its own fields) in addition to the engine's `execute_tool`; inside a [`RetryLayer`], one per attempt.
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
    async fn execute(
        &self,
        next: &dyn Tool,
        arguments: Arguments,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let span = (self.0)(next, &context);
        next.execute(arguments, context).instrument(span).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::time::Instant;

    use super::*;

    /// A tool that fails its first `failures` attempts, each taking `took` (the first `slow_first` attempts take
    /// an hour instead), and records how many bodies ran at once.
    struct Flaky {
        idempotent: bool,
        failures: usize,
        slow_first: usize,
        took: Duration,
        attempts: AtomicUsize,
        running: AtomicUsize,
        most: AtomicUsize,
    }

    impl Flaky {
        fn new(idempotent: bool, failures: usize) -> Arc<Self> {
            Arc::new(Flaky {
                idempotent,
                failures,
                slow_first: 0,
                took: Duration::from_millis(10),
                attempts: AtomicUsize::new(0),
                running: AtomicUsize::new(0),
                most: AtomicUsize::new(0),
            })
        }
    }

    #[async_trait]
    impl Tool for Arc<Flaky> {
        fn name(&self) -> &str {
            "flaky"
        }
        fn is_async(&self) -> bool {
            true
        }
        fn idempotent(&self) -> bool {
            self.idempotent
        }
        async fn execute(&self, _arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
            let attempt = self.attempts.fetch_add(1, Ordering::SeqCst);
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            let took = if attempt < self.slow_first {
                Duration::from_secs(3600)
            } else {
                self.took
            };
            tokio::select! {
                () = tokio::time::sleep(took) => {}
                () = context.cancel.cancelled() => {}
            }
            self.running.fetch_sub(1, Ordering::SeqCst);
            if attempt < self.failures {
                Err(ToolError::new(format!("failure {}", attempt + 1)))
            } else {
                Ok(ToolOutput::text(format!("attempt {}", attempt + 1)))
            }
        }
    }

    fn context() -> ToolContext {
        ToolContext::detached("c1")
    }

    fn layered(tool: &Arc<Flaky>, layer: impl ToolLayer) -> Arc<dyn Tool> {
        layer.layer(Arc::new(Arc::clone(tool)))
    }

    #[tokio::test(start_paused = true)]
    async fn retry_backs_off_exponentially_for_idempotent_tools() {
        let tool = Flaky::new(true, 2);
        let retried = layered(
            &tool,
            RetryLayer::new(5).backoff(Duration::from_millis(100), Duration::from_secs(1)),
        );
        let started = Instant::now();
        let output = retried
            .execute(Arguments::new(), context())
            .await
            .expect("the third attempt works");
        assert_eq!(output, ToolOutput::text("attempt 3"));
        // Three 10 ms attempts, with 100 ms then 200 ms of backoff between them.
        assert_eq!(started.elapsed(), Duration::from_millis(330));
        assert!(
            retried.is_async() && retried.idempotent() && retried.name() == "flaky",
            "flags pass through"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retry_gives_up_after_its_attempts_and_never_repeats_a_side_effect() {
        let tool = Flaky::new(true, 10);
        let error = layered(&tool, RetryLayer::new(3))
            .execute(Arguments::new(), context())
            .await
            .expect_err("every attempt fails");
        assert_eq!(
            (error.message.as_str(), tool.attempts.load(Ordering::SeqCst)),
            ("failure 3", 3)
        );
        let once = Flaky::new(false, 1);
        let error = layered(&once, RetryLayer::new(3))
            .execute(Arguments::new(), context())
            .await
            .expect_err("not idempotent: not retried");
        assert_eq!(
            (error.message.as_str(), once.attempts.load(Ordering::SeqCst)),
            ("failure 1", 1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_call_is_not_retried() {
        let tool = Flaky::new(true, 10);
        let retried = layered(
            &tool,
            RetryLayer::new(5).backoff(Duration::from_secs(1), Duration::from_secs(1)),
        );
        let context = context();
        let cancel = context.cancel.clone();
        let started = Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            cancel.cancel();
        });
        let error = retried.execute(Arguments::new(), context).await.expect_err("cancelled");
        assert_eq!(error.message, "failure 1");
        assert_eq!(
            started.elapsed(),
            Duration::from_millis(500),
            "the backoff ends with the cancellation"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_inside_a_retry_bounds_each_attempt() {
        let slow_once = || {
            Arc::new(Flaky {
                slow_first: 1,
                ..Arc::into_inner(Flaky::new(true, 0)).expect("one owner")
            })
        };
        let tool = slow_once();
        let once = layered(&tool, TimeoutLayer::new(Duration::from_millis(50)));
        let call = context();
        let error = once
            .execute(Arguments::new(), call.clone())
            .await
            .expect_err("the first attempt hangs");
        assert_eq!(error.message, "attempt timed out after 50ms");
        assert!(
            !call.cancel.is_cancelled(),
            "only the attempt's token is cancelled, not the call's"
        );
        let tool = slow_once();
        let both =
            RetryLayer::new(2).layer(TimeoutLayer::new(Duration::from_millis(50)).layer(Arc::new(Arc::clone(&tool))));
        let started = Instant::now();
        let output = both
            .execute(Arguments::new(), context())
            .await
            .expect("the retry is fast");
        assert_eq!(output, ToolOutput::text("attempt 2"));
        // A 50 ms attempt cut short, 100 ms of backoff, a 10 ms attempt.
        assert_eq!(started.elapsed(), Duration::from_millis(160));
    }

    #[tokio::test(start_paused = true)]
    async fn the_concurrency_limit_is_per_tool_unless_shared() {
        let run_three = |tool: Arc<dyn Tool>| async move {
            let calls = (0..3).map(|_| tool.execute(Arguments::new(), context()));
            futures::future::join_all(calls).await
        };
        let tool = Flaky::new(false, 0);
        let started = Instant::now();
        let limited = layered(&tool, ConcurrencyLimitLayer::new(1));
        assert!(run_three(limited).await.iter().all(Result::is_ok));
        assert_eq!(
            (tool.most.load(Ordering::SeqCst), started.elapsed()),
            (1, Duration::from_millis(30))
        );

        // One layer value applied to two tools: each gets its own limit, so they overlap.
        let (a, b) = (Flaky::new(false, 0), Flaky::new(false, 0));
        let layer = ConcurrencyLimitLayer::new(1);
        let started = Instant::now();
        futures::future::join(run_three(layered(&a, layer)), run_three(layered(&b, layer))).await;
        assert_eq!(started.elapsed(), Duration::from_millis(30));
        // A shared pool: the six bodies take turns.
        let shared = ConcurrencyLimitLayer::shared(1);
        let started = Instant::now();
        futures::future::join(run_three(layered(&a, shared.clone())), run_three(layered(&b, shared))).await;
        assert_eq!(started.elapsed(), Duration::from_millis(60));
    }

    #[tokio::test(start_paused = true)]
    async fn a_span_layer_runs_the_body_in_its_span() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        let tool = Flaky::new(false, 0);
        let spanned = layered(
            &tool,
            SpanLayer::new(move |tool: &dyn Tool, context: &ToolContext| {
                if let Ok(mut seen) = record.lock() {
                    seen.push(format!("{} {}", tool.name(), context.call_id));
                }
                Span::none()
            }),
        );
        spanned.execute(Arguments::new(), context()).await.expect("runs");
        assert_eq!(*seen.lock().expect("lock"), ["flaky c1"]);
    }
}
