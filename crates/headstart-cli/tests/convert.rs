//! `headstart convert` turns every recorded provider fixture into delta logs that `headstart replay` accepts, and
//! the replay runs the calls those logs seal (and none that were cut off).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

/// The repository's `tests/` folder (crates/headstart-cli → repository root).
fn repo_tests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests")
}

fn format_of(fixture: &str) -> &'static str {
    match fixture.split("__").next() {
        Some("anthropic") => "anthropic",
        Some("openai_responses") => "openai-responses",
        Some("gemini") => "gemini",
        _ => "openai-chat",
    }
}

fn headstart(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_headstart"))
        .args(args)
        .output()
        .expect("the headstart binary runs")
}

fn read_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn every_fixture_converts_to_logs_that_replay_accepts() {
    let dir = repo_tests().join("fixtures/providers");
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    fixtures.sort();
    assert!(
        fixtures.len() >= 6,
        "expected the provider fixtures, found {}",
        fixtures.len()
    );

    for fixture in fixtures {
        let name = fixture.file_stem().unwrap().to_string_lossy().into_owned();
        let out = tempfile::tempdir().unwrap();
        let converted = headstart(&[
            "convert",
            "--format",
            format_of(&name),
            fixture.to_str().unwrap(),
            "--out-dir",
            out.path().to_str().unwrap(),
        ]);
        assert!(
            converted.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&converted.stderr)
        );

        let mut logs: Vec<PathBuf> = std::fs::read_dir(out.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        logs.sort_by_key(|path| {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            stem.rsplit('.')
                .next()
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(usize::MAX)
        });
        assert!(!logs.is_empty(), "{name}: no logs written");

        // Every tool the logs call becomes an async simulated tool; note which calls were sealed valid.
        let mut tools = BTreeSet::new();
        let mut valid_calls = BTreeSet::new();
        let mut invalid_calls = BTreeSet::new();
        for log in &logs {
            let events = read_events(log);
            let mut ids = std::collections::BTreeMap::new();
            for event in &events {
                match event["type"].as_str() {
                    Some("toolcall_start") => {
                        tools.insert(event["name"].as_str().unwrap().to_owned());
                        ids.insert(
                            event["index"].as_u64().unwrap(),
                            event["id"].as_str().unwrap().to_owned(),
                        );
                    }
                    Some("toolcall_end") => {
                        let id = ids[&event["index"].as_u64().unwrap()].clone();
                        if event.get("arguments").is_some_and(|args| !args.is_object()) {
                            invalid_calls.insert(id);
                        } else {
                            valid_calls.insert(id);
                        }
                    }
                    _ => {}
                }
            }
        }
        let scenario = json!({
            "name": name,
            "tools": tools.iter().map(|tool| json!({"name": tool, "async": true, "behavior": {"delay_ms": 5, "result": {"text": "ok"}}})).collect::<Vec<_>>(),
            "turns": logs.iter().map(|log| json!({"log": log.file_name().unwrap().to_string_lossy()})).collect::<Vec<_>>(),
        });
        let scenario_path = out.path().join("scenario.json");
        std::fs::write(&scenario_path, scenario.to_string()).unwrap();
        let replayed = headstart(&["replay", scenario_path.to_str().unwrap()]);
        assert!(replayed.status.success(), "{name}: replay exit {:?}", replayed.status);
        let report: Value = serde_json::from_slice(&replayed.stdout).unwrap();

        let started: BTreeSet<String> = report["tool_runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|run| !run["started_ms"].is_null())
            .map(|run| run["id"].as_str().unwrap().to_owned())
            .collect();
        let requests = report["requests"].as_array().unwrap().len();
        // Calls of responses the replay reached: those of the first `requests` logs.
        let reached: BTreeSet<String> = logs[..requests.min(logs.len())]
            .iter()
            .flat_map(|log| read_events(log))
            .filter(|event| event["type"] == "toolcall_start")
            .map(|event| event["id"].as_str().unwrap().to_owned())
            .collect();
        for id in reached.intersection(&valid_calls) {
            assert!(started.contains(id), "{name}: sealed call {id} did not run: {report}");
        }
        for id in &invalid_calls {
            assert!(!started.contains(id), "{name}: cut-off call {id} ran");
        }
        if !invalid_calls.is_empty() {
            let results: Vec<&Value> = report["transcript"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "tool_result" && invalid_calls.contains(m["tool_call_id"].as_str().unwrap()))
                .collect();
            assert!(results.iter().all(|r| r["is_error"] == true), "{name}: {results:?}");
        }
    }
}
