//! Building a [`Timeline`] from what a store holds for a session, or from a replay report. Pure: no I/O, no clock.

use std::collections::HashMap;

use headstart::store::{StoredMessage, ToolRun};
use headstart::Message;

use crate::answers::Answers;
use crate::report::{Report, ReportError, TranscriptEntry};
use crate::timeline::{CallSpan, Delivery, RequestSpan, Timeline};

impl Timeline {
    /// Builds the timeline of a stored session from its durable log and its tool runs (`TranscriptStore::load_log`
    /// and `tool_runs`).
    ///
    /// Request starts are not stored; they are derived: a request starts at the latest time of anything written
    /// before its first fragment (request 0: the user message; request r > 0: the last fragment or result of
    /// request r − 1). Time 0 is the start of the first request.
    pub fn from_store(title: impl Into<String>, log: &[StoredMessage], runs: &[ToolRun]) -> Timeline {
        let mut requests: Vec<RequestSpan> = Vec::new();
        let mut index_of: HashMap<u32, usize> = HashMap::new();
        let mut latest_before: Option<i64> = None;
        let mut starts_us: Vec<i64> = Vec::new();
        let mut fragments_us: Vec<Vec<i64>> = Vec::new();
        for stored in log {
            if let (Message::Assistant(assistant), Some(request)) = (&stored.message, stored.request) {
                let slot = *index_of.entry(request).or_insert_with(|| {
                    requests.push(RequestSpan {
                        request,
                        start_ms: 0.0,
                        stream_end_ms: None,
                        fragments_ms: Vec::new(),
                        stop_reason: None,
                    });
                    starts_us.push(latest_before.unwrap_or(stored.at_us));
                    fragments_us.push(Vec::new());
                    requests.len() - 1
                });
                fragments_us[slot].push(stored.at_us);
                requests[slot].stop_reason = Some(assistant.stop_reason.as_str().to_owned());
            }
            latest_before = Some(latest_before.map_or(stored.at_us, |latest| latest.max(stored.at_us)));
        }
        let origin_us = starts_us
            .first()
            .copied()
            .or_else(|| log.first().map(|stored| stored.at_us))
            .or_else(|| runs.iter().map(|run| run.admitted_at_us).min())
            .unwrap_or(0);
        let ms = |us: i64| us_to_ms(us - origin_us);
        for ((span, start), fragments) in requests.iter_mut().zip(&starts_us).zip(&fragments_us) {
            span.start_ms = ms(*start);
            span.fragments_ms = fragments.iter().map(|&us| ms(us)).collect();
            span.stream_end_ms = span.fragments_ms.last().copied();
        }
        let delivery = delivery_of_async_calls(log);
        let calls: Vec<CallSpan> = runs
            .iter()
            .map(|run| CallSpan {
                id: run.call_id.clone(),
                name: run.tool_name.clone(),
                request: run.request,
                sealed_ms: run.sealed_at_us.map(ms),
                admitted_ms: ms(run.admitted_at_us),
                started_ms: run.started_at_us.map(ms),
                ended_ms: run.ended_at_us.map(ms),
                outcome: run.outcome.map(|outcome| outcome.as_str().to_owned()),
                provider_async: delivery.get(&(run.request, run.call_id.as_str())).copied(),
            })
            .collect();
        let end_ms = log
            .iter()
            .map(|stored| ms(stored.at_us))
            .chain(calls.iter().flat_map(CallSpan::times))
            .fold(0.0, f64::max);
        Timeline {
            title: title.into(),
            requests,
            calls,
            end_ms,
        }
    }

    /// Builds the timeline of a replay report (`headstart replay` output, `docs/scenario-format.md`).
    pub fn from_report_json(text: &str) -> Result<Timeline, ReportError> {
        Report::from_json(text).map(|report| Timeline::from_report(&report))
    }

    /// Builds the timeline of a replay report.
    pub fn from_report(report: &Report) -> Timeline {
        let mut fragments: HashMap<u32, Vec<f64>> = HashMap::new();
        let mut result_at: HashMap<&str, f64> = HashMap::new();
        for entry in &report.transcript {
            match entry {
                TranscriptEntry::Assistant {
                    request: Some(request),
                    at_ms,
                    ..
                } => fragments.entry(*request).or_default().push(at_ms.0),
                TranscriptEntry::ToolResult {
                    tool_call_id, at_ms, ..
                } => {
                    result_at.insert(tool_call_id, at_ms.0);
                }
                _ => {}
            }
        }
        let requests = report
            .requests
            .iter()
            .map(|request| {
                let fragments_ms = fragments.remove(&request.request).unwrap_or_default();
                RequestSpan {
                    request: request.request,
                    start_ms: request.started_ms.0,
                    stream_end_ms: request
                        .stream_end_ms
                        .map(|ms| ms.0)
                        .or_else(|| fragments_ms.last().copied()),
                    fragments_ms,
                    stop_reason: request.stop_reason.map(|reason| reason.as_str().to_owned()),
                }
            })
            .collect();
        let calls = report
            .tool_runs
            .iter()
            .map(|run| CallSpan {
                id: run.id.clone(),
                name: run.name.clone(),
                request: run.request,
                sealed_ms: None,
                admitted_ms: run.admitted_ms.0,
                started_ms: run.started_ms.map(|ms| ms.0),
                ended_ms: run
                    .ended_ms
                    .map(|ms| ms.0)
                    .or_else(|| result_at.get(run.id.as_str()).copied()),
                outcome: run.outcome.map(|outcome| outcome.as_str().to_owned()),
                // A report does not say which calls the provider marked.
                provider_async: None,
            })
            .collect();
        Timeline {
            title: report.scenario.clone(),
            requests,
            calls,
            end_ms: report.end_ms.0,
        }
    }
}

/// Microseconds to milliseconds.
fn us_to_ms(us: i64) -> f64 {
    // i64 → f64 is exact for any span a transcript can hold (< 2^53 µs ≈ 285 years).
    #[allow(clippy::cast_precision_loss)]
    let us = us as f64;
    us / 1000.0
}

/// Each provider-async call of `log` (by request and id) and where its result stands (contract §3.7.5).
fn delivery_of_async_calls(log: &[StoredMessage]) -> HashMap<(u32, &str), Delivery> {
    let answers = Answers::of(log);
    let mut delivery = HashMap::new();
    for stored in log {
        let (Message::Assistant(fragment), Some(request)) = (&stored.message, stored.request) else {
            continue;
        };
        for call in fragment.tool_calls().filter(|call| call.provider_async) {
            let carried = (answers.results.get(&(Some(request), call.id.as_str())))
                .and_then(|(stored, result)| answers.delivered_in(stored.seq, result.ready_during));
            delivery.insert(
                (request, call.id.as_str()),
                carried.map_or(Delivery::Pending, Delivery::In),
            );
        }
    }
    delivery
}
