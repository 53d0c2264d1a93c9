//! `headstart bench headroom FILE…`: when each call of a recorded response is sealed under each Chat Completions
//! sealing rule, and so how long before the stream's end it could start (its headroom).
//!
//! Pure replay of recordings: each response's SSE events go through the provider's converter once per rule
//! ([`SealAt`]), and a call is sealed at the arrival of the event that produced its `toolcall_end`. A recording made
//! with `headstart run --record` (or Python's `record=`) carries each event's arrival time, so the figures are in
//! milliseconds; a capture without times (the repository's cassettes) is measured in events, its event index as the
//! clock. The stream runs from its first event to the one that ended it.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use headstart::core::DeltaEvent;
use headstart_providers::recording::{RecordedResponse, TimedSseEvent};
use headstart_providers::{convert_events, read_recording, ConvertOptions, SealAt, SseEvent, WireFormat};
use serde::Serialize;

use crate::BenchError;

/// What to measure.
#[derive(Debug, Clone, Default)]
pub struct HeadroomOptions {
    /// Recordings or captures (raw SSE bodies, YAML cassettes, `--record` files).
    pub files: Vec<PathBuf>,
    /// The wire format of files that do not name theirs (default: told from the events).
    pub format: Option<WireFormat>,
}

/// Every response of every file.
#[derive(Debug, Clone, Serialize)]
pub struct HeadroomReport {
    /// Per response, in file order.
    pub responses: Vec<ResponseHeadroom>,
}

/// One recorded response.
#[derive(Debug, Clone, Serialize)]
pub struct ResponseHeadroom {
    /// The file it came from (its name).
    pub file: String,
    /// Its 0-based position in the file.
    pub response: usize,
    /// Its wire format.
    pub format: String,
    /// `ms` when the recording carries arrival times, `events` when the event index is the clock.
    pub clock: &'static str,
    /// How long the stream ran, first event to last, on that clock.
    pub stream: f64,
    /// Its calls, in content order.
    pub calls: Vec<CallHeadroom>,
}

/// One call, under each rule.
#[derive(Debug, Clone, Serialize)]
pub struct CallHeadroom {
    /// The call's name.
    pub name: String,
    /// Its content index.
    pub index: usize,
    /// Under `finish`, `next-index` and `complete`, in that order of [`SealAt::ALL`] reversed (latest rule first).
    pub rules: Vec<RuleSeal>,
}

/// When one rule seals a call.
#[derive(Debug, Clone, Serialize)]
pub struct RuleSeal {
    /// The rule (`finish`, `next-index`, `complete`).
    pub rule: &'static str,
    /// When the call was sealed, from the stream's first event; `None` when it never was (it ran into an error).
    pub sealed: Option<f64>,
    /// That time as a share of the stream, in percent.
    pub percent: Option<f64>,
    /// How long before the stream's end: the time a call could run before end-of-stream batching would start it.
    pub headroom: Option<f64>,
}

/// The rules from latest to earliest: the table reads as what each rule gains over the one before.
const RULES: [SealAt; 3] = [SealAt::Finish, SealAt::NextIndex, SealAt::Complete];

/// Measures every response of every file.
pub fn run(options: &HeadroomOptions) -> Result<HeadroomReport, BenchError> {
    if options.files.is_empty() {
        return Err(BenchError::new("headroom needs at least one recording (FILE…)"));
    }
    let mut responses = Vec::new();
    for path in &options.files {
        let text =
            std::fs::read_to_string(path).map_err(|error| BenchError::new(format!("{}: {error}", path.display())))?;
        let recorded =
            read_recording(&text).map_err(|error| BenchError::new(format!("{}: {error}", path.display())))?;
        let file = path.file_name().map_or_else(
            || path.display().to_string(),
            |name| name.to_string_lossy().into_owned(),
        );
        for (number, response) in recorded.iter().enumerate() {
            let format = response
                .format
                .or(options.format)
                .or_else(|| sniff(&response.events))
                .ok_or_else(|| {
                    BenchError::new(format!(
                        "{}: response {number}: cannot tell its wire format; name it with --format",
                        path.display()
                    ))
                })?;
            responses.push(measure(&file, number, format, response));
        }
    }
    Ok(HeadroomReport { responses })
}

/// One response under every rule.
pub fn measure(file: &str, number: usize, format: WireFormat, response: &RecordedResponse) -> ResponseHeadroom {
    let timed = response.events.iter().all(|event| event.at_ms.is_some()) && !response.events.is_empty();
    let clock = |position: usize| -> f64 {
        let last = response.events.len().saturating_sub(1);
        match response.events.get(position.min(last)).and_then(|event| event.at_ms) {
            Some(at) if timed => at,
            _ => position.min(last) as f64,
        }
    };
    let events: Vec<SseEvent> = response.events.iter().map(|timed| timed.event.clone()).collect();
    let mut calls: Vec<CallHeadroom> = Vec::new();
    let mut stream = 0.0;
    for rule in RULES {
        let options = ConvertOptions {
            seal_at: rule,
            ..ConvertOptions::default()
        };
        let deltas = convert_events(format, &events, &options);
        let origin = clock(0);
        let end = deltas
            .iter()
            .find(|(_, delta)| delta.is_terminal())
            .map_or_else(|| clock(events.len()), |(position, _)| clock(*position));
        stream = end - origin;
        let mut names: HashMap<usize, String> = HashMap::new();
        let mut sealed: HashMap<usize, f64> = HashMap::new();
        for (position, delta) in &deltas {
            match delta {
                DeltaEvent::ToolcallStart { index, name, .. } => {
                    names.insert(*index, name.clone());
                }
                DeltaEvent::ToolcallEnd { index, .. } => {
                    sealed.insert(*index, clock(*position) - origin);
                }
                _ => {}
            }
        }
        let mut indices: Vec<usize> = names.keys().copied().collect();
        indices.sort_unstable();
        for index in indices {
            let at = sealed.get(&index).copied();
            let seal = RuleSeal {
                rule: rule.as_str(),
                sealed: at.map(round1),
                percent: at.map(|at| round1(if stream > 0.0 { 100.0 * at / stream } else { 100.0 })),
                headroom: at.map(|at| round1(stream - at)),
            };
            match calls.iter_mut().find(|call| call.index == index) {
                Some(call) => call.rules.push(seal),
                None => calls.push(CallHeadroom {
                    name: names.get(&index).cloned().unwrap_or_default(),
                    index,
                    rules: vec![seal],
                }),
            }
        }
    }
    ResponseHeadroom {
        file: file.to_owned(),
        response: number,
        format: format.as_str().to_owned(),
        clock: if timed { "ms" } else { "events" },
        stream: round1(stream),
        calls,
    }
}

/// The wire format the events are in, from what each format alone sends.
fn sniff(events: &[TimedSseEvent]) -> Option<WireFormat> {
    events.iter().find_map(|timed| {
        let event = &timed.event;
        if event.event == "message_start" || event.event.starts_with("content_block") {
            Some(WireFormat::Anthropic)
        } else if event.event.starts_with("response.") || event.data.contains("\"response.") {
            Some(WireFormat::OpenAiResponses)
        } else if event.data.contains("\"candidates\"") {
            Some(WireFormat::Gemini)
        } else if event.data.contains("\"choices\"") {
            Some(WireFormat::OpenAiChat)
        } else {
            None
        }
    })
}

fn round1(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

impl HeadroomReport {
    /// The report as a table: per call, when each rule seals it and its headroom.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "headroom: when each call is sealed (from the stream's first event; % of the stream) and how long before \
             the stream's end it could start"
        );
        let _ = writeln!(
            out,
            "{:<66} {:>4} {:<24} {:>9} | {:>16} | {:>16} | {:>16} | {:>9}",
            "recording", "resp", "call", "stream", "finish", "next-index", "complete", "headroom"
        );
        for response in &self.responses {
            let unit = if response.clock == "ms" { "ms" } else { "ev" };
            for call in &response.calls {
                let cell = |rule: &str| {
                    call.rules
                        .iter()
                        .find(|seal| seal.rule == rule)
                        .and_then(|seal| Some(format!("{} {unit} ({:.0}%)", seal.sealed?, seal.percent?)))
                        .unwrap_or_else(|| "never".to_owned())
                };
                let headroom = call
                    .rules
                    .iter()
                    .find(|seal| seal.rule == "complete")
                    .and_then(|seal| seal.headroom)
                    .map_or_else(|| "-".to_owned(), |headroom| format!("{headroom} {unit}"));
                let _ = writeln!(
                    out,
                    "{:<66} {:>4} {:<24} {:>9} | {:>16} | {:>16} | {:>16} | {:>9}",
                    response.file,
                    response.response,
                    format!("{}#{}", call.name, call.index),
                    format!("{} {unit}", response.stream),
                    cell("finish"),
                    cell("next-index"),
                    cell("complete"),
                    headroom
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(at_ms: f64, data: &str) -> TimedSseEvent {
        TimedSseEvent {
            at_ms: Some(at_ms),
            event: SseEvent::message(data),
        }
    }

    #[test]
    fn each_rule_seals_a_chat_call_at_its_own_event_and_the_headroom_follows() {
        let call = |index: u64, id: &str, name: &str| {
            format!(
                r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":{index},"id":"{id}","function":{{"name":"{name}","arguments":""}}}}]}}}}]}}"#
            )
        };
        let args = |index: u64, text: &str| {
            let text = serde_json::to_string(text).unwrap();
            format!(
                r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":{index},"function":{{"arguments":{text}}}}}]}}}}]}}"#
            )
        };
        let response = RecordedResponse {
            format: Some(WireFormat::OpenAiChat),
            events: vec![
                chunk(10.0, &call(0, "a", "alpha")),
                chunk(20.0, &args(0, "{\"q\": 1}")),
                chunk(50.0, &call(1, "b", "beta")),
                chunk(60.0, &args(1, "{}")),
                chunk(
                    100.0,
                    r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
                ),
                chunk(110.0, "[DONE]"),
            ],
        };
        let measured = measure("rec", 0, WireFormat::OpenAiChat, &response);
        assert_eq!(measured.clock, "ms");
        assert_eq!(measured.stream, 100.0);
        let sealed = |call: usize| -> Vec<(&str, Option<f64>, Option<f64>)> {
            measured.calls[call]
                .rules
                .iter()
                .map(|seal| (seal.rule, seal.sealed, seal.headroom))
                .collect()
        };
        assert_eq!(
            sealed(0),
            [
                ("finish", Some(90.0), Some(10.0)),
                ("next-index", Some(40.0), Some(60.0)),
                ("complete", Some(10.0), Some(90.0)),
            ]
        );
        assert_eq!(
            sealed(1),
            [
                ("finish", Some(90.0), Some(10.0)),
                ("next-index", Some(90.0), Some(10.0)),
                ("complete", Some(50.0), Some(50.0)),
            ]
        );
        let table = HeadroomReport {
            responses: vec![measured],
        }
        .table();
        assert!(table.contains("alpha#0"), "{table}");
    }

    #[test]
    fn a_capture_without_times_is_measured_in_events_and_its_format_is_told_from_them() {
        let untimed: Vec<TimedSseEvent> = [r#"{"choices":[{"index":0,"delta":{"content":"x"}}]}"#]
            .iter()
            .map(|data| TimedSseEvent {
                at_ms: None,
                event: SseEvent::message(*data),
            })
            .collect();
        assert_eq!(sniff(&untimed), Some(WireFormat::OpenAiChat));
        let response = RecordedResponse {
            format: None,
            events: untimed,
        };
        assert_eq!(measure("x", 0, WireFormat::OpenAiChat, &response).clock, "events");
        assert!(run(&HeadroomOptions::default()).is_err());
    }
}
