//! `headstart replay` into a transcript file, then `headstart inspect` and `headstart timeline` on it: the human
//! view shows every call with its result, the SVG has one bar (`<rect>`) per executed call and names every call.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use headstart::core::model::{AssistantMessage, ContentBlock, ToolArguments, ToolCall, Usage};
use headstart::store::{AdmittedCall, CallKey, SqliteOptions, SqliteStore, TranscriptStore};
use headstart::{StopReason, UserMessage};
use serde_json::{json, Value};

/// The repository's `tests/` folder (crates/headstart-cli → repository root).
fn repo_tests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests")
}

fn headstart(args: &[&str], cwd: &Path) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_headstart"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("the headstart binary runs");
    assert!(
        output.status.success(),
        "headstart {args:?} failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("utf-8 output")
}

/// What the report says about one admitted call.
struct Call {
    id: String,
    executed: bool,
    result: Option<String>,
}

fn calls_of(report: &Value) -> Vec<Call> {
    let transcript = report["transcript"].as_array().expect("transcript");
    report["tool_runs"]
        .as_array()
        .expect("tool_runs")
        .iter()
        .map(|run| {
            let id = run["id"].as_str().expect("id").to_owned();
            let result = transcript
                .iter()
                .find(|entry| entry["role"] == "tool_result" && entry["tool_call_id"] == id.as_str())
                .map(|entry| entry["text"].as_str().unwrap_or_default().to_owned());
            Call {
                executed: !run["started_ms"].is_null(),
                id,
                result,
            }
        })
        .collect()
}

fn assert_svg(svg: &str, calls: &[Call]) {
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""), "{svg}");
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
    let executed = calls.iter().filter(|call| call.executed).count();
    assert_eq!(svg.matches("<rect").count(), executed, "one <rect> per executed call");
    for call in calls {
        assert!(
            svg.contains(&format!(">{}</tspan>", call.id)),
            "lane label for {}",
            call.id
        );
        if call.executed {
            assert!(
                svg.contains(&format!("data-call-id=\"{}\"", call.id)),
                "bar for {}",
                call.id
            );
        }
    }
    assert!(svg.contains("end-of-stream batching"));
}

/// Replays `scenario` into a transcript file, then checks `inspect` and `timeline` (from the file and from the
/// report). Returns the SVGs drawn from the transcript file and from the report.
fn replay_inspect_and_draw(scenario: &Path, dir: &Path) -> (String, String) {
    let db = dir.join("run.db");
    let report_path = dir.join("report.json");
    headstart(
        &[
            "replay",
            scenario.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
            "--report",
            report_path.to_str().unwrap(),
        ],
        dir,
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    assert!(report["error"].is_null(), "{report}");
    let calls = calls_of(&report);
    assert!(!calls.is_empty());

    let inspect = stdout(&headstart(&["inspect", db.to_str().unwrap()], dir));
    assert!(inspect.contains("── request 0 · response "), "{inspect}");
    for call in &calls {
        let at = inspect
            .find(&format!("call {} ", call.id))
            .unwrap_or_else(|| panic!("inspect shows {}:\n{inspect}", call.id));
        if let Some(result) = &call.result {
            let first_line = result.lines().next().unwrap_or_default();
            let shown = inspect[at..].find(first_line).expect("the result is shown");
            let next_call = inspect[at + 1..]
                .find("\n                   call ")
                .map_or(usize::MAX, |i| i + 1);
            assert!(
                shown < next_call,
                "the result of {} sits under its call:\n{inspect}",
                call.id
            );
        }
    }
    // --json keeps its shape.
    let json: Value = serde_json::from_str(&stdout(&headstart(&["inspect", "--json", db.to_str().unwrap()], dir)))
        .expect("inspect --json is JSON");
    assert_eq!(json[0]["transcript"], report["transcript"]);

    let out = dir.join("from-db.svg");
    let printed = stdout(&headstart(
        &["timeline", db.to_str().unwrap(), "--out", out.to_str().unwrap()],
        dir,
    ));
    assert_eq!(printed.lines().next(), out.to_str(), "prints the path");
    let svg = std::fs::read_to_string(&out).unwrap();
    assert_svg(&svg, &calls);

    let from_report = dir.join("from-report.svg");
    headstart(
        &[
            "timeline",
            "--report",
            report_path.to_str().unwrap(),
            "--out",
            from_report.to_str().unwrap(),
        ],
        dir,
    );
    let report_svg = std::fs::read_to_string(&from_report).unwrap();
    assert_svg(&report_svg, &calls);

    // Default output: timeline.svg in the current directory.
    let printed = stdout(&headstart(&["timeline", db.to_str().unwrap()], dir));
    assert_eq!(printed.lines().next(), Some("timeline.svg"));
    assert_eq!(std::fs::read_to_string(dir.join("timeline.svg")).unwrap(), svg);
    (svg, report_svg)
}

#[test]
fn corpus_scenarios_replay_inspect_and_draw() {
    let scenarios = repo_tests().join("scenarios");
    let dir = tempfile::tempdir().unwrap();
    let (svg, report_svg) = replay_inspect_and_draw(&scenarios.join("01-two-async-overlap.json"), dir.path());
    // Both lookups ran while the model streamed: batching would have started call_1 (300 ms) at the stream end.
    assert!(svg.contains("saved 300 ms (40%)"), "{svg}");
    // The transcript file and the report draw the same picture; only the title differs.
    let untitled = |svg: &str| {
        svg.lines()
            .filter(|line| !line.contains("headstart timeline"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(untitled(&svg), untitled(&report_svg));

    for name in [
        "10-panic-and-error.json",
        "08-immediate-outcomes.json",
        "11-external-cancel.json",
    ] {
        let dir = tempfile::tempdir().unwrap();
        replay_inspect_and_draw(&scenarios.join(name), dir.path());
    }
}

#[test]
fn inline_scenario_with_mixed_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let call = |index: u32, at: u32, id: &str, name: &str, args: &str| {
        vec![
            json!({"at_ms": at, "type": "toolcall_start", "index": index, "id": id, "name": name}),
            json!({"at_ms": at, "type": "toolcall_delta", "index": index, "delta": args}),
            json!({"at_ms": at, "type": "toolcall_end", "index": index}),
        ]
    };
    let mut events = vec![json!({"at_ms": 0, "type": "start"})];
    events.extend(call(0, 10, "ok_1", "lookup", "{\"q\": \"a\"}"));
    events.extend(call(1, 20, "err_1", "lookup", "{\"q\": \"b\"}"));
    events.extend(call(2, 30, "blocked_1", "lookup", "{\"q\": \"c\"}"));
    events.push(json!({"at_ms": 200, "type": "done", "stop_reason": "tool_use", "usage": {"input": 5, "output": 7}}));
    let scenario = json!({
        "name": "mixed <outcomes> & more",
        "prompt": "go",
        "tools": [{
            "name": "lookup",
            "async": true,
            "behavior": {"delay_ms": 120, "result": {"text": "first line\nsecond line"}},
            "by_call": {"err_1": {"delay_ms": 40, "error": "no such thing"}}
        }],
        "hooks": {"block": {"blocked_1": "needs approval"}},
        "turns": [
            {"events": events},
            {"events": [{"type": "start"}, {"at_ms": 5, "type": "done", "stop_reason": "stop", "usage": {}}]}
        ]
    });
    let path = dir.path().join("mixed.json");
    std::fs::write(&path, serde_json::to_string_pretty(&scenario).unwrap()).unwrap();
    let (svg, report_svg) = replay_inspect_and_draw(&path, dir.path());
    assert!(
        report_svg.contains("mixed &lt;outcomes&gt; &amp; more"),
        "the scenario name is escaped"
    );
    assert!(svg.contains(r#"data-call-id="err_1" data-outcome="error""#));
    assert!(svg.contains("blocked · not run"));

    let inspect = stdout(&headstart(&["inspect", "run.db"], dir.path()));
    assert!(
        inspect.contains("error · admitted +20 ms · ran +20 ms → +60 ms (40 ms)"),
        "{inspect}"
    );
    assert!(inspect.contains("ERROR: no such thing"), "{inspect}");
    assert!(
        inspect.contains("blocked · admitted +30 ms · never started"),
        "{inspect}"
    );
    assert!(inspect.contains("usage 5 in / 7 out (total 12)"), "{inspect}");
}

/// A session cut off mid-run (as after a crash): one call started, one only admitted, neither has a result.
#[test]
fn unfinished_calls_are_flagged_and_drawn() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crashed.db");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&db, SqliteOptions::default()).unwrap();
        let session = store.create_session(0).await.unwrap();
        store.append_user(&session, &UserMessage::new("go"), 0).await.unwrap();
        let call = |id: &str| {
            ContentBlock::ToolCall(ToolCall {
                id: id.to_owned(),
                name: "lookup".to_owned(),
                arguments: ToolArguments::default(),
                provider_async: false,
            })
        };
        let fragment = AssistantMessage {
            turn_id: "turn-a".to_owned(),
            stop_reason: StopReason::ToolUse,
            content: vec![ContentBlock::text("checking"), call("run_1"), call("wait_1")],
            usage: Usage::default(),
            model: None,
            error_message: None,
        };
        let admitted: Vec<AdmittedCall> = ["run_1", "wait_1"]
            .iter()
            .map(|id| AdmittedCall {
                call_id: (*id).to_owned(),
                tool_name: "lookup".to_owned(),
                sealed_at_us: None,
            })
            .collect();
        store
            .commit_fragment(&session, 0, &fragment, &admitted, 10_000)
            .await
            .unwrap();
        store
            .mark_started(&session, &CallKey::new(0, "run_1"), 12_000)
            .await
            .unwrap();
    });

    let inspect = stdout(&headstart(&["inspect", db.to_str().unwrap()], dir.path()));
    assert!(
        inspect.contains("UNFINISHED (started, no result) · admitted +10 ms · started +12 ms"),
        "{inspect}"
    );
    assert!(
        inspect.contains("UNFINISHED (admitted, never started, no result) · admitted +10 ms"),
        "{inspect}"
    );
    assert!(inspect.contains("! 2 UNFINISHED calls (admitted, no result): run_1 lookup (started), wait_1"));

    let out = dir.path().join("crashed.svg");
    headstart(
        &["timeline", db.to_str().unwrap(), "--out", out.to_str().unwrap()],
        dir.path(),
    );
    let svg = std::fs::read_to_string(&out).unwrap();
    assert_eq!(svg.matches("<rect").count(), 1, "only run_1 started");
    assert!(svg.contains(r#"data-call-id="run_1" data-outcome="unfinished""#));
    assert!(svg.contains("unfinished (started, no result)"));
    assert!(svg.contains("unfinished (admitted, never started)"));
}
