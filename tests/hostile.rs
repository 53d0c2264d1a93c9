//! Hostile input: delta logs and scenarios malformed in every way we could think of (`tests/hostile/`), plus large
//! and deeply nested ones generated at test time. Each must give a clear error — a run-level error with exit
//! status 2 when the scenario cannot be run, or the response's `error` outcome when the engine rejects the stream —
//! naming what is wrong; never a panic, a hang, or unbounded memory.
//!
//! - `tests/hostile/logs/*.jsonl` are replayed as the first turn of a small generated scenario;
//! - `tests/hostile/scenarios/*.json` are replayed as they are;
//! - every file there must have an expectation below, and every expectation a file.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use headstart::core::accumulator::MAX_BLOCK_BYTES;
use headstart::core::delta_log::MAX_LINE_BYTES;
use headstart_sim::scenario::{MAX_DELTA_LOG_BYTES, MAX_SCENARIO_BYTES};
use headstart_sim::{replay_file, ReplayOptions, ReplayOutcome};
use headstart_testkit::invariants;
use serde_json::Value;

/// What replaying a hostile file must give.
#[derive(Debug, Clone, Copy)]
enum Expect<'a> {
    /// Exit status 2; the report's run-level `error` contains this.
    RunError(&'a str),
    /// Exit status 0; the first response ended in error with a message containing this.
    ResponseError(&'a str),
    /// Exit status 0, no response error; the run-level error, if any, contains this (`""`: none expected).
    Runs(&'a str),
}

use Expect::{ResponseError, RunError, Runs};

const LOGS: &[(&str, Expect<'static>)] = &[
    // Not JSON, or not a delta event: the scenario cannot be loaded.
    ("bad-json.jsonl", RunError("line 2: not valid JSON: EOF while parsing")),
    (
        "two-objects-on-one-line.jsonl",
        RunError("line 1: not valid JSON: trailing characters"),
    ),
    (
        "trailing-garbage.jsonl",
        RunError("line 3: not valid JSON: trailing characters"),
    ),
    (
        "index-is-a-string.jsonl",
        RunError("line 2: invalid type: string \"0\", expected usize"),
    ),
    (
        "negative-index.jsonl",
        RunError("line 2: invalid value: integer `-1`, expected usize"),
    ),
    (
        "fractional-index.jsonl",
        RunError("line 2: invalid type: floating point `1.5`, expected usize"),
    ),
    (
        "index-beyond-u64.jsonl",
        RunError("line 2: invalid type: floating point"),
    ),
    (
        "number-out-of-range.jsonl",
        RunError("line 2: not valid JSON: number out of range"),
    ),
    (
        "delta-is-a-number.jsonl",
        RunError("line 3: invalid type: integer `5`, expected a string"),
    ),
    (
        "unknown-event-type.jsonl",
        RunError("line 2: unknown variant `image_start`"),
    ),
    ("missing-type.jsonl", RunError("line 2: missing field `type`")),
    ("type-is-a-number.jsonl", RunError("line 2: invalid type: integer `7`")),
    ("unknown-field.jsonl", RunError("line 2: unknown field `colour`")),
    ("missing-field.jsonl", RunError("line 2: missing field `name`")),
    (
        "line-is-an-array.jsonl",
        RunError("line 2: a delta event must be a JSON object"),
    ),
    (
        "line-is-a-string.jsonl",
        RunError("line 2: a delta event must be a JSON object"),
    ),
    (
        "line-is-null.jsonl",
        RunError("line 2: a delta event must be a JSON object"),
    ),
    (
        "done-with-error-reason.jsonl",
        RunError("line 2: unknown variant `error`, expected one of `stop`"),
    ),
    (
        "error-with-stop-reason.jsonl",
        RunError("line 2: unknown variant `stop`, expected `error` or `aborted`"),
    ),
    ("usage-unknown-key.jsonl", RunError("line 2: unknown field `inptu`")),
    (
        "usage-negative.jsonl",
        RunError("line 2: invalid value: integer `-1`, expected u64"),
    ),
    (
        "async-is-a-string.jsonl",
        RunError("line 2: invalid type: string \"yes\", expected a boolean"),
    ),
    (
        "time-goes-backwards.jsonl",
        RunError("line 2: at_ms 5 is earlier than the previous event's 10"),
    ),
    (
        "negative-time.jsonl",
        RunError("line 1: at_ms must be a non-negative integer, got -5"),
    ),
    (
        "time-is-a-string.jsonl",
        RunError("line 1: at_ms must be a non-negative integer, got \"5\""),
    ),
    (
        "time-is-a-float.jsonl",
        RunError("line 1: at_ms must be a non-negative integer, got 1000.0"),
    ),
    (
        "nul-after-json.jsonl",
        RunError("line 2: not valid JSON: trailing characters"),
    ),
    (
        "raw-nul-in-string.jsonl",
        RunError("line 3: not valid JSON: control character (\\u0000-\\u001F) found"),
    ),
    (
        "only-nul-bytes.jsonl",
        RunError("line 1: not valid JSON: expected value"),
    ),
    (
        "invalid-utf8.jsonl",
        RunError("line 3: not valid UTF-8: invalid utf-8 sequence"),
    ),
    (
        "lone-surrogate.jsonl",
        RunError("line 3: not valid JSON: unexpected end of hex escape"),
    ),
    (
        "byte-order-mark.jsonl",
        RunError("line 1: not valid JSON: expected value at line 1 column 1"),
    ),
    ("utf16.jsonl", RunError("line 1: not valid UTF-8")),
    (
        "event-after-done.jsonl",
        RunError("event 2 (text_start) follows the terminal event 1 (done)"),
    ),
    (
        "event-after-error.jsonl",
        RunError("event 2 (done) follows the terminal event 1 (error)"),
    ),
    // Well-formed lines that break contract §2: replayed; the engine's typed error is the response's outcome.
    ("empty.jsonl", ResponseError("stream ended without a terminal event")),
    (
        "only-blank-lines.jsonl",
        ResponseError("stream ended without a terminal event"),
    ),
    (
        "missing-terminal-event.jsonl",
        ResponseError("stream ended without a terminal event"),
    ),
    (
        "no-start.jsonl",
        ResponseError("event 0 (text_start): the stream did not begin with start"),
    ),
    ("second-start.jsonl", ResponseError("event 1 (start): a second start")),
    (
        "duplicate-call-ids.jsonl",
        ResponseError("event 3 (toolcall_start): tool call id \"c1\" is already used"),
    ),
    (
        "index-gap.jsonl",
        ResponseError("block started at index 2, expected the next unused index 1"),
    ),
    (
        "indices-out-of-order.jsonl",
        ResponseError("block started at index 1, expected the next unused index 0"),
    ),
    (
        "index-reused.jsonl",
        ResponseError("block started at index 0, expected the next unused index 1"),
    ),
    (
        "index-at-u64-max.jsonl",
        ResponseError("block started at index 18446744073709551615, expected"),
    ),
    (
        "delta-after-end.jsonl",
        ResponseError("event 3 (text_delta): index 0 is not open"),
    ),
    (
        "delta-for-unopened-index.jsonl",
        ResponseError("event 1 (text_delta): index 5 is not open"),
    ),
    (
        "delta-of-wrong-kind.jsonl",
        ResponseError("index 0 is a text block, not tool call"),
    ),
    (
        "done-with-open-call.jsonl",
        ResponseError("event 3 (done): done while blocks [0] are still open"),
    ),
    // Odd but valid: replayed normally.
    ("truncated-arguments.jsonl", Runs("")),
    ("arguments-not-an-object.jsonl", Runs("")),
    ("empty-id-and-name.jsonl", Runs("")),
    ("usage-overflow.jsonl", Runs("")),
    ("escaped-nul-characters.jsonl", Runs("")),
    ("crlf-line-endings.jsonl", Runs("")),
    (
        "time-at-u64-max.jsonl",
        RunError("turn 0: event 0 at_ms: 18446744073709551615 ms is more than the longest"),
    ),
];

const SCENARIOS: &[(&str, Expect<'static>)] = &[
    ("not-json.json", RunError("is not valid JSON: EOF while parsing")),
    ("empty.json", RunError("is not valid JSON: EOF while parsing")),
    ("top-level-array.json", RunError("a scenario must be a JSON object")),
    ("top-level-null.json", RunError("a scenario must be a JSON object")),
    (
        "unknown-top-level-key.json",
        RunError("unknown key nmae at the top level"),
    ),
    (
        "unknown-behavior-key.json",
        RunError("unknown key delay at tools[0].behavior"),
    ),
    (
        "tools-is-an-object.json",
        RunError("invalid type: map, expected a sequence"),
    ),
    ("tool-without-name.json", RunError("missing field `name`")),
    (
        "tool-name-is-a-number.json",
        RunError("invalid type: integer `7`, expected a string"),
    ),
    (
        "prompt-is-a-number.json",
        RunError("invalid type: integer `42`, expected a string"),
    ),
    ("duplicate-tool-names.json", RunError("tool lookup is registered twice")),
    (
        "invalid-schema.json",
        RunError("tool lookup: invalid parameters schema"),
    ),
    (
        "two-outcomes.json",
        RunError("name at most one of result, error, panic, hang"),
    ),
    (
        "turn-with-log-and-events.json",
        RunError("turn 0: name exactly one of log, events"),
    ),
    (
        "turn-with-neither.json",
        RunError("turn 0: name exactly one of log, events"),
    ),
    (
        "missing-log.json",
        RunError("does-not-exist.jsonl: No such file or directory"),
    ),
    (
        "log-is-a-directory.json",
        RunError("line 1: read error: Is a directory"),
    ),
    (
        "events-is-an-object.json",
        RunError("invalid type: map, expected a sequence"),
    ),
    (
        "bad-inline-event.json",
        RunError("turn 0: events[1]: unknown variant `bogus`"),
    ),
    (
        "event-after-done-inline.json",
        RunError("turn 0: event 2 (text_start) follows the terminal event 1 (done)"),
    ),
    (
        "negative-delay.json",
        RunError("invalid value: integer `-1`, expected u64"),
    ),
    ("unknown-execution-mode.json", RunError("unknown variant `fast`")),
    (
        "block-reason-not-a-string.json",
        RunError("invalid type: boolean `true`, expected a string"),
    ),
    ("invalid-utf8.json", RunError("not valid UTF-8")),
    (
        "raw-nul.json",
        RunError("control character (\\u0000-\\u001F) found while parsing a string"),
    ),
    ("missing-response.json", Runs("scenario has no response for request 1")),
    (
        "huge-delay.json",
        RunError("at tools[0].behavior.delay_ms: 18446744073709551615 ms is more than the longest"),
    ),
    (
        "huge-timeout.json",
        RunError("at tools[0].timeout_ms: 18446744073709551615 ms is more than the longest"),
    ),
    (
        "huge-update-time.json",
        RunError("at tools[0].behavior.updates[0].at_ms: 18446744073709551615 ms is more"),
    ),
    (
        "huge-cancel-time.json",
        RunError("at cancel_at_ms: 18446744073709551615 ms is more than the longest"),
    ),
    ("year-long-delay.json", Runs("")),
    ("zero-max-turns.json", Runs("")),
    ("zero-max-in-flight.json", Runs("")),
    (
        "hang-without-cancel.json",
        RunError("the run was stopped after 3153600000000 ms of virtual time"),
    ),
    (
        "hang-ignoring-cancel.json",
        RunError("the run was stopped after 3153600000000 ms of virtual time"),
    ),
    (
        "duplicate-ids-across-turns.json",
        RunError("turn 1: tool call id \"c1\" is already used by turn 0"),
    ),
    ("no-turns.json", Runs("scenario has no response for request 0")),
    ("nul-characters.json", Runs("")),
];

fn hostile_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/hostile")
}

/// Replays on another thread so that a panic or a hang fails the check instead of stalling the suite.
fn try_replay(path: &Path) -> Result<ReplayOutcome, String> {
    let (sender, receiver) = mpsc::channel();
    let owned = path.to_owned();
    std::thread::spawn(move || {
        let _ = sender.send(replay_file(&owned, &ReplayOptions::default()));
    });
    receiver
        .recv_timeout(Duration::from_secs(60))
        .map_err(|_| format!("{}: the replay panicked or did not finish within 60 s", path.display()))
}

fn replay(path: &Path) -> ReplayOutcome {
    try_replay(path).unwrap_or_else(|failure| panic!("{failure}"))
}

/// A scenario whose first turn is `log` (any path), with an async and a sync tool and a second turn to continue.
fn wrap_log(dir: &Path, log: &Path) -> PathBuf {
    let scenario = serde_json::json!({
        "name": log.file_name().map(|name| name.to_string_lossy().into_owned()),
        "tools": [
            {"name": "lookup", "async": true, "behavior": {"delay_ms": 5, "result": {"text": "ok"}}},
            {"name": "write", "behavior": {"delay_ms": 5}}
        ],
        "turns": [
            {"log": log},
            {"events": [{"type": "start"}, {"type": "done", "stop_reason": "stop"}]}
        ]
    });
    let path = dir.join(format!(
        "{}.scenario.json",
        log.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::fs::write(&path, serde_json::to_string(&scenario).unwrap()).unwrap();
    path
}

/// Checks one outcome against its expectation; returns a failure message.
fn check(name: &str, outcome: &ReplayOutcome, expect: Expect<'_>) -> Option<String> {
    let report: Value = serde_json::from_str(&outcome.report.to_json()).expect("the report is JSON");
    let run_error = report["error"].as_str().unwrap_or("");
    let response_error = report["requests"][0]["error"].as_str().unwrap_or("");
    let code = outcome.exit_code;
    let shown = format!("exit {code}, error {run_error:?}, response error {response_error:?}");
    let ok = match expect {
        RunError(fragment) => code == 2 && run_error.contains(fragment),
        ResponseError(fragment) => code == 0 && response_error.contains(fragment),
        Runs(fragment) => {
            code == 0
                && response_error.is_empty()
                && (fragment.is_empty() && run_error.is_empty() || !fragment.is_empty() && run_error.contains(fragment))
        }
    };
    if !ok {
        return Some(format!("{name}: expected {expect:?}, got {shown}"));
    }
    if code == 0 {
        let broken: Vec<String> = invariants::check_report(&outcome.report)
            .iter()
            .map(ToString::to_string)
            .collect();
        if !broken.is_empty() {
            return Some(format!("{name}: invariants broken: {broken:?}"));
        }
    }
    None
}

fn file_names(dir: &Path, extension: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(extension))
        .collect()
}

fn assert_table_matches_files(table: &[(&str, Expect<'_>)], dir: &Path, extension: &str) {
    let files = file_names(dir, extension);
    let listed: BTreeSet<String> = table.iter().map(|(name, _)| (*name).to_owned()).collect();
    assert_eq!(listed.len(), table.len(), "a file is listed twice");
    let unlisted: Vec<&String> = files.difference(&listed).collect();
    let missing: Vec<&String> = listed.difference(&files).collect();
    assert!(unlisted.is_empty(), "files without an expectation: {unlisted:?}");
    assert!(missing.is_empty(), "expectations without a file: {missing:?}");
}

#[test]
fn every_hostile_delta_log_gives_a_clear_error() {
    let dir = hostile_dir().join("logs");
    assert_table_matches_files(LOGS, &dir, ".jsonl");
    let temp = tempfile::tempdir().unwrap();
    let failures: Vec<String> = LOGS
        .iter()
        .filter_map(|(name, expect)| {
            let scenario = wrap_log(temp.path(), &dir.join(name));
            match try_replay(&scenario) {
                Ok(outcome) => check(name, &outcome, *expect),
                Err(failure) => Some(failure),
            }
        })
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn every_hostile_scenario_gives_a_clear_error() {
    let dir = hostile_dir().join("scenarios");
    assert_table_matches_files(SCENARIOS, &dir, ".json");
    let failures: Vec<String> = SCENARIOS
        .iter()
        .filter_map(|(name, expect)| match try_replay(&dir.join(name)) {
            Ok(outcome) => check(name, &outcome, *expect),
            Err(failure) => Some(failure),
        })
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

// ---------------------------------------------------------------------------------------------------------------
// Generated at test time: too big, or too deep, to commit
// ---------------------------------------------------------------------------------------------------------------

const START: &str = r#"{"type": "start"}"#;

fn write_lines(path: &Path, lines: &[String]) {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for line in lines {
        file.write_all(line.as_bytes()).unwrap();
        file.write_all(b"\n").unwrap();
    }
    file.flush().unwrap();
}

fn replay_log_lines(lines: &[String]) -> ReplayOutcome {
    let temp = tempfile::tempdir().unwrap();
    let log = temp.path().join("generated.jsonl");
    write_lines(&log, lines);
    replay(&wrap_log(temp.path(), &log))
}

fn expect(name: &str, outcome: &ReplayOutcome, expected: Expect<'_>) {
    if let Some(failure) = check(name, outcome, expected) {
        panic!("{failure}");
    }
}

fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn deeply_nested_arguments_are_a_clean_error_not_a_stack_overflow() {
    // 100,000 nested arrays as the `arguments` override: the line itself is refused at load.
    let call_start = r#"{"type": "toolcall_start", "index": 0, "id": "c1", "name": "lookup", "async": true}"#;
    let lines = [
        START.to_owned(),
        call_start.to_owned(),
        format!(
            r#"{{"type": "toolcall_end", "index": 0, "arguments": {{"a": {}}}}}"#,
            nested_arrays(100_000)
        ),
        r#"{"type": "done", "stop_reason": "tool_use"}"#.to_owned(),
    ];
    expect(
        "nested override",
        &replay_log_lines(&lines),
        RunError("line 3: not valid JSON: recursion limit exceeded"),
    );

    // The same nesting as streamed argument text: the line is a plain string; sealing the call parses it, and the
    // call is invalid with the parser's message.
    let text = serde_json::to_string(&nested_arrays(100_000)).unwrap();
    let lines = [
        START.to_owned(),
        call_start.to_owned(),
        format!(r#"{{"type": "toolcall_delta", "index": 0, "delta": {text}}}"#),
        r#"{"type": "toolcall_end", "index": 0}"#.to_owned(),
        r#"{"type": "done", "stop_reason": "tool_use"}"#.to_owned(),
    ];
    let outcome = replay_log_lines(&lines);
    expect("nested argument text", &outcome, Runs(""));
    let report: Value = serde_json::from_str(&outcome.report.to_json()).unwrap();
    let result = report["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "tool_result")
        .expect("the invalid call has a result");
    let text = result["text"].as_str().unwrap();
    assert!(
        text.starts_with("invalid arguments for tool lookup: recursion limit exceeded"),
        "{text}"
    );
    assert_eq!(report["tool_runs"][0]["outcome"], "invalid");
}

#[test]
fn arguments_nested_just_within_the_parser_limit_are_stored_and_read_back() {
    // The deepest `arguments` override a delta-log line accepts, then stored inside the assistant message (deeper
    // still) and read back for the report and the model context.
    let call_start = r#"{"type": "toolcall_start", "index": 0, "id": "c1", "name": "lookup", "async": true}"#;
    let mut deepest = None;
    for depth in (100..130).rev() {
        let line = format!(
            r#"{{"type": "toolcall_end", "index": 0, "arguments": {{"a": {}}}}}"#,
            nested_arrays(depth)
        );
        if serde_json::from_str::<Value>(&line).is_ok() {
            deepest = Some(line);
            break;
        }
    }
    let lines = [
        START.to_owned(),
        call_start.to_owned(),
        deepest.expect("some depth parses"),
        r#"{"type": "done", "stop_reason": "tool_use"}"#.to_owned(),
    ];
    expect("deepest override", &replay_log_lines(&lines), Runs(""));
}

#[test]
fn oversized_tool_call_arguments_end_the_response_with_an_error() {
    // Five 4 MiB argument deltas: the fifth would take the call past MAX_BLOCK_BYTES.
    let chunk = "x".repeat(4 * 1024 * 1024);
    let mut lines = vec![
        START.to_owned(),
        r#"{"type": "toolcall_start", "index": 0, "id": "c1", "name": "lookup", "async": true}"#.to_owned(),
    ];
    for _ in 0..5 {
        lines.push(format!(
            r#"{{"type": "toolcall_delta", "index": 0, "delta": "{chunk}"}}"#
        ));
    }
    lines.push(r#"{"type": "toolcall_end", "index": 0}"#.to_owned());
    lines.push(r#"{"type": "done", "stop_reason": "tool_use"}"#.to_owned());
    let outcome = replay_log_lines(&lines);
    expect(
        "oversized arguments",
        &outcome,
        ResponseError(&format!(
            "event 6 (toolcall_delta): tool call arguments at index 0 would exceed the limit of {MAX_BLOCK_BYTES} bytes"
        )),
    );
    assert!(
        outcome.report.tool_runs.is_empty(),
        "the oversized call was not admitted"
    );
}

#[test]
fn a_scenario_over_the_size_limit_is_refused_before_it_is_parsed() {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("big.json");
    let padding = "x".repeat(usize::try_from(MAX_SCENARIO_BYTES).unwrap());
    std::fs::write(&path, format!(r#"{{"description": "{padding}"}}"#)).unwrap();
    expect(
        "big scenario",
        &replay(&path),
        RunError(&format!("the file is larger than the {MAX_SCENARIO_BYTES}-byte limit")),
    );
}

#[cfg(unix)]
#[test]
fn endless_devices_are_read_only_up_to_the_limits() {
    // A scenario that is an endless stream of NUL bytes, and a delta log that is one.
    expect(
        "/dev/zero as a scenario",
        &replay(Path::new("/dev/zero")),
        RunError(&format!("the file is larger than the {MAX_SCENARIO_BYTES}-byte limit")),
    );
    let temp = tempfile::tempdir().unwrap();
    expect(
        "/dev/zero as a delta log",
        &replay(&wrap_log(temp.path(), Path::new("/dev/zero"))),
        RunError(&format!("line 1: line is longer than the {MAX_LINE_BYTES}-byte limit")),
    );
}

#[test]
fn a_scenario_that_is_a_directory_or_missing_cannot_be_read() {
    let temp = tempfile::tempdir().unwrap();
    expect("directory", &replay(temp.path()), RunError("cannot read"));
    expect(
        "missing",
        &replay(&temp.path().join("nope.json")),
        RunError("No such file or directory"),
    );
}

#[test]
fn scenario_json_nested_past_the_recursion_limit_is_a_clean_error() {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("deep.json");
    std::fs::write(&path, format!(r#"{{"expect": {}}}"#, nested_arrays(100_000))).unwrap();
    expect("deep scenario", &replay(&path), RunError("recursion limit exceeded"));
}

#[test]
fn delta_logs_over_the_total_limit_are_refused() {
    let temp = tempfile::tempdir().unwrap();
    // One log larger than the whole budget: refused from its size, before reading it (the file is sparse).
    let big = temp.path().join("big.jsonl");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(MAX_DELTA_LOG_BYTES + 1)
        .unwrap();
    let limit = format!("the scenario's delta logs are larger than the {MAX_DELTA_LOG_BYTES}-byte limit");
    expect("sparse log", &replay(&wrap_log(temp.path(), &big)), RunError(&limit));

    // A valid log of a little over half the budget, named by two turns: the second turn is over.
    let half = temp.path().join("half.jsonl");
    let chunk = "x".repeat(7 * 1024 * 1024);
    let mut lines = vec![START.to_owned(), r#"{"type": "text_start", "index": 0}"#.to_owned()];
    let mut size = 0;
    while size <= MAX_DELTA_LOG_BYTES / 2 {
        lines.push(format!(r#"{{"type": "text_delta", "index": 0, "delta": "{chunk}"}}"#));
        size += chunk.len() as u64;
    }
    write_lines(&half, &lines);
    let scenario = temp.path().join("twice.json");
    let turn = serde_json::json!({"log": half});
    std::fs::write(&scenario, serde_json::json!({"turns": [turn, turn]}).to_string()).unwrap();
    let outcome = replay(&scenario);
    expect(
        "log named twice",
        &outcome,
        RunError(&format!("turn 1: {}", half.display())),
    );
    expect("log named twice", &outcome, RunError(&limit));
}

// ---------------------------------------------------------------------------------------------------------------
// A 50 MB single line, with the memory it costs measured in a child process
// ---------------------------------------------------------------------------------------------------------------

const CHILD_ENV: &str = "HEADSTART_HOSTILE_CHILD_LOG";

/// The peak resident set size of this process, in bytes (`VmHWM`).
#[cfg(target_os = "linux")]
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|line| line.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Run by [`a_50_mb_line_is_refused_in_bounded_memory`] in a child process (it does nothing otherwise): replays the
/// log named by the environment and prints the growth of the peak RSS.
#[cfg(target_os = "linux")]
#[test]
fn child_replays_a_huge_line() {
    let Some(log) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let log = PathBuf::from(log);
    let scenario = wrap_log(log.parent().unwrap(), &log);
    let before = peak_rss();
    let outcome = replay_file(&scenario, &ReplayOptions::default());
    let growth = peak_rss().saturating_sub(before);
    println!(
        "exit={} growth={growth} error={:?}",
        outcome.exit_code, outcome.report.error
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_50_mb_line_is_refused_in_bounded_memory() {
    let temp = tempfile::tempdir().unwrap();
    let log = temp.path().join("huge-line.jsonl");
    {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&log).unwrap());
        file.write_all(b"{\"type\": \"start\"}\n{\"type\": \"text_delta\", \"index\": 0, \"delta\": \"")
            .unwrap();
        let block = vec![b'x'; 1024 * 1024];
        for _ in 0..50 {
            file.write_all(&block).unwrap();
        }
        file.write_all(b"\"}\n").unwrap();
        file.flush().unwrap();
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "child_replays_a_huge_line",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &log)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|line| line.find("exit=").map(|at| &line[at..]))
        .unwrap_or_else(|| panic!("no result from the child: {stdout}"));
    assert!(line.starts_with("exit=2 "), "{line}");
    assert!(
        line.contains(&format!("line 2: line is longer than the {MAX_LINE_BYTES}-byte limit")),
        "{line}"
    );
    let growth: u64 = line
        .split_whitespace()
        .find_map(|field| field.strip_prefix("growth="))
        .unwrap()
        .parse()
        .unwrap();
    // The reader holds at most one capped line (8 MiB) plus its buffers; reading the 50 MB line whole would not fit.
    assert!(
        growth < 2 * MAX_LINE_BYTES as u64,
        "peak RSS grew by {growth} bytes while refusing a 50 MB line"
    );
    println!("peak RSS growth while refusing a 50 MB line: {growth} bytes");
}
