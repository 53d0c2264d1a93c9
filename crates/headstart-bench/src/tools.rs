//! The benchmarks' tool: sleeps for `{"ms": N}` (or returns at once) and logs when its body ran.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use headstart::{Arguments, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

/// When each call's body began and returned, by call id.
#[derive(Debug, Default)]
pub struct CallLog {
    spans: Mutex<HashMap<String, (Instant, Option<Instant>)>>,
}

impl CallLog {
    /// An empty log.
    pub fn new() -> Arc<Self> {
        Arc::new(CallLog::default())
    }

    fn started(&self, call_id: &str, at: Instant) {
        if let Ok(mut spans) = self.spans.lock() {
            spans.insert(call_id.to_owned(), (at, None));
        }
    }

    fn ended(&self, call_id: &str, at: Instant) {
        if let Ok(mut spans) = self.spans.lock() {
            if let Some(span) = spans.get_mut(call_id) {
                span.1 = Some(at);
            }
        }
    }

    /// When the body of `call_id` began.
    pub fn start_of(&self, call_id: &str) -> Option<Instant> {
        self.spans.lock().ok()?.get(call_id).map(|span| span.0)
    }

    /// When the body of `call_id` returned.
    pub fn end_of(&self, call_id: &str) -> Option<Instant> {
        self.spans.lock().ok()?.get(call_id).and_then(|span| span.1)
    }

    /// How long the body of `call_id` ran, once it returned.
    pub fn body_of(&self, call_id: &str) -> Option<Duration> {
        let spans = self.spans.lock().ok()?;
        let (start, end) = spans.get(call_id)?;
        end.map(|end| end.duration_since(*start))
    }
}

/// A tool for benchmarks: its body sleeps for the `ms` argument (none: returns at once) and, when it has a
/// [`CallLog`], records when it began and returned.
#[derive(Debug, Clone)]
pub struct BenchTool {
    spec: ToolSpec,
    log: Option<Arc<CallLog>>,
}

impl BenchTool {
    /// A tool called `name`, early when `early`, logging into `log` if given.
    pub fn new(name: impl Into<String>, early: bool, log: Option<Arc<CallLog>>) -> Self {
        BenchTool {
            spec: ToolSpec::new(name).early(early),
            log,
        }
    }
}

#[async_trait]
impl Tool for BenchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let started = Instant::now();
        if let Some(log) = &self.log {
            log.started(&context.call_id, started);
        }
        if let Some(ms) = arguments.get("ms").and_then(serde_json::Value::as_u64) {
            if ms > 0 {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
        }
        if let Some(log) = &self.log {
            log.ended(&context.call_id, Instant::now());
        }
        Ok(ToolOutput::text("ok"))
    }
}
