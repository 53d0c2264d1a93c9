//! Checking a report against a scenario's `expect` block (`docs/scenario-format.md`, "expect").
//!
//! Works on the report as JSON, exactly as an outside tool would see it. Every key of the format's table is
//! implemented; an unknown key is itself a failure, so a typo never passes silently.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Checks `report` against `expect`; returns one message per failed assertion (empty when all hold).
pub fn check(report: &Value, expect: &Value) -> Vec<String> {
    let mut failures = Vec::new();
    let Some(expect) = expect.as_object() else {
        if !expect.is_null() {
            failures.push("expect must be an object".to_owned());
        }
        return failures;
    };
    let runs = tool_runs(report);
    let results = results(report);
    for (key, want) in expect {
        let mut fail = |message: String| failures.push(format!("{key}: {message}"));
        match key.as_str() {
            "ran" => {
                let ran: BTreeSet<&str> = runs
                    .iter()
                    .filter(|run| run.started.is_some())
                    .map(|run| run.id)
                    .collect();
                let want: BTreeSet<&str> = strings(want).into_iter().collect();
                if ran != want {
                    fail(format!("expected {want:?}, executed {ran:?}"));
                }
            }
            "not_ran" => {
                for id in strings(want) {
                    if runs.iter().any(|run| run.id == id && run.started.is_some()) {
                        fail(format!("{id} started"));
                    }
                }
            }
            "started_ms" | "ended_ms" => {
                for (id, ms) in want.as_object().into_iter().flatten() {
                    let run = runs.iter().find(|run| run.id == id);
                    let got = run.and_then(|run| if key == "started_ms" { run.started } else { run.ended });
                    if got != ms.as_f64() {
                        fail(format!("{id}: expected {ms}, got {got:?}"));
                    }
                }
            }
            "start_order" => {
                let mut started: Vec<&Run> = runs.iter().filter(|run| run.started.is_some()).collect();
                // Stable sort: ties keep admission order.
                started.sort_by(|a, b| a.started.partial_cmp(&b.started).unwrap_or(std::cmp::Ordering::Equal));
                let order: Vec<&str> = started.iter().map(|run| run.id).collect();
                if order != strings(want) {
                    fail(format!("expected {want}, got {order:?}"));
                }
            }
            "max_concurrency" => {
                let got = max_concurrency(&runs);
                if Some(got) != want.as_u64() {
                    fail(format!("expected {want}, got {got}"));
                }
            }
            "results" => {
                for (id, checks) in want.as_object().into_iter().flatten() {
                    let Some(result) = results.get(id.as_str()) else {
                        fail(format!("{id} has no result"));
                        continue;
                    };
                    for (field, value) in checks.as_object().into_iter().flatten() {
                        let holds = match field.as_str() {
                            "is_error" | "terminate" => result.get(field) == Some(value),
                            "text_contains" => {
                                let text = result.get("text").and_then(Value::as_str).unwrap_or("").to_lowercase();
                                text.contains(&value.as_str().unwrap_or("").to_lowercase())
                            }
                            other => {
                                fail(format!("{id}: unknown check {other}"));
                                continue;
                            }
                        };
                        if !holds {
                            fail(format!(
                                "{id}.{field}: expected {value}, result is {}",
                                Value::Object((*result).clone())
                            ));
                        }
                    }
                }
            }
            "update_events" => {
                for (id, times) in want.as_object().into_iter().flatten() {
                    let got: Vec<f64> = events(report)
                        .filter(|event| {
                            event.get("type").and_then(Value::as_str) == Some("tool_execution_update")
                                && event.get("tool_call_id").and_then(Value::as_str) == Some(id)
                        })
                        .filter_map(|event| event.get("at_ms").and_then(Value::as_f64))
                        .collect();
                    let want: Vec<f64> = times
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_f64)
                        .collect();
                    if got != want {
                        fail(format!("{id}: expected {want:?}, got {got:?}"));
                    }
                }
            }
            "roles" => {
                let got: Vec<&str> = transcript(report)
                    .filter_map(|m| m.get("role").and_then(Value::as_str))
                    .collect();
                if got != strings(want) {
                    fail(format!("expected {want}, got {got:?}"));
                }
            }
            "assistant_usage_totals" => {
                let got: Vec<u64> = assistants(report)
                    .map(|m| {
                        m.get("usage")
                            .and_then(|usage| usage.get("total"))
                            .and_then(Value::as_u64)
                            .unwrap_or(u64::MAX)
                    })
                    .collect();
                let want: Vec<u64> = want
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_u64)
                    .collect();
                if got != want {
                    fail(format!("expected {want:?}, got {got:?}"));
                }
            }
            "assistant_tool_calls" => {
                let got: Vec<Vec<&str>> = assistants(report)
                    .map(|m| {
                        m.get("content")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_call"))
                            .filter_map(|block| block.get("id").and_then(Value::as_str))
                            .collect()
                    })
                    .collect();
                let want: Vec<Vec<&str>> = want.as_array().into_iter().flatten().map(strings).collect();
                if got != want {
                    fail(format!("expected {want:?}, got {got:?}"));
                }
            }
            "requests" => {
                let got = report.get("requests").and_then(Value::as_array).map_or(0, Vec::len);
                if Some(got as u64) != want.as_u64() {
                    fail(format!("expected {want}, got {got}"));
                }
            }
            "end_ms" => {
                let got = report.get("end_ms").and_then(Value::as_f64);
                if got != want.as_f64() {
                    fail(format!("expected {want}, got {got:?}"));
                }
            }
            "error_contains" => {
                let error = report.get("error").and_then(Value::as_str).unwrap_or("");
                if !error.contains(want.as_str().unwrap_or("")) {
                    fail(format!("expected the run error to contain {want}, it is {error:?}"));
                }
            }
            other => fail(format!("unknown expect key {other}")),
        }
    }
    failures
}

struct Run<'a> {
    id: &'a str,
    started: Option<f64>,
    ended: Option<f64>,
}

fn tool_runs(report: &Value) -> Vec<Run<'_>> {
    report
        .get("tool_runs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|run| Run {
            id: run.get("id").and_then(Value::as_str).unwrap_or(""),
            started: run.get("started_ms").and_then(Value::as_f64),
            ended: run.get("ended_ms").and_then(Value::as_f64),
        })
        .collect()
}

/// The most calls executing at once; a call executes during `[started, ended)`.
fn max_concurrency(runs: &[Run<'_>]) -> u64 {
    let mut edges: Vec<(f64, i64)> = Vec::new();
    for run in runs {
        if let (Some(start), Some(end)) = (run.started, run.ended) {
            edges.push((start, 1));
            edges.push((end, -1));
        }
    }
    // Ends sort before starts at the same instant: half-open intervals.
    edges.sort_by(|a, b| {
        a.0.partial_cmp(&b.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.1.cmp(&b.1))
    });
    let (mut now, mut max) = (0i64, 0i64);
    for (_, delta) in edges {
        now += delta;
        max = max.max(now);
    }
    u64::try_from(max).unwrap_or(0)
}

fn transcript(report: &Value) -> impl Iterator<Item = &serde_json::Map<String, Value>> {
    report
        .get("transcript")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn assistants(report: &Value) -> impl Iterator<Item = &serde_json::Map<String, Value>> {
    transcript(report).filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
}

fn results(report: &Value) -> BTreeMap<&str, &serde_json::Map<String, Value>> {
    transcript(report)
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool_result"))
        .filter_map(|m| Some((m.get("tool_call_id")?.as_str()?, m)))
        .collect()
}

fn events(report: &Value) -> impl Iterator<Item = &Value> {
    report.get("events").and_then(Value::as_array).into_iter().flatten()
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report() -> Value {
        json!({
            "error": null,
            "requests": [{}, {}],
            "transcript": [
                {"role": "user"},
                {"role": "assistant", "usage": {"total": 0}, "content": [{"type": "tool_call", "id": "a"}]},
                {"role": "tool_result", "tool_call_id": "a", "is_error": false, "text": "Found It", "terminate": false}
            ],
            "tool_runs": [
                {"id": "a", "started_ms": 10, "ended_ms": 20},
                {"id": "b", "started_ms": 20, "ended_ms": 30},
                {"id": "c", "started_ms": null, "ended_ms": null}
            ],
            "events": [{"type": "tool_execution_update", "tool_call_id": "a", "at_ms": 15}],
            "end_ms": 30
        })
    }

    #[test]
    fn passing_expectations_report_nothing() {
        let expect = json!({
            "ran": ["a", "b"], "not_ran": ["c"], "started_ms": {"a": 10}, "ended_ms": {"b": 30},
            "start_order": ["a", "b"], "max_concurrency": 1, "results": {"a": {"is_error": false, "text_contains": "found it"}},
            "update_events": {"a": [15]}, "roles": ["user", "assistant", "tool_result"],
            "assistant_usage_totals": [0], "assistant_tool_calls": [["a"]], "requests": 2, "end_ms": 30
        });
        assert_eq!(check(&report(), &expect), Vec::<String>::new());
    }

    #[test]
    fn each_key_can_fail() {
        let cases = [
            json!({"ran": ["a"]}),
            json!({"not_ran": ["a"]}),
            json!({"started_ms": {"a": 11}}),
            json!({"start_order": ["b", "a"]}),
            json!({"max_concurrency": 2}),
            json!({"results": {"a": {"is_error": true}}}),
            json!({"results": {"zz": {}}}),
            json!({"update_events": {"a": []}}),
            json!({"roles": ["user"]}),
            json!({"assistant_usage_totals": [1]}),
            json!({"assistant_tool_calls": [[]]}),
            json!({"requests": 1}),
            json!({"end_ms": 31}),
            json!({"error_contains": "x"}),
            json!({"typo": 1}),
        ];
        for expect in cases {
            assert_eq!(check(&report(), &expect).len(), 1, "{expect}");
        }
    }
}
