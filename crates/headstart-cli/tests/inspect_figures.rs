//! `headstart inspect --json` and `--stats --json` on a store written with exact times: each call's headroom,
//! seal-to-start, run time and overlap, each response's tool round beside batching's, and their spread per model.

use std::path::{Path, PathBuf};
use std::process::Command;

use headstart::store::{AdmittedCall, CallKey, SessionId, SqliteOptions, SqliteStore, TranscriptStore};
use headstart::{StopReason, UserMessage};
use headstart_store::conformance::data::{call, finished, fragment, prefix, result};
use serde_json::{json, Value};

/// One response of `model` (times in µs from the prompt at 0): call `a` sealed at 15 ms (when `sealed`),
/// committed early at 20 ms, run 22–60 ms; sync call `b` sealed at 90 ms, admitted with the terminal fragment at
/// 100 ms (the stream end), run 105–130 ms.
async fn write_session(store: &SqliteStore, model: &str, sealed: bool) -> SessionId {
    let seal = |at_us: i64| sealed.then_some(at_us);
    let session = store.create_session(0).await.expect("session");
    store
        .append_user(&session, &UserMessage::new("go"), 0)
        .await
        .expect("prompt");
    let (a, b) = (call("a", "lookup"), call("b", "write"));
    let mut first = prefix("turn-0", "checking", std::slice::from_ref(&a));
    first.model = Some(model.to_owned());
    let admit = |id: &str, name: &str, sealed_at_us| AdmittedCall {
        call_id: id.to_owned(),
        tool_name: name.to_owned(),
        sealed_at_us,
    };
    store
        .commit_fragment(&session, 0, &first, &[admit("a", "lookup", seal(15_000))], 20_000)
        .await
        .expect("prefix");
    store
        .append_tool_result(&session, 0, &result(&a, "A"), finished(Some(22_000)), 60_000)
        .await
        .expect("a's result");
    let mut last = fragment(
        "turn-0",
        StopReason::ToolUse,
        "and writing",
        std::slice::from_ref(&b),
        Default::default(),
    );
    last.model = Some(model.to_owned());
    store
        .commit_fragment(&session, 0, &last, &[admit("b", "write", seal(90_000))], 100_000)
        .await
        .expect("terminal fragment");
    store
        .mark_started(&session, &CallKey::new(0, "b"), 105_000)
        .await
        .expect("b started");
    store
        .append_tool_result(&session, 0, &result(&b, "B"), finished(Some(105_000)), 130_000)
        .await
        .expect("b's result");
    session
}

/// What `headstart inspect DB ARGS` prints, after checking it succeeded.
fn inspect_text(db: &Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_headstart"))
        .arg("inspect")
        .arg(db)
        .args(args)
        .output()
        .expect("the headstart binary runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// `headstart inspect DB --json EXTRA`, parsed.
fn inspect(db: &Path, extra: &[&str]) -> Value {
    let args: Vec<&str> = std::iter::once("--json").chain(extra.iter().copied()).collect();
    serde_json::from_str(&inspect_text(db, &args)).expect("JSON")
}

/// A store holding two sessions, `alpha`'s with seal times and `beta`'s without; its folder and path.
fn store_with_two_sessions() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("figures.db");
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    runtime.block_on(async {
        let store = SqliteStore::open(&db, SqliteOptions::default()).expect("store");
        write_session(&store, "alpha", true).await;
        write_session(&store, "beta", false).await;
    });
    (dir, db)
}

#[test]
fn inspect_json_gives_every_call_and_response_its_figures() {
    let (_dir, db) = store_with_two_sessions();
    let sessions = inspect(&db, &[]);
    let figures = &sessions[0]["figures"];
    assert_eq!(
        figures["calls"],
        json!([
            {"id": "a", "name": "lookup", "request": 0, "sealed_ms": 15.0, "headroom_ms": 85.0,
             "seal_to_start_ms": 7.0, "run_ms": 38.0, "overlap_ms": 38.0},
            {"id": "b", "name": "write", "request": 0, "sealed_ms": 90.0, "headroom_ms": 10.0,
             "seal_to_start_ms": 15.0, "run_ms": 25.0, "overlap_ms": 0.0},
        ])
    );
    // Settled at 130 ms, 30 after the stream end; batching would have run a 100–138 ms.
    assert_eq!(
        figures["responses"],
        json!([{"request": 0, "model": "alpha", "calls": 2, "stream_end_ms": 100.0, "tool_round_ms": 30.0,
                "batching_round_ms": 38.0}])
    );
    let unsealed = &sessions[1]["figures"]["calls"][0];
    assert_eq!(
        (
            &unsealed["sealed_ms"],
            &unsealed["headroom_ms"],
            &unsealed["overlap_ms"]
        ),
        (&Value::Null, &Value::Null, &json!(38.0)),
        "a run stored without its seal time has no headroom"
    );
}

#[test]
fn inspect_stats_summarizes_the_figures_per_model() {
    let (_dir, db) = store_with_two_sessions();
    let stats = inspect(&db, &["--stats"]);
    assert_eq!(stats["grouped_by"], "model (the provider is not stored)");
    let spread = |count: usize, median: Value, p95: Value| json!({"count": count, "median": median, "p95": p95});
    assert_eq!(
        stats["groups"],
        json!([
            {"model": "alpha", "responses": 1, "calls": 2,
             "tool_round_ms": spread(1, json!(30.0), json!(30.0)),
             "batching_round_ms": spread(1, json!(38.0), json!(38.0)),
             "overlap_ms": spread(2, json!(0.0), json!(38.0)),
             "headroom_ms": spread(2, json!(10.0), json!(85.0))},
            {"model": "beta", "responses": 1, "calls": 2,
             "tool_round_ms": spread(1, json!(30.0), json!(30.0)),
             "batching_round_ms": spread(1, json!(38.0), json!(38.0)),
             "overlap_ms": spread(2, json!(0.0), json!(38.0)),
             "headroom_ms": spread(0, Value::Null, Value::Null)},
        ])
    );
}

#[test]
fn the_human_view_shows_each_calls_figures_and_the_responses_round() {
    let (_dir, db) = store_with_two_sessions();
    let sessions = inspect(&db, &[]);
    let id = sessions[0]["session"].as_str().expect("a session id");
    let text = inspect_text(&db, &["--session", id]);
    assert!(
        text.contains("sealed +15 ms · headroom 85 ms · seal→start 7 ms · overlap 38 of 38 ms"),
        "{text}"
    );
    assert!(
        text.contains("sealed +90 ms · headroom 10 ms · seal→start 15 ms · overlap 0 of 25 ms"),
        "{text}"
    );
    assert!(
        text.contains("tool round 30 ms (end-of-stream batching: 38 ms)"),
        "{text}"
    );
}

#[test]
fn inspect_stats_as_text_names_each_figure_with_its_unit() {
    let (_dir, db) = store_with_two_sessions();
    let text = inspect_text(&db, &["--stats"]);
    assert!(text.contains("alpha: 1 responses, 2 calls"), "{text}");
    assert!(
        text.contains("headroom:                       median 10 ms, p95 85 ms (2 samples)"),
        "{text}"
    );
    assert!(text.contains("beta: 1 responses, 2 calls"), "{text}");
}
