//! The run compared with end-of-stream batching, computed from the same data: where batching would have run each
//! early call, and when each request, and the run, would have settled.

use crate::timeline::{CallSpan, Timeline};

/// One request compared with end-of-stream batching.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestSavings {
    /// The request index.
    pub request: u32,
    /// When its stream ended (its start when it produced nothing).
    pub stream_end_ms: f64,
    /// When the stream had ended and every call of the request had its result.
    pub actual_settle_ms: f64,
    /// When it would have settled with end-of-stream batching ([`Timeline::batching_run`]).
    pub batching_settle_ms: f64,
}

impl RequestSavings {
    /// Time early execution saved on this request (never negative).
    pub fn saved_ms(&self) -> f64 {
        (self.batching_settle_ms - self.actual_settle_ms).max(0.0)
    }
}

/// The whole run compared with end-of-stream batching.
#[derive(Debug, Clone, PartialEq)]
pub struct Savings {
    /// Per request, in order.
    pub requests: Vec<RequestSavings>,
    /// When the run actually ended.
    pub actual_end_ms: f64,
    /// When it would have ended with batching: every request's delay pushes the later requests back.
    pub batching_end_ms: f64,
}

impl Savings {
    /// Time saved over the whole run.
    pub fn saved_ms(&self) -> f64 {
        (self.batching_end_ms - self.actual_end_ms).max(0.0)
    }

    /// The saving as a share of the batching time, in percent.
    pub fn saved_percent(&self) -> f64 {
        if self.batching_end_ms > 0.0 {
            100.0 * self.saved_ms() / self.batching_end_ms
        } else {
            0.0
        }
    }
}

impl Timeline {
    /// Where end-of-stream batching would have run `call` (start, end), when that differs from what happened: a
    /// call that started before its response's stream ended would have started at the stream end instead, with
    /// its measured duration.
    ///
    /// Calls keep their times (`None`) when they started at or after the stream end (sync calls, queued calls),
    /// never executed, were cut short by cancellation (their measured duration is not theirs), or belong to a
    /// response that ended in `error`/`aborted` (batching would not have run them at all).
    pub fn batching_run(&self, call: &CallSpan) -> Option<(f64, f64)> {
        let request = self.requests.iter().find(|request| request.request == call.request)?;
        if matches!(request.stop_reason.as_deref(), Some("error" | "aborted")) {
            return None;
        }
        if call.outcome.as_deref() == Some("cancelled") {
            return None;
        }
        let stream_end = request.stream_end_ms?;
        let (start, duration) = (call.started_ms?, call.duration_ms()?);
        (start < stream_end).then_some((stream_end, stream_end + duration))
    }

    /// Compares the run with end-of-stream batching computed from the same data.
    ///
    /// Per request, batching would start every early call at the stream end instead ([`Timeline::batching_run`]);
    /// every other call keeps its end, no earlier than the stream end. The request's settle time is the latest of
    /// the stream end and its calls' ends. Each request's delay pushes every later request back, so the batching
    /// run ends the sum of the per-request savings after the actual one.
    pub fn savings(&self) -> Savings {
        let requests: Vec<RequestSavings> = self
            .requests
            .iter()
            .map(|request| {
                let stream_end = request.stream_end_ms.unwrap_or(request.start_ms);
                let mut actual = stream_end;
                let mut batching = stream_end;
                for call in self.calls_of(request.request) {
                    let actual_end = call.ended_ms.or(call.started_ms).unwrap_or(call.admitted_ms);
                    actual = actual.max(actual_end);
                    let batching_end = match self.batching_run(call) {
                        Some((_, end)) => end,
                        None => actual_end.max(stream_end),
                    };
                    batching = batching.max(batching_end);
                }
                RequestSavings {
                    request: request.request,
                    stream_end_ms: stream_end,
                    actual_settle_ms: actual,
                    batching_settle_ms: batching.max(actual),
                }
            })
            .collect();
        let actual_end_ms = self.last_ms();
        let saved: f64 = requests.iter().map(RequestSavings::saved_ms).sum();
        Savings {
            requests,
            actual_end_ms,
            batching_end_ms: actual_end_ms + saved,
        }
    }
}
