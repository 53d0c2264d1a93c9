//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

fn str_of<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// The engine invariants every report must satisfy; one message per violation.
pub fn invariants(report: &Value) -> Vec<String> {
    let mut failures = Vec::new();
    let empty = Vec::new();
    let transcript = report.get("transcript").and_then(Value::as_array).unwrap_or(&empty);
    let runs = report.get("tool_runs").and_then(Value::as_array).unwrap_or(&empty);
    let events = report.get("events").and_then(Value::as_array).unwrap_or(&empty);

    // Owner of each call: (stored at, request, turn).
    let mut owner_at: BTreeMap<&str, f64> = BTreeMap::new();
    let mut results: BTreeMap<&str, usize> = BTreeMap::new();
    let mut turns: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    for message in transcript {
        match str_of(message, "role") {
            Some("assistant") => {
                let at = message.get("at_ms").and_then(Value::as_f64).unwrap_or(f64::MAX);
                for block in message.get("content").and_then(Value::as_array).unwrap_or(&empty) {
                    if str_of(block, "type") == Some("tool_call") {
                        if let Some(id) = str_of(block, "id") {
                            owner_at.insert(id, at);
                        }
                    }
                }
                let request = message.get("request").and_then(Value::as_u64).unwrap_or(u64::MAX);
                turns.entry(request).or_default().push(message);
            }
            Some("tool_result") => {
                if let Some(id) = str_of(message, "tool_call_id") {
                    *results.entry(id).or_default() += 1;
                }
            }
            _ => {}
        }
    }
    for run in runs {
        let id = str_of(run, "id").unwrap_or("");
        if let Some(started) = run.get("started_ms").and_then(Value::as_f64) {
            match owner_at.get(id) {
                Some(stored) if *stored <= started => {}
                Some(stored) => failures.push(format!(
                    "{id} started at {started} before its owner was stored at {stored}"
                )),
                None => failures.push(format!("{id} started but no stored fragment owns it")),
            }
        }
    }
    for id in owner_at.keys() {
        let count = results.get(id).copied().unwrap_or(0);
        if count != 1 {
            failures.push(format!("{id} has {count} results"));
        }
    }
    for id in results.keys() {
        if !owner_at.contains_key(id) {
            failures.push(format!("result for {id}, which no fragment holds"));
        }
    }
    for (request, fragments) in &turns {
        let ids: BTreeSet<&str> = fragments.iter().filter_map(|m| str_of(m, "turn_id")).collect();
        if ids.len() != 1 {
            failures.push(format!("request {request}: fragments have turn ids {ids:?}"));
        }
        for fragment in &fragments[..fragments.len().saturating_sub(1)] {
            let total = fragment.pointer("/usage/total").and_then(Value::as_u64);
            if total != Some(0) {
                failures.push(format!("request {request}: a prefix fragment carries usage {total:?}"));
            }
        }
    }
    let agent_ends = events.iter().filter(|e| str_of(e, "type") == Some("agent_end")).count();
    let last = events.last().and_then(|e| str_of(e, "type"));
    if agent_ends != 1 || last != Some("agent_end") {
        failures.push(format!("{agent_ends} agent_end events; last event is {last:?}"));
    }
    let executed: BTreeSet<&str> = runs
        .iter()
        .filter(|run| run.get("started_ms").is_some_and(|ms| !ms.is_null()))
        .filter_map(|run| str_of(run, "id"))
        .collect();
    for id in results.keys() {
        failures.extend(tool_event_failure(events, id, executed.contains(id)));
    }
    failures
}

/// SPEC §5.7 and §6.4: a call with a result has one `tool_execution_start` and one `tool_execution_end`, in that
/// order, the end directly followed by its result's `message_start`/`message_end`; a call that never executed gets
/// its start immediately before its end.
fn tool_event_failure(events: &[Value], id: &str, executed: bool) -> Option<String> {
    let positions = |kind: &str| -> Vec<usize> {
        let of_call = |event: &Value| str_of(event, "type") == Some(kind) && str_of(event, "tool_call_id") == Some(id);
        events
            .iter()
            .enumerate()
            .filter(|(_, event)| of_call(event))
            .map(|(i, _)| i)
            .collect()
    };
    let (starts, ends) = (positions("tool_execution_start"), positions("tool_execution_end"));
    let ([start], [end]) = (starts.as_slice(), ends.as_slice()) else {
        return Some(format!(
            "{id}: {} tool_execution_start, {} tool_execution_end",
            starts.len(),
            ends.len()
        ));
    };
    let kind_at = |i: usize| {
        events
            .get(i)
            .and_then(|event| Some((str_of(event, "type")?, str_of(event, "role"))))
    };
    let result_follows = kind_at(end + 1) == Some(("message_start", Some("tool_result")))
        && kind_at(end + 2) == Some(("message_end", Some("tool_result")));
    if start > end || !result_follows {
        return Some(format!(
            "{id}: tool events out of order (start at {start}, end at {end})"
        ));
    }
    if !executed && end - start != 1 {
        return Some(format!("{id} never executed, but its start and end are not adjacent"));
    }
    None
}
