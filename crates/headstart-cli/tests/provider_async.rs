//! Provider-async tools (issue 30, declaring them): `headstart run --provider openai-responses --provider-async`
//! against the replay server speaking OpenAI's async tool calling as recorded from GPT-6 Astra: the call item
//! carries `async: true`, the model goes on (a commentary message, paced), and `response.completed` ends the
//! response with the call's result still to deliver.
//!
//! - The server answers as the API does (`replay_server::responses_input`): a request with an output for an unknown
//!   call, an output twice, or a sync call without its output gets a 400.
//! - Every request declares the built-in tools `async: true`; the call starts at its seal, at least 600 ms (of a
//!   1.2 s tail of text) before the response's terminal commit; the next request carries the call item back with
//!   its `async: true` and exactly one `function_call_output` for it, after it; the stored call keeps the marker.
//! - Without `--provider-async`, no definition says `async`; with another provider, the flag is refused.
//! - The loop (issue 30, part 2): a `fetch_url` outliving two responses reaches the model once, in the request after
//!   it was ready, at its end, through `run` and through `worker`; `inspect` and `timeline` name that request; killed
//!   with the fetch pending, `resume` delivers exactly one (interrupted) result, and a second worker taking the
//!   session over exactly one (the fetch run again: a worker re-executes idempotent calls).
//! - Through Restate (`headstart restate serve --provider-async` against a real `restate-server`, as
//!   `tests/restate.rs` starts it): the same fetch, outliving two responses, is delivered once, last, in request 3.

use std::collections::HashMap;
use std::time::Duration;

use headstart::core::{ContentBlock, Message};
use headstart::{SessionId, SqliteStore, TranscriptStore};
use headstart_providers::replay_server::responses_input::Checked;
use headstart_providers::replay_server::{responses_stream, ReplayServer, Reply, Route, SeenRequest};
use headstart_testkit::invariants::check_session;
use serde_json::{json, Value};

mod support;
use support::{command, event, page_after, run_to_end, terminal_commit_us, workdir};

#[cfg(all(unix, feature = "restate"))]
#[path = "restate/harness.rs"]
mod harness;

/// Each event of the first response is sent this long after the one before.
const PACE: Duration = Duration::from_millis(60);
/// Text deltas after the call: the model goes on for about `TAIL × PACE` (1.2 s) after the call is sealed.
const TAIL: usize = 20;

/// A Responses stream as GPT-6 Astra sends it for async calls: each `function_call` item with `async: true`, then
/// a commentary message of `TAIL` deltas while the results are pending, then `response.completed`.
fn async_calls_then_commentary(response: &str, calls: &[(&str, &str, Value)]) -> Vec<String> {
    responses_stream::calls_then_commentary(response, calls, true, TAIL)
}

/// The read of `notes.txt`, as the model calls it.
fn read_notes() -> (&'static str, &'static str, Value) {
    ("call_read", "read_file", json!({"path": "notes.txt"}))
}

/// The answer once the result is in.
fn answer() -> Vec<String> {
    vec![
        event(
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0,
                   "item": {"id": "msg_2", "type": "message", "role": "assistant", "content": []}}),
        ),
        event(
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "item_id": "msg_2", "output_index": 0,
                   "content_index": 0, "delta": "The notes say hello."}),
        ),
        event(
            "response.completed",
            json!({"type": "response.completed", "response": {"id": "resp_2", "status": "completed",
                   "usage": {"input_tokens": 20, "output_tokens": 5}}}),
        ),
    ]
}

/// The `async` flag of each tool definition a request declares, by name.
fn declared(request: &SeenRequest) -> Vec<(String, Option<bool>)> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|tool| {
            (
                tool["name"].as_str().unwrap_or_default().to_owned(),
                tool["async"].as_bool(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_call_starts_early_and_its_result_goes_in_the_next_request_once() {
    // The server holds each request to the API's rules on call outputs: one per call, after it (a 400 otherwise).
    let replies = vec![
        Reply::Events(async_calls_then_commentary("resp_1", &[read_notes()])),
        Reply::Events(answer()),
    ];
    let server = ReplayServer::start_choosing(Checked::new(replies), HashMap::new(), PACE)
        .await
        .expect("the replay server starts");
    let dir = workdir();
    let output = run_to_end(&mut command(
        dir.path(),
        &server,
        "openai-responses",
        &["run", "--provider-async", "What do the notes say?"],
    ))
    .await;
    assert!(output.status.success(), "{:?}", output.status);
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(
            declared(request),
            [
                ("read_file".to_owned(), Some(true)),
                ("list_dir".to_owned(), Some(true))
            ]
        );
    }
    // The next request: the call item as the model sent it, async marker included, then its one output.
    let input = requests[1].body["input"].as_array().cloned().unwrap_or_default();
    let call_at = input
        .iter()
        .position(|item| item["type"] == "function_call" && item["call_id"] == "call_read")
        .unwrap_or_else(|| panic!("the call item is sent back: {input:?}"));
    assert_eq!(input[call_at]["async"], json!(true), "{:?}", input[call_at]);
    let outputs: Vec<usize> = input
        .iter()
        .enumerate()
        .filter(|(_, item)| item["type"] == "function_call_output" && item["call_id"] == "call_read")
        .map(|(at, _)| at)
        .collect();
    assert_eq!(outputs.len(), 1, "one output for the call: {input:?}");
    assert!(outputs[0] > call_at, "the output follows its call: {input:?}");
    assert_eq!(input[outputs[0]]["output"], "hello from the notes");

    // The lead: the call ran while the model went on.
    let store = SqliteStore::open_read_only(dir.path().join("headstart.db")).expect("the store opens");
    let sessions = store.sessions().await.expect("sessions");
    let session: SessionId = sessions[0].id.clone();
    let runs = store.tool_runs(&session).await.expect("runs");
    let started = runs[0].started_at_us.expect("the call started");
    let log = store.load_log(&session).await.expect("log");
    let lead_ms = (terminal_commit_us(&log, 0) - started) / 1_000;
    eprintln!("the async call began {lead_ms} ms before the response's terminal commit");
    assert!(
        lead_ms >= 600,
        "the call began only {lead_ms} ms before the stream's end"
    );
    // The stored call keeps the provider's marker.
    let stored_call = log
        .iter()
        .find_map(|stored| match &stored.message {
            Message::Assistant(assistant) => assistant.content.iter().find_map(|block| match block {
                ContentBlock::ToolCall(call) => Some(call.clone()),
                _ => None,
            }),
            _ => None,
        })
        .expect("the stored call");
    assert!(stored_call.provider_async, "{stored_call:?}");
    // inspect says so.
    let text = inspect(dir.path());
    assert!(text.contains("call call_read read_file (async) "), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_flag_nothing_is_declared_async_and_other_providers_refuse_it() {
    let server = ReplayServer::start(vec![Reply::Events(answer())], HashMap::new(), Duration::ZERO)
        .await
        .expect("the replay server starts");
    let dir = workdir();
    let output = run_to_end(&mut command(dir.path(), &server, "openai-responses", &["run", "hi"])).await;
    assert!(output.status.success(), "{:?}", output.status);
    let requests = server.model_requests();
    assert_eq!(
        declared(&requests[0]),
        [("read_file".to_owned(), None), ("list_dir".to_owned(), None)]
    );

    let refused = run_to_end(&mut command(
        dir.path(),
        &server,
        "anthropic",
        &["run", "--provider-async", "hi"],
    ))
    .await;
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--provider-async needs --provider openai-responses"),
        "{stderr}"
    );
    assert_eq!(server.model_requests().len(), 1, "nothing was sent for the refused run");
}

/// The indices of `call_id`'s outputs in a request's input.
fn outputs_of(request: &SeenRequest, call_id: &str) -> Vec<usize> {
    let input = request.body["input"].as_array().cloned().unwrap_or_default();
    input
        .iter()
        .enumerate()
        .filter(|(_, item)| item["type"] == "function_call_output" && item["call_id"] == call_id)
        .map(|(at, _)| at)
        .collect()
}

/// What `headstart inspect` shows of the run in `dir`.
fn inspect(dir: &std::path::Path) -> String {
    let inspected = std::process::Command::new(env!("CARGO_BIN_EXE_headstart"))
        .arg("inspect")
        .arg(dir.join("headstart.db"))
        .output()
        .expect("inspect runs");
    String::from_utf8_lossy(&inspected.stdout).into_owned()
}

/// The stored session of the run in `dir`.
async fn stored_session(dir: &std::path::Path) -> (SqliteStore, SessionId) {
    let store = SqliteStore::open_read_only(dir.join("headstart.db")).expect("the store opens");
    let session = store.sessions().await.expect("sessions")[0].id.clone();
    (store, session)
}

/// The checked replay server of a `fetch_url` that outlives two responses: the first response calls it and
/// `read_file`, the second `list_dir`, the third only comments, the fourth answers. The page answers only once the
/// third model request arrived, whatever the machine's load; replies name the page on the server itself, known once it
/// listens.
async fn fetch_outliving_two_responses() -> ReplayServer {
    let url = std::sync::Arc::new(std::sync::OnceLock::<String>::new());
    let page = std::sync::Arc::clone(&url);
    let script = move |next: usize| {
        let url = page.get().cloned().unwrap_or_default();
        let reply = match next {
            0 => async_calls_then_commentary(
                "resp_1",
                &[("call_fetch", "fetch_url", json!({"url": url})), read_notes()],
            ),
            1 => async_calls_then_commentary("resp_2", &[("call_list", "list_dir", json!({"path": "."}))]),
            2 => async_calls_then_commentary("resp_3", &[]),
            3 => answer(),
            _ => return None,
        };
        Some(Reply::Events(reply))
    };
    let server = ReplayServer::start_choosing(Checked::scripted_by(script), HashMap::new(), PACE)
        .await
        .expect("the replay server starts");
    let _ = url.set(server.url("/slow"));
    server.route(
        "/slow",
        Route::AfterPosts {
            posts: 3,
            body: "the page, at last".into(),
            timeout: Duration::from_secs(60),
        },
    );
    server
}

/// What the server of [`fetch_outliving_two_responses`] saw: four requests, the fetch's output in the last one only,
/// at its end (after everything said before that request, the third response included: it was ready while that
/// response streamed, which never saw it), not beside its call; the quick read's in the second.
fn assert_fetch_delivered_once_at_the_end(server: &ReplayServer) {
    let requests = server.model_requests();
    assert_eq!(requests.len(), 4, "the call, the list, the wait, the answer");
    let fetch_outputs: Vec<usize> = requests
        .iter()
        .map(|request| outputs_of(request, "call_fetch").len())
        .collect();
    assert_eq!(
        fetch_outputs,
        [0, 0, 0, 1],
        "delivered once, in the request after it was ready"
    );
    assert_eq!(
        outputs_of(&requests[1], "call_read").len(),
        1,
        "the quick read went at once"
    );
    let input = requests[3].body["input"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        input
            .last()
            .map(|item| (item["call_id"].clone(), item["output"].clone())),
        Some((json!("call_fetch"), json!("the page, at last"))),
        "{input:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_slower_than_two_responses_reaches_the_model_once_in_the_request_after_it_is_ready() {
    let server = fetch_outliving_two_responses().await;
    let dir = workdir();
    let args = [
        "run",
        "--provider-async",
        "--fetch",
        "--fetch-allow-private",
        "Fetch it and read the notes.",
    ];
    let output = run_to_end(&mut command(dir.path(), &server, "openai-responses", &args)).await;
    assert!(output.status.success(), "{:?}", output.status);

    assert_fetch_delivered_once_at_the_end(&server);
    let (store, session) = stored_session(dir.path()).await;
    let violations = check_session(&store, &session).await.expect("the log loads");
    assert!(violations.is_empty(), "{violations:?}");
    let text = inspect(dir.path());
    assert!(text.contains("(delivered in request 3)"), "{text}");
    assert!(text.contains("(delivered in request 1)"), "the read: {text}");
    // And the timeline labels each async call with the request that carried its result.
    let svg = dir.path().join("run.svg");
    let drawn = std::process::Command::new(env!("CARGO_BIN_EXE_headstart"))
        .arg("timeline")
        .arg(dir.path().join("headstart.db"))
        .arg("--out")
        .arg(&svg)
        .output()
        .expect("timeline runs");
    assert!(drawn.status.success(), "{drawn:?}");
    let svg = std::fs::read_to_string(svg).expect("the SVG");
    assert!(svg.contains("fetch_url · async → request 3"), "the fetch's lane");
    assert!(svg.contains("read_file · async → request 1"), "the read's lane");
}

/// Waits (at most 60 s) until `fetching` says the fetch began, `server`'s first response ended, and the store at
/// `db` holds the response's commentary (an assistant message without calls) for `session` (else the store's only
/// session): the loop is then waiting for the pending result.
async fn until_pending(
    db: &std::path::Path,
    session: Option<&str>,
    server: &ReplayServer,
    fetching: impl Fn() -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the response never ended with the fetch pending"
        );
        let ended = fetching() && !server.finished().is_empty() && {
            let store = SqliteStore::open_read_only(db).expect("the store opens");
            let session = match session {
                Some(id) => SessionId(id.to_owned()),
                None => store.sessions().await.expect("sessions")[0].id.clone(),
            };
            let log = store.load_log(&session).await.expect("the log");
            log.iter()
                .any(|stored| matches!(&stored.message, Message::Assistant(a) if a.tool_calls().next().is_none()))
        };
        if ended {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_while_an_async_call_is_pending_the_resume_delivers_one_interrupted_result() {
    let (page_server, url) = page_after(Duration::from_secs(600)).await;
    let replies = vec![
        Reply::Events(async_calls_then_commentary(
            "resp_1",
            &[("call_fetch", "fetch_url", json!({"url": url}))],
        )),
        Reply::Events(answer()),
    ];
    let server = ReplayServer::start_choosing(Checked::new(replies), HashMap::new(), Duration::from_millis(5))
        .await
        .expect("the replay server starts");
    let dir = workdir();
    let flags = ["--provider-async", "--fetch", "--fetch-allow-private"];
    let mut run: Vec<&str> = vec!["run", "--no-progress"];
    run.extend(flags);
    run.push("Fetch it.");
    let mut child = command(dir.path(), &server, "openai-responses", &run)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("the run starts");
    // Killed once the response ended with the fetch running: the loop is waiting for the pending result.
    let db = dir.path().join("headstart.db");
    until_pending(&db, None, &server, || !page_server.requests().is_empty()).await;
    child.start_kill().expect("killed");
    child.wait().await.expect("reaped");

    let (store, session) = stored_session(dir.path()).await;
    assert_eq!(store.unfinished_calls(&session).await.expect("unfinished").len(), 1);
    drop(store);
    let mut resume: Vec<&str> = vec!["resume", "headstart.db", "--session", &session.0];
    resume.extend(flags);
    let output = run_to_end(&mut command(dir.path(), &server, "openai-responses", &resume)).await;
    assert!(output.status.success(), "{:?}", output.status);
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2, "the killed run's request and the resumed one");
    let outputs = outputs_of(&requests[1], "call_fetch");
    assert_eq!(outputs.len(), 1, "exactly one result delivered");
    let input = requests[1].body["input"].as_array().cloned().unwrap_or_default();
    assert_eq!(input[outputs[0]]["output"], json!(headstart::INTERRUPTED));
    let (store, session) = stored_session(dir.path()).await;
    let violations = check_session(&store, &session).await.expect("the log loads");
    assert!(violations.is_empty(), "{violations:?}");
}

/// The model and tool flags `worker` and `restate serve` take here: `server`'s Responses API with provider-async
/// calls, `fetch_url` allowed on loopback, and the file tools in `dir`.
fn model_flags(dir: &std::path::Path, server: &ReplayServer) -> Vec<std::ffi::OsString> {
    let mut flags: Vec<std::ffi::OsString> = [
        "--provider",
        "openai-responses",
        "--model",
        "m",
        "--api-key-env",
        support::KEY,
        "--base-url",
    ]
    .map(Into::into)
    .into();
    flags.push(server.url("/v1").into());
    flags.extend(["--provider-async", "--fetch", "--fetch-allow-private", "--workdir"].map(Into::into));
    flags.push(dir.into());
    flags
}

/// `headstart worker --id ID` on the store at `store`, against `server`'s Responses API, with provider-async calls
/// and `fetch_url`; `lease_ms` shortens its lease (so that a killed worker's session is taken over soon).
fn worker(dir: &std::path::Path, store: &str, server: &ReplayServer, id: &str, lease_ms: u64) -> std::process::Command {
    let mut worker = std::process::Command::new(env!("CARGO_BIN_EXE_headstart"));
    worker
        .current_dir(dir)
        .env(support::KEY, "test-key")
        .args([
            "worker",
            "--store",
            store,
            "--id",
            id,
            "--concurrency",
            "1",
            "--poll-ms",
            "50",
        ])
        .args(["--lease-ms", &lease_ms.to_string()])
        .args(model_flags(dir, server))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    worker
}

/// `headstart submit --store STORE PROMPT`; returns the session id it prints.
fn submit(store: &str, prompt: &str) -> String {
    let submitted = std::process::Command::new(env!("CARGO_BIN_EXE_headstart"))
        .args(["submit", "--store", store, prompt])
        .output()
        .expect("submit runs");
    assert!(submitted.status.success(), "{submitted:?}");
    String::from_utf8_lossy(&submitted.stdout).trim().to_owned()
}

/// The state `session` ends in (`completed` or `failed`), or the last one seen after 90 s.
async fn session_end(store: &str, session: &str) -> Option<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let opened = SqliteStore::open_read_only(store).expect("the store opens");
        let sessions = opened.sessions().await.expect("sessions");
        let state = sessions
            .iter()
            .find(|info| info.id.0 == session)
            .map(|info| info.state.as_str());
        if matches!(state, Some("completed" | "failed")) || tokio::time::Instant::now() > deadline {
            return state.map(str::to_owned);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `headstart worker` meets provider-async calls as `run` does: a submitted prompt whose fetch outlives two
/// responses is answered with the fetch delivered once, in the request after it was ready.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_delivers_a_slow_async_result_once_in_the_request_after_it_is_ready() {
    let server = fetch_outliving_two_responses().await;
    let dir = workdir();
    let store = dir.path().join("fleet.db");
    let store = store.to_str().expect("a UTF-8 path");
    let session = submit(store, "Fetch it and read the notes.");
    let _worker =
        support::ChildGuard::spawn(&mut worker(dir.path(), store, &server, "w1", 30_000)).expect("the worker starts");
    assert_eq!(session_end(store, &session).await.as_deref(), Some("completed"));
    assert_fetch_delivered_once_at_the_end(&server);
    let store = SqliteStore::open_read_only(store).expect("the store opens");
    let violations = check_session(&store, &SessionId(session)).await.expect("the log loads");
    assert!(violations.is_empty(), "{violations:?}");
}

/// A worker killed with SIGKILL while its session waits for a provider-async result: another worker takes the
/// session over once the lease lapses and recovers the call. `fetch_url` is idempotent, so the worker's recovery
/// (`ReExecuteIdempotent`) runs it again; that one result reaches the model once, in the new worker's first request.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_taking_over_a_session_with_a_pending_async_call_delivers_its_result_once() {
    let url = std::sync::Arc::new(std::sync::OnceLock::<String>::new());
    let page = std::sync::Arc::clone(&url);
    let script = move |next: usize| {
        let url = page.get().cloned().unwrap_or_default();
        let reply = match next {
            0 => async_calls_then_commentary("resp_1", &[("call_fetch", "fetch_url", json!({"url": url}))]),
            1 => answer(),
            _ => return None,
        };
        Some(Reply::Events(reply))
    };
    let server = ReplayServer::start_choosing(Checked::scripted_by(script), HashMap::new(), Duration::from_millis(5))
        .await
        .expect("the replay server starts");
    let _ = url.set(server.url("/slow"));
    // The page does not answer the first worker (nor anyone, until told otherwise below).
    let silent = |posts| Route::AfterPosts {
        posts,
        body: "the page, at last".into(),
        timeout: Duration::from_secs(600),
    };
    server.route("/slow", silent(usize::MAX));
    let fetches = || server.requests().iter().filter(|seen| seen.path == "/slow").count();
    let dir = workdir();
    let store = dir.path().join("fleet.db");
    let store = store.to_str().expect("a UTF-8 path");
    let session = submit(store, "Fetch it.");
    let first = support::ChildGuard::spawn(&mut worker(dir.path(), store, &server, "w1", 1_000))
        .expect("the first worker starts");
    // Killed once the response ended with the fetch running: the loop is waiting for the pending result.
    until_pending(std::path::Path::new(store), Some(&session), &server, || fetches() == 1).await;
    drop(first);
    let opened = SqliteStore::open_read_only(store).expect("the store opens");
    let unfinished = opened
        .unfinished_calls(&SessionId(session.clone()))
        .await
        .expect("unfinished");
    assert_eq!(unfinished.len(), 1, "the fetch, pending when its worker died");
    drop(opened);

    // From now on the page answers at once.
    server.route("/slow", silent(0));
    let _second = support::ChildGuard::spawn(&mut worker(dir.path(), store, &server, "w2", 1_000))
        .expect("the second worker starts");
    assert_eq!(session_end(store, &session).await.as_deref(), Some("completed"));
    assert_eq!(fetches(), 2, "run in the dead worker, and once more by the recovery");
    let requests = server.model_requests();
    assert_eq!(
        requests.len(),
        2,
        "the dead worker's request and the one after the take-over"
    );
    let outputs = outputs_of(&requests[1], "call_fetch");
    assert_eq!(outputs.len(), 1, "exactly one result delivered");
    let input = requests[1].body["input"].as_array().cloned().unwrap_or_default();
    assert_eq!(input[outputs[0]]["output"], json!("the page, at last"));
    let opened = SqliteStore::open_read_only(store).expect("the store opens");
    let violations = check_session(&opened, &SessionId(session))
        .await
        .expect("the log loads");
    assert!(violations.is_empty(), "{violations:?}");
}

/// `headstart restate serve --provider-async`: a submitted prompt whose fetch outlives two responses is answered
/// through Restate as through `run` and `worker` (the call runs in the `Tools` service while the turn's loop goes
/// on): the fetch is delivered once, in the request after it was ready, at its end.
#[cfg(all(unix, feature = "restate"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_restate_a_slow_async_result_reaches_the_model_once_in_the_request_after_it_is_ready() {
    let Some(binary) = harness::server_binary() else { return };
    let server = fetch_outliving_two_responses().await;
    let dir = workdir();
    let restate = harness::start_server(&binary, dir.path());
    let mut deployment = std::process::Command::new(harness::bin());
    deployment
        .current_dir(dir.path())
        .env(support::KEY, "test-key")
        .args(["restate", "serve", "--addr", &format!("127.0.0.1:{}", harness::port())])
        .arg("--store")
        .arg(dir.path().join("agents.db"))
        .args(model_flags(dir.path(), &server))
        .args(["--register", &restate.admin_url(0)])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut deployment = support::ChildGuard::spawn(&mut deployment).expect("the deployment starts");
    harness::wait_for_line(&mut deployment, "registered http://");
    let submitted = support::ChildGuard::spawn(
        std::process::Command::new(harness::bin())
            .args(["submit", "--restate", &restate.ingress_url(0), "--wait"])
            .arg("Fetch it and read the notes.")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    )
    .expect("submit starts");
    let (report, session) = harness::report_and_session(&submitted.output_within(harness::PATIENCE));
    assert_eq!(report["stop"]["reason"], "completed", "{report}");
    assert_eq!(report["recoveries"], 0, "{report}");

    assert_fetch_delivered_once_at_the_end(&server);
    let store = harness::open_store(dir.path());
    harness::assert_sound(&store, &session, &["call_fetch", "call_list", "call_read"]).await;
}
