//! Per-call and per-response figures computed from a [`Timeline`]'s times, and their spread over many sessions
//! (issue 29): how early each call was sealed, how much of its run generation hid, and how long each response's
//! tool round took beside what end-of-stream batching would have taken. Pure: no I/O.

use crate::format::format_ms;
use crate::timeline::{CallSpan, Timeline};

/// One admitted call's figures, in milliseconds. Each is `None` when a time it needs is unknown (a call that never
/// started or has not ended, a seal time not recorded, a response whose stream produced nothing).
#[derive(Debug, Clone, PartialEq)]
pub struct CallFigures {
    /// The call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The model request whose response holds the call.
    pub request: u32,
    /// When it was sealed ([`CallSpan::sealed_ms`]).
    pub sealed_ms: Option<f64>,
    /// How long before its response's stream ended it was sealed: stream end − sealed.
    pub headroom_ms: Option<f64>,
    /// From its seal to the start of `execute`: started − sealed.
    pub seal_to_start_ms: Option<f64>,
    /// How long `execute` ran: ended − started.
    pub run_ms: Option<f64>,
    /// The part of its run hidden behind generation: max(0, min(ended, stream end) − started).
    pub overlap_ms: Option<f64>,
}

/// One response's tool round, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResponseFigures {
    /// The request index.
    pub request: u32,
    /// How many calls the response had admitted.
    pub calls: usize,
    /// When its stream ended ([`RequestSavings::stream_end_ms`](crate::RequestSavings::stream_end_ms)).
    pub stream_end_ms: f64,
    /// From the stream end to when every call of the response had its result (0 without calls).
    pub tool_round_ms: f64,
    /// The same with end-of-stream batching ([`Timeline::savings`]).
    pub batching_round_ms: f64,
}

/// A timeline's figures: every call's and every response's.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// Per admitted call, in admission order.
    pub calls: Vec<CallFigures>,
    /// Per response, in request order.
    pub responses: Vec<ResponseFigures>,
}

impl CallFigures {
    /// `sealed +15 ms · headroom 85 ms · seal→start 7 ms · overlap 38 of 38 ms`, as `headstart inspect` and the
    /// session page show a call; `None` when its seal time was not stored.
    pub fn summary(&self) -> Option<String> {
        let sealed = self.sealed_ms?;
        let mut parts = vec![format!("sealed +{} ms", format_ms(sealed))];
        if let Some(headroom) = self.headroom_ms {
            parts.push(format!("headroom {} ms", format_ms(headroom)));
        }
        if let Some(wait) = self.seal_to_start_ms {
            parts.push(format!("seal→start {} ms", format_ms(wait)));
        }
        if let (Some(overlap), Some(run)) = (self.overlap_ms, self.run_ms) {
            parts.push(format!("overlap {} of {} ms", format_ms(overlap), format_ms(run)));
        }
        Some(parts.join(" · "))
    }
}

impl ResponseFigures {
    /// `tool round 30 ms (end-of-stream batching: 38 ms)`; `None` for a response without calls.
    pub fn summary(&self) -> Option<String> {
        (self.calls > 0).then(|| {
            format!(
                "tool round {} ms (end-of-stream batching: {} ms)",
                format_ms(self.tool_round_ms),
                format_ms(self.batching_round_ms)
            )
        })
    }
}

impl Figures {
    /// The summary line of call `id` of request `request` ([`CallFigures::summary`]).
    pub fn call_summary(&self, request: Option<u32>, id: &str) -> Option<String> {
        self.calls
            .iter()
            .find(|call| Some(call.request) == request && call.id == id)?
            .summary()
    }

    /// The summary line of request `request`'s tool round ([`ResponseFigures::summary`]).
    pub fn round_summary(&self, request: u32) -> Option<String> {
        self.responses
            .iter()
            .find(|response| response.request == request)?
            .summary()
    }
}

impl Timeline {
    /// The figures of every call and every response, from the timeline's times.
    pub fn figures(&self) -> Figures {
        let savings = self.savings();
        let stream_end = |request: u32| {
            self.requests
                .iter()
                .find(|span| span.request == request)
                .and_then(|span| span.stream_end_ms)
        };
        let calls = self
            .calls
            .iter()
            .map(|call| call_figures(call, stream_end(call.request)))
            .collect();
        let responses = savings
            .requests
            .iter()
            .map(|request| ResponseFigures {
                request: request.request,
                calls: self.calls_of(request.request).count(),
                stream_end_ms: request.stream_end_ms,
                tool_round_ms: request.actual_settle_ms - request.stream_end_ms,
                batching_round_ms: request.batching_settle_ms - request.stream_end_ms,
            })
            .collect();
        Figures { calls, responses }
    }
}

/// `call`'s figures, its response's stream having ended at `stream_end_ms`.
fn call_figures(call: &CallSpan, stream_end_ms: Option<f64>) -> CallFigures {
    let overlap_ms = match (call.started_ms, call.ended_ms, stream_end_ms) {
        (Some(started), Some(ended), Some(stream_end)) => Some((ended.min(stream_end) - started).max(0.0)),
        _ => None,
    };
    CallFigures {
        id: call.id.clone(),
        name: call.name.clone(),
        request: call.request,
        sealed_ms: call.sealed_ms,
        headroom_ms: stream_end_ms.zip(call.sealed_ms).map(|(end, sealed)| end - sealed),
        seal_to_start_ms: call
            .started_ms
            .zip(call.sealed_ms)
            .map(|(started, sealed)| started - sealed),
        run_ms: call.duration_ms(),
        overlap_ms,
    }
}

/// The `p`-th percentile of `values` by the nearest-rank method: sorted ascending, the value at rank
/// ⌈p/100 × n⌉ (1-based, at least 1), so the result is always one of the values. `p` is clamped to 0–100; `None`
/// for no values. The median is `percentile(values, 50.0)`: of an even count, the lower of the middle two.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    // ⌈p × n / 100⌉ (multiplied first: exact for whole percentiles); p is clamped, so it is within 0..=n.
    let rank = (p.clamp(0.0, 100.0) * n as f64 / 100.0).ceil() as usize;
    sorted.get(rank.clamp(1, n) - 1).copied()
}

/// The spread of one figure over many samples: how many, their median and 95th percentile ([`percentile`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spread {
    /// How many samples.
    pub count: usize,
    /// Their median (`None` without samples).
    pub median_ms: Option<f64>,
    /// Their 95th percentile (`None` without samples).
    pub p95_ms: Option<f64>,
}

impl Spread {
    /// The spread of `values`.
    pub fn of(values: &[f64]) -> Self {
        Spread {
            count: values.len(),
            median_ms: percentile(values, 50.0),
            p95_ms: percentile(values, 95.0),
        }
    }
}

/// The figures of many responses and calls (from one session or many), summarized.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FigureStats {
    /// How many responses.
    pub responses: usize,
    /// How many calls.
    pub calls: usize,
    /// Tool-round time of the responses that had calls.
    pub tool_round: Spread,
    /// What batching would have taken for the same responses.
    pub batching_round: Spread,
    /// Overlap of the calls that ran to an end.
    pub overlap: Spread,
    /// Headroom of the calls with a known seal time.
    pub headroom: Spread,
}

impl FigureStats {
    /// Summarizes `responses` and `calls`. A response without calls counts among the responses but not in the
    /// round times (its round is empty); a call counts in a figure's spread only when that figure is known.
    pub fn of<'a>(
        responses: impl IntoIterator<Item = &'a ResponseFigures>,
        calls: impl IntoIterator<Item = &'a CallFigures>,
    ) -> Self {
        let responses: Vec<&ResponseFigures> = responses.into_iter().collect();
        let calls: Vec<&CallFigures> = calls.into_iter().collect();
        let with_calls = || responses.iter().filter(|response| response.calls > 0);
        let known = |figure: fn(&CallFigures) -> Option<f64>| -> Vec<f64> {
            calls.iter().filter_map(|call| figure(call)).collect()
        };
        FigureStats {
            responses: responses.len(),
            calls: calls.len(),
            tool_round: Spread::of(&with_calls().map(|r| r.tool_round_ms).collect::<Vec<_>>()),
            batching_round: Spread::of(&with_calls().map(|r| r.batching_round_ms).collect::<Vec<_>>()),
            overlap: Spread::of(&known(|call| call.overlap_ms)),
            headroom: Spread::of(&known(|call| call.headroom_ms)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::RequestSpan;

    fn request(request: u32, start_ms: f64, stream_end_ms: f64) -> RequestSpan {
        RequestSpan {
            request,
            start_ms,
            stream_end_ms: Some(stream_end_ms),
            fragments_ms: vec![stream_end_ms],
            stop_reason: Some("tool_use".to_owned()),
        }
    }

    fn call(id: &str, request: u32, sealed: Option<f64>, started: Option<f64>, ended: Option<f64>) -> CallSpan {
        CallSpan {
            id: id.to_owned(),
            name: "lookup".to_owned(),
            request,
            sealed_ms: sealed,
            admitted_ms: sealed.unwrap_or(0.0) + 1.0,
            started_ms: started,
            ended_ms: ended,
            outcome: ended.map(|_| "finished".to_owned()),
            provider_async: None,
        }
    }

    /// Request 0 streams until 100 ms: `early` is sealed at 20, runs 25–60 (all hidden); `long` is sealed at 50,
    /// runs 55–180 (45 ms hidden); `sync` is sealed at 95 and runs 110–130 after the stream. Request 1 streams
    /// 200–300 with no calls.
    fn timeline() -> Timeline {
        Timeline {
            title: "figures".to_owned(),
            requests: vec![request(0, 0.0, 100.0), request(1, 200.0, 300.0)],
            calls: vec![
                call("early", 0, Some(20.0), Some(25.0), Some(60.0)),
                call("long", 0, Some(50.0), Some(55.0), Some(180.0)),
                call("sync", 0, Some(95.0), Some(110.0), Some(130.0)),
            ],
            end_ms: 300.0,
        }
    }

    #[test]
    fn call_figures_follow_from_the_times() {
        let figures = timeline().figures();
        let got: Vec<_> = figures
            .calls
            .iter()
            .map(|c| (c.id.as_str(), c.headroom_ms, c.seal_to_start_ms, c.run_ms, c.overlap_ms))
            .collect();
        assert_eq!(
            got,
            vec![
                ("early", Some(80.0), Some(5.0), Some(35.0), Some(35.0)),
                ("long", Some(50.0), Some(5.0), Some(125.0), Some(45.0)),
                ("sync", Some(5.0), Some(15.0), Some(20.0), Some(0.0)),
            ]
        );
    }

    #[test]
    fn unknown_times_leave_their_figures_unknown() {
        let mut timeline = timeline();
        timeline.calls = vec![
            call("unsealed", 0, None, Some(10.0), Some(40.0)),
            call("never_started", 0, Some(30.0), None, Some(31.0)),
        ];
        let figures = timeline.figures();
        let unsealed = &figures.calls[0];
        assert_eq!(
            (
                unsealed.headroom_ms,
                unsealed.seal_to_start_ms,
                unsealed.run_ms,
                unsealed.overlap_ms
            ),
            (None, None, Some(30.0), Some(30.0))
        );
        let never = &figures.calls[1];
        assert_eq!(
            (
                never.headroom_ms,
                never.seal_to_start_ms,
                never.run_ms,
                never.overlap_ms
            ),
            (Some(70.0), None, None, None)
        );
    }

    #[test]
    fn response_figures_are_the_savings_rounds() {
        let figures = timeline().figures();
        // Actual: every call settled by 180 → 80 ms after the stream end. Batching: early 100–135, long 100–225,
        // sync keeps 130 → 125 ms.
        assert_eq!(
            figures.responses,
            vec![
                ResponseFigures {
                    request: 0,
                    calls: 3,
                    stream_end_ms: 100.0,
                    tool_round_ms: 80.0,
                    batching_round_ms: 125.0,
                },
                ResponseFigures {
                    request: 1,
                    calls: 0,
                    stream_end_ms: 300.0,
                    tool_round_ms: 0.0,
                    batching_round_ms: 0.0,
                },
            ]
        );
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let values = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(percentile(&values, 50.0), Some(3.0));
        assert_eq!(percentile(&values, 95.0), Some(5.0));
        assert_eq!(percentile(&values, 0.0), Some(1.0), "rank at least 1");
        assert_eq!(percentile(&values, 20.0), Some(1.0));
        assert_eq!(percentile(&values, 21.0), Some(2.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), Some(2.0), "the lower middle");
        assert_eq!(percentile(&[7.0], 95.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        let twenty: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&twenty, 95.0), Some(19.0), "⌈0.95 × 20⌉ = 19");
    }

    #[test]
    fn stats_count_rounds_with_calls_and_known_figures_only() {
        let figures = timeline().figures();
        let mut calls = figures.calls.clone();
        calls.push(call_figures(&call("unsealed", 0, None, Some(1.0), None), Some(100.0)));
        let stats = FigureStats::of(&figures.responses, &calls);
        assert_eq!((stats.responses, stats.calls), (2, 4));
        assert_eq!(
            stats.tool_round,
            Spread {
                count: 1,
                median_ms: Some(80.0),
                p95_ms: Some(80.0)
            }
        );
        assert_eq!(stats.batching_round.median_ms, Some(125.0));
        assert_eq!(
            stats.overlap,
            Spread {
                count: 3,
                median_ms: Some(35.0),
                p95_ms: Some(45.0)
            }
        );
        assert_eq!(
            stats.headroom,
            Spread {
                count: 3,
                median_ms: Some(50.0),
                p95_ms: Some(80.0)
            }
        );
        assert_eq!(FigureStats::of(&[], &[]), FigureStats::default());
    }
}
