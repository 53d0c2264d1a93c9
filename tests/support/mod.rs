//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value;

/// The shared folder (`../shared` beside the repository), or `HEADSTART_SHARED` if set.
pub fn shared_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HEADSTART_SHARED") {
        return PathBuf::from(dir);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

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
                Some(stored) => failures.push(format!("{id} started at {started} before its owner was stored at {stored}")),
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
    failures
}
