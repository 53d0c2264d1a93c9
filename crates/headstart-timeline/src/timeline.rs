//! The timeline's data model: model requests and tool calls on one time axis. Built from a stored session or a
//! report (`build`), compared with end-of-stream batching (`savings`).

/// Everything the picture shows. Times are milliseconds since the first request began.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// What the picture is of (a session id or a scenario name).
    pub title: String,
    /// Model requests, in order.
    pub requests: Vec<RequestSpan>,
    /// Admitted tool calls, in admission order.
    pub calls: Vec<CallSpan>,
    /// When the run ended (the last thing that happened).
    pub end_ms: f64,
}

/// One model request: its stream and the fragments it committed.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpan {
    /// 0-based request index.
    pub request: u32,
    /// When the request began.
    pub start_ms: f64,
    /// When the stream ended (its last fragment was committed), if it produced any.
    pub stream_end_ms: Option<f64>,
    /// When each fragment became durable, in commit order.
    pub fragments_ms: Vec<f64>,
    /// The response's stop reason (`tool_use`, `stop`, …), if known.
    pub stop_reason: Option<String>,
}

/// One admitted tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSpan {
    /// The call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The model request whose response holds the call.
    pub request: u32,
    /// When it was sealed (its arguments could no longer change), if known: stored sessions record it (contract
    /// §7.2); reports and runs stored before it was recorded do not.
    pub sealed_ms: Option<f64>,
    /// When it was admitted (committed with its fragment).
    pub admitted_ms: f64,
    /// When `execute` began, if it did.
    pub started_ms: Option<f64>,
    /// When its result was written, if it was (also for calls that never started).
    pub ended_ms: Option<f64>,
    /// How it ended, in the report's vocabulary (`finished`, `error`, …); `None` while unfinished.
    pub outcome: Option<String>,
    /// For a provider-async call (contract §3.7.5), when its result reached the model: `None` for every other call.
    pub provider_async: Option<Delivery>,
}

/// Where a provider-async call's result stands (contract §3.7.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// No result yet, or no request after it.
    Pending,
    /// The request that carried the result.
    In(u32),
}

impl CallSpan {
    /// `true` when `execute` began.
    pub fn executed(&self) -> bool {
        self.started_ms.is_some()
    }

    /// How long `execute` ran, for calls that started and ended.
    pub fn duration_ms(&self) -> Option<f64> {
        match (self.started_ms, self.ended_ms) {
            (Some(start), Some(end)) => Some((end - start).max(0.0)),
            _ => None,
        }
    }
}

impl Timeline {
    /// The calls of request `request`, in admission order.
    pub fn calls_of(&self, request: u32) -> impl Iterator<Item = &CallSpan> {
        self.calls.iter().filter(move |call| call.request == request)
    }

    /// The latest time anything in the timeline happened (at least `end_ms`).
    pub fn last_ms(&self) -> f64 {
        let requests = self
            .requests
            .iter()
            .flat_map(|request| std::iter::once(request.start_ms).chain(request.stream_end_ms));
        let calls = self.calls.iter().flat_map(CallSpan::times);
        requests.chain(calls).fold(self.end_ms, f64::max)
    }
}

impl CallSpan {
    /// Every time the call has: admitted, started, ended.
    pub(crate) fn times(&self) -> impl Iterator<Item = f64> {
        std::iter::once(self.admitted_ms)
            .chain(self.started_ms)
            .chain(self.ended_ms)
    }
}
