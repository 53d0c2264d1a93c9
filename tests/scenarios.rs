//! Replays every scenario of the corpus (`tests/scenarios/`), checks each one's `expect` block, and checks the
//! engine's invariants on every report.
//!
//! Checked on every report:
//! - the engine's invariants, by the checker shared with the adapter, load and crash tests
//!   ([`headstart_testkit::invariants`]): every executed call's owning assistant message is stored no later than the
//!   call starts (contract §1); every stored tool call has exactly one result and every result answers a stored call
//!   (contract §5.5); fragments of one request share a `turn_id`, and only the last carries usage (contract §3.2, §3.5);
//!   `agent_end` is the single last event (contract §6); every call with a result has one `tool_execution_start` and
//!   one `tool_execution_end`, the end directly followed by its result message, and a call that never executed
//!   gets both back to back (contract §5.7, §6.4);
//! - replaying twice gives identical bytes (contract §8), and the report reads back as itself.
//!
//! # Contract rule (`docs/contract.md`) → scenario
//!
//! Every `NN-…` file is in `tests/scenarios/`; 01–14 came with the original contract, 20 onwards pin its rules one
//! by one. Each file's `description` names the rules it pins down.
//!
//! - §3.1(a) an early call commits at its `toolcall_end`: 01, 02, 22 (a call flagged `async: true` in the
//!   event is eligible though its tool is sync or unknown; `async: false` does not demote an early tool).
//! - §3.1(b) id not yet admitted: unreachable with a valid stream (a reused id is a protocol error):
//!   31-duplicate-id-runs-once.
//! - §3.1(c) every earlier call eligible, text/thinking irrelevant: 03, 22-event-async-flag,
//!   23-prefix-contents-and-rebasing.
//! - §3.1(d) every earlier block closed: 20-open-text-delays-commit, 21-open-call-delays-commit.
//! - §3.1 an eligible call that could not commit joins the next prefix or the terminal fragment:
//!   20-open-text-delays-commit, 21-open-call-delays-commit.
//! - §3.2 prefix contents, zero usage, shared turn id: 01, 23-prefix-contents-and-rebasing (plus the invariants).
//! - §3.3 commit before admission: the ownership invariant above, on every scenario. A failing commit cannot be
//!   expressed in the scenario format (no store fault injection).
//! - §3.4 re-basing: 21-open-call-delays-commit, 23-prefix-contents-and-rebasing (later fragments hold only the
//!   content after `committed`).
//! - §3.5 terminal fragment always committed, even empty: 24-empty-terminal-and-settle.
//! - §3.5 `done(tool_use)` final batch queued behind earlier batches: 03, 21-open-call-delays-commit,
//!   25-final-batch-queued, 34-sequential-end-batch, 35-fence-end-batch.
//! - §3.5 `done(stop | length)`: 04, 26-length-admits-sealed-eligible, 27-stop-only-sync-ends-loop.
//! - §3.5 `error | aborted` (terminal first, running cancelled, "cancelled before start: <reason>", "not executed"
//!   for never-admitted calls, sealed or not): 07, 28-error-terminal-results, 29-aborted-event-sequential,
//!   50-cancel-mid-stream; protocol error: 13, 31-duplicate-id-runs-once; missing terminal event:
//!   30-missing-terminal-event.
//! - §3.6 continuation: continues after admitted calls, including ones failing in preparation (08,
//!   26-length-admits-sealed-eligible, 42-immediate-outcome-messages); "not executed" calls alone do not
//!   (27-stop-only-sync-ends-loop); terminate (09, 33-terminate-batches); `error`/`aborted` ends the loop (07,
//!   28–31, 50); the next request waits for every result (24-empty-terminal-and-settle); no turn left
//!   (32-no-turn-left).
//! - §4.1 preparation order, immediate outcomes without a slot, prepare-before-start in sequential mode and after a
//!   fence: 39-prepare-without-slot, 40-prepare-sequential-mode, 41-prepare-after-fence.
//! - §4.2 parallel across batches: 01, 52-parallel-across-batches.
//! - §4.3 sequential across fragments and the end batch: 05, 34-sequential-end-batch, 29-aborted-event-sequential.
//! - §4.4 per-tool sequential fences: 06, 35-fence-end-batch, 41-prepare-after-fence.
//! - §4.5 conflict keys: 36-conflict-keys.
//! - §4.6 `max_in_flight`: 25-final-batch-queued, 37-max-in-flight, 39-prepare-without-slot; timeouts (deadline
//!   counted from the start, a return at the deadline wins, later body ignored): 38-timeouts, 49-cancel-same-instant.
//! - §4.7 at most one execution per call id: 31-duplicate-id-runs-once (and the one-result invariant everywhere).
//! - §5.2 preparation steps in order (lookup, arguments, validation, `before_tool_call`): 43-prepare-check-order.
//!   `prepare_arguments` rewrites and hook errors cannot be expressed in the scenario format.
//! - §5.3 immediate outcomes, each message: 08, 14, 22-event-async-flag, 42-immediate-outcome-messages.
//! - §5.4 errors and panics: 10, 46-panic-isolated; updates: 45-updates, 49-cancel-same-instant; `after_tool_call`
//!   overrides field by field, executed calls only: 44-after-hook-overrides, 33-terminate-batches.
//! - §5.5 cancellation: 11, 47-cancel-after-stream, 48-cancel-ignored-by-tool, 49-cancel-same-instant,
//!   50-cancel-mid-stream; response errors: 28-error-terminal-results, 29-aborted-event-sequential.
//! - §5.6 terminate: 09, 33-terminate-batches, 44-after-hook-overrides.
//! - §5.7 events of never-executed calls: the invariant above; `max_turns`: 51-max-turns.
//! - §6.7 dropping the stream and §6.8 progress independent of the consumer: every scenario of the corpus replayed
//!   with a lagging consumer and dropped after each event, in `tests/runtime.rs`.

use std::path::{Path, PathBuf};

use headstart_sim::{replay_file, ReplayOptions};
use headstart_testkit::{expect, invariants};
use headstart_timeline::Report;
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
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = first.report.to_json();
        if text != second.report.to_json() {
            failures.push(format!("{name}: two replays gave different reports"));
        }
        match Report::from_json(&text) {
            Ok(read) if read == first.report => {}
            Ok(_) => failures.push(format!("{name}: the report reads back as a different report")),
            Err(error) => failures.push(format!("{name}: {error}")),
        }
        let report: Value = serde_json::from_str(&text).expect("a report is valid JSON");
        let scenario: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("readable scenario")).expect("scenario JSON");
        let expected = scenario.get("expect").cloned().unwrap_or(Value::Null);
        if first.exit_code != 0 && expected.get("error_contains").is_none() {
            failures.push(format!("{name}: replay could not run: {:?}", first.report.error));
        }
        for failure in expect::check(&report, &expected) {
            failures.push(format!("{name}: {failure}"));
        }
        for violation in invariants::check_report(&first.report) {
            failures.push(format!("{name}: invariant: {violation}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    files.len()
}

#[test]
fn corpus_passes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let count = run_corpus(&dir);
    assert!(
        count >= 47,
        "expected at least the 47 scenarios of tests/scenarios, found {count}"
    );
}
