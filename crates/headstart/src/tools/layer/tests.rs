//! The layers' behaviour, timed on tokio's paused clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tracing::Span;

use super::*;
use crate::tools::error::ToolError;
use crate::tools::output::ToolOutput;
use crate::tools::spec::ToolSpec;
use crate::tools::tool::{Arguments, Tool, ToolContext, ToolResult};

/// A tool that fails its first `failures` attempts, each taking `took` (the first `slow_first` attempts take
/// an hour instead), and records how many bodies ran at once.
struct Flaky {
    spec: ToolSpec,
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
            spec: ToolSpec::new("flaky").early(true).idempotent(idempotent),
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
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn execute(&self, _arguments: Arguments, context: ToolContext) -> ToolResult {
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
        retried.spec().early && retried.spec().idempotent && retried.spec().name == "flaky",
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
                seen.push(format!("{} {}", tool.spec().name, context.call_id));
            }
            Span::none()
        }),
    );
    spanned.execute(Arguments::new(), context()).await.expect("runs");
    assert_eq!(*seen.lock().expect("lock"), ["flaky c1"]);
}

#[tokio::test(start_paused = true)]
async fn provider_async_declares_the_tool_and_keeps_the_rest() {
    let tool = Flaky::new(true, 0);
    let declared = layered(&tool, ProviderAsyncLayer);
    assert!(declared.spec().provider_async && declared.spec().early && declared.spec().idempotent);
    assert_eq!(declared.spec().name, "flaky");
    assert!(!Arc::clone(&tool).spec().provider_async);
    let result = declared.execute(Arguments::new(), context()).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(tool.attempts.load(Ordering::SeqCst), 1);

    // The toolbox tells the model, and counts the tool's calls early, whatever the tool's own `early` says.
    let toolbox = crate::Toolbox::new()
        .with(crate::tool_fn("plain", |_: Empty, _ctx: ToolContext| async move {
            Ok("done")
        }))
        .expect("registers");
    let plain = toolbox.get("plain").cloned().expect("plain");
    assert!(ProviderAsyncLayer.layer(Arc::clone(&plain)).spec().early);
    let mut declared_toolbox = crate::Toolbox::new();
    declared_toolbox
        .register_arc(ProviderAsyncLayer.layer(plain))
        .expect("registers");
    assert!(!toolbox.is_early("plain", false));
    assert!(declared_toolbox.is_early("plain", false));
    assert!(declared_toolbox.definitions()[0].provider_async);
    assert!(!toolbox.definitions()[0].provider_async);
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Empty {}
