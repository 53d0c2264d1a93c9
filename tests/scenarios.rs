//! Replays every scenario of the shared corpus (`../shared/scenarios/`) and of `tests/scenarios/`, checks each
//! one's `expect` block, and checks the engine's invariants on every report.
//!
//! Invariants checked on every report (issue 3):
//! - every executed call's owning assistant message is stored no later than the call starts (SPEC §1);
//! - every stored tool call has exactly one result (SPEC §5.5);
//! - fragments of one request share a `turn_id`, and only the last carries usage (SPEC §3.2, §3.5);
//! - `agent_end` is the single last event (SPEC §6);
//! - replaying twice gives identical bytes (SPEC §8).

mod support;

use std::path::{Path, PathBuf};

use headstart_sim::{expect, replay_file, ReplayOptions};
use serde_json::Value;

fn scenario_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
}

fn run_corpus(dir: &Path) -> usize {
    let files = scenario_files(dir);
    let mut failures = Vec::new();
    for path in &files {
        let first = replay_file(path, &ReplayOptions::default());
        let second = replay_file(path, &ReplayOptions::default());
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let text = first.report.to_json();
        if text != second.report.to_json() {
            failures.push(format!("{name}: two replays gave different reports"));
        }
        let report: Value = serde_json::from_str(&text).expect("a report is valid JSON");
        let scenario: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("readable scenario"))
            .expect("scenario JSON");
        let expected = scenario.get("expect").cloned().unwrap_or(Value::Null);
        if first.exit_code != 0 && expected.get("error_contains").is_none() {
            failures.push(format!("{name}: replay could not run: {:?}", first.report.error));
        }
        for failure in expect::check(&report, &expected) {
            failures.push(format!("{name}: {failure}"));
        }
        for failure in support::invariants(&report) {
            failures.push(format!("{name}: invariant: {failure}"));
        }
    }
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
    files.len()
}

#[test]
fn shared_scenarios_pass() {
    let dir = support::shared_dir().join("scenarios");
    let count = run_corpus(&dir);
    assert!(count >= 14, "expected the 14 shared scenarios, found {count}");
}

#[test]
fn own_scenarios_pass() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let count = run_corpus(&dir);
    assert!(count > 0, "no scenarios in tests/scenarios");
}
