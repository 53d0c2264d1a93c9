//! `headstart worker` on a real model, offline: the worker talks to a local server
//! (`headstart_providers::replay_server`) replaying Chat Completions streams, as `--provider openai-compatible
//! --base-url` would to vLLM or Ollama, with the built-in tools in a working directory of its own.
//!
//! - Three submitted prompts (the third with its own `--model` and `--system`) are answered, each calling
//!   `read_file` early: the call is admitted by a fragment committed before its response ended, and its result is
//!   the file's text. `inspect --json` shows all three completed with the recorded answers and the third one's
//!   settings; `inspect --session ID` shows the answer; the server saw the third session's model and system prompt,
//!   the worker's own for the others. On a SQLite file, and on PostgreSQL when a cluster can be had.
//! - A missing key refuses the worker at start (exit 2), and so do `--scenario` with `--provider`, neither of
//!   them, and a model flag with `--scenario`: nothing is created.
//!
//! Every worker process is killed when its test ends ([`ChildGuard`]); no assertion depends on timing.
#![cfg(unix)]

mod support;

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use headstart_postgres::testing;
use headstart_providers::replay_server::{ReplayServer, Reply};
use serde_json::{json, Value};
use support::{openai_chat, workdir, ChildGuard, DELAY};

/// The prompts, in submission order; the third session is submitted with its own model and system prompt.
const PROMPTS: [&str; 3] = ["What do the notes say?", "And again?", "Once more, briefly?"];
const OWN_MODEL: &str = "other-model";
const OWN_SYSTEM: &str = "Answer briefly.";
/// The worker's own model and system prompt.
const WORKER_MODEL: &str = "m";
const WORKER_SYSTEM: &str = "You read notes.";

/// The recorded answer to session `n` (from 1).
fn answer(n: usize) -> String {
    format!("Answer {n}: the notes say hello.")
}

/// What the server replays, in order: for each session, a response calling `read_file` (early: it has no side
/// effect), then the answer. The worker runs one session at a time, oldest first, so this order is the sessions'.
fn replies() -> Vec<Reply> {
    (1..=PROMPTS.len())
        .flat_map(|n| {
            let call_id = format!("call_{n}");
            [
                Reply::Events(openai_chat(
                    None,
                    &[(&call_id, "read_file", json!({"path": "notes.txt"}))],
                )),
                Reply::Events(openai_chat(Some(&answer(n)), &[])),
            ]
        })
        .collect()
}

/// `headstart ARGS…` to its end, on a blocking thread (at most two minutes), its output printed.
async fn headstart(args: Vec<String>) -> Output {
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_headstart"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .expect("run headstart")
    });
    let output = tokio::time::timeout(Duration::from_secs(120), output)
        .await
        .expect("headstart finished")
        .expect("the thread ran");
    eprintln!("stdout:\n{}", String::from_utf8_lossy(&output.stdout));
    eprintln!("stderr:\n{}", String::from_utf8_lossy(&output.stderr));
    output
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| (*arg).to_owned()).collect()
}

/// Submits `prompt` (with `extra` flags) and returns the new session's id.
async fn submit(store: &str, prompt: &str, extra: &[&str]) -> String {
    let mut args = strings(&["submit", "--store", store]);
    args.extend(strings(extra));
    args.push(prompt.to_owned());
    let output = headstart(args).await;
    assert!(output.status.success(), "submit failed");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// `inspect STORE --json`, parsed.
async fn inspect_json(store: &str) -> Vec<Value> {
    let output = headstart(strings(&["inspect", store, "--json"])).await;
    assert!(output.status.success(), "inspect failed");
    let parsed: Value = serde_json::from_slice(&output.stdout).expect("inspect prints JSON");
    parsed.as_array().expect("an array of sessions").clone()
}

/// Starts `headstart worker` on `store`, answering from `server`, with `dir` as its working directory; its
/// standard output and error go to files in `logs`.
fn start_worker(store: &str, server: &ReplayServer, dir: &Path, logs: &Path) -> ChildGuard {
    ChildGuard::spawn(
        Command::new(env!("CARGO_BIN_EXE_headstart"))
            .current_dir(dir)
            .args(["worker", "--store", store, "--id", "w1", "--concurrency", "1"])
            .args(["--poll-ms", "50", "--provider", "openai-compatible", "--base-url"])
            .arg(server.url("/v1"))
            .args(["--model", WORKER_MODEL, "--system", WORKER_SYSTEM, "--workdir"])
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(File::create(logs.join("worker.out")).expect("stdout file"))
            .stderr(File::create(logs.join("worker.log")).expect("stderr file")),
    )
    .expect("start the worker")
}

/// The text blocks of a transcript entry, joined.
fn text_of(entry: &Value) -> String {
    entry["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect()
}

/// Checks one answered session in `inspect --json`: the prompt, a `read_file` call admitted by a fragment
/// committed before its response's last one (it started early), its result, and the recorded answer.
fn check_answered(session: &Value, n: usize) {
    assert_eq!(session["state"], "completed", "{session:#}");
    assert_eq!(session["owner"], "w1");
    let transcript = session["transcript"].as_array().expect("a transcript");
    assert_eq!(transcript[0]["text"], PROMPTS[n - 1]);
    let assistant = |request: u64| -> Vec<&Value> {
        transcript
            .iter()
            .filter(|entry| entry["role"] == "assistant" && entry["request"] == request)
            .collect()
    };
    let first = assistant(0);
    let with_call = first
        .iter()
        .find(|entry| {
            entry["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|block| block["type"] == "tool_call"))
        })
        .expect("request 0 holds the call");
    let last = first.last().expect("request 0 was answered");
    assert!(
        with_call["seq"].as_u64() < last["seq"].as_u64(),
        "the call's fragment was committed before the response ended (it started early): {first:#?}"
    );
    let results: Vec<&Value> = transcript
        .iter()
        .filter(|entry| entry["role"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 1);
    assert_eq!(
        (&results[0]["tool_name"], &results[0]["text"], &results[0]["is_error"]),
        (&json!("read_file"), &json!("hello from the notes"), &json!(false))
    );
    let answered: String = assistant(1).iter().map(|entry| text_of(entry)).collect();
    assert_eq!(answered, answer(n));
}

/// The whole story on `store` (a SQLite path or a PostgreSQL URL).
async fn three_sessions_are_answered_on(store: &str) {
    let server = ReplayServer::start(replies(), HashMap::new(), DELAY).await.unwrap();
    let dir = workdir();
    let logs = tempfile::tempdir().unwrap();
    let mut ids = Vec::new();
    for prompt in &PROMPTS[..2] {
        ids.push(submit(store, prompt, &[]).await);
    }
    ids.push(submit(store, PROMPTS[2], &["--model", OWN_MODEL, "--system", OWN_SYSTEM]).await);

    let mut worker = start_worker(store, &server, dir.path(), logs.path());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let sessions = loop {
        let sessions = inspect_json(store).await;
        if sessions
            .iter()
            .all(|session| session["state"] == "completed" || session["state"] == "failed")
        {
            break sessions;
        }
        let log = std::fs::read_to_string(logs.path().join("worker.log")).unwrap_or_default();
        assert!(tokio::time::Instant::now() < deadline, "unanswered; worker log:\n{log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    worker.signal("TERM");
    let status = tokio::task::spawn_blocking(move || worker.wait())
        .await
        .expect("waited");
    let log = std::fs::read_to_string(logs.path().join("worker.log")).unwrap_or_default();
    eprintln!("worker log:\n{log}");
    assert!(status.success(), "{status:?}");
    let totals: Value =
        serde_json::from_str(std::fs::read_to_string(logs.path().join("worker.out")).unwrap().trim()).unwrap();
    assert_eq!(
        (&totals["completed"], &totals["failed"]),
        (&json!(3), &json!(0)),
        "{totals}"
    );

    let listed: Vec<&str> = sessions
        .iter()
        .filter_map(|session| session["session"].as_str())
        .collect();
    assert_eq!(listed, ids.iter().map(String::as_str).collect::<Vec<_>>());
    for (n, session) in (1..).zip(&sessions) {
        check_answered(session, n);
    }
    let none = json!({"system": null, "model": null});
    assert_eq!(sessions[0]["settings"], none);
    assert_eq!(sessions[1]["settings"], none);
    assert_eq!(
        sessions[2]["settings"],
        json!({"system": OWN_SYSTEM, "model": OWN_MODEL})
    );

    // The requests: the worker's model and system prompt, but the third session's own for the third.
    let requests = server.model_requests();
    assert_eq!(requests.len(), 6);
    for (at, request) in requests.iter().enumerate() {
        let (model, system) = if at >= 4 {
            (OWN_MODEL, OWN_SYSTEM)
        } else {
            (WORKER_MODEL, WORKER_SYSTEM)
        };
        assert_eq!(request.body["model"], model, "request {at}");
        assert_eq!(
            request.body["messages"][0],
            json!({"role": "system", "content": system}),
            "request {at}"
        );
    }

    // `inspect --session ID` shows the session: its settings and its answer.
    let shown = headstart(strings(&["inspect", store, "--session", &ids[2]])).await;
    assert!(shown.status.success());
    let shown = String::from_utf8_lossy(&shown.stdout);
    for expected in [
        format!("session {} (completed by w1)", ids[2]),
        format!("model: {OWN_MODEL}"),
        format!("system prompt: {OWN_SYSTEM}"),
        answer(3),
        "hello from the notes".to_owned(),
    ] {
        assert!(shown.contains(&expected), "{expected:?} in:\n{shown}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_on_a_real_model_answers_submitted_prompts_on_sqlite() {
    let temp = tempfile::tempdir().unwrap();
    let store = temp.path().join("queue.db").to_string_lossy().into_owned();
    three_sessions_are_answered_on(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_on_a_real_model_answers_submitted_prompts_on_postgresql() {
    let Some(database) = testing::database().await else {
        return;
    };
    three_sessions_are_answered_on(database.url()).await;
}

/// `headstart worker ARGS…` on a store that does not exist yet: exit 2, one message naming `expected`, nothing
/// created.
async fn refused_at_start(args: &[&str], expected: &str) {
    let temp = tempfile::tempdir().unwrap();
    let db = temp.path().join("queue.db").to_string_lossy().into_owned();
    let mut all = strings(&["worker", "--store", &db, "--id", "w1"]);
    all.extend(strings(args));
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_headstart"))
            .args(&all)
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .output()
            .expect("run headstart")
    })
    .await
    .expect("ran");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(expected), "{args:?}: {expected:?} in {stderr}");
    assert!(!Path::new(&db).exists(), "{args:?}: a refused worker created its store");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_refuses_the_worker_at_start() {
    refused_at_start(&["--provider", "openai", "--model", "m"], "OPENAI_API_KEY").await;
    refused_at_start(&["--provider", "openai-compatible", "--model", "m"], "needs --base-url").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_runs_a_scenario_or_a_provider_never_both() {
    refused_at_start(
        &["--scenario", "agent.json", "--provider", "openai", "--model", "m"],
        "cannot be used with",
    )
    .await;
    refused_at_start(&["--scenario", "agent.json", "--workdir", "."], "cannot be used with").await;
    refused_at_start(&[], "--provider").await;
    refused_at_start(&["--provider", "openai"], "--model").await;
    refused_at_start(&["--model", "m"], "--provider").await;
    refused_at_start(
        &["--provider", "openai", "--model", "m", "--touch-dir", "t"],
        "cannot be used with",
    )
    .await;
}
