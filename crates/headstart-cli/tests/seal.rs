//! Early execution on Chat Completions through `headstart run --provider openai-compatible`, against the replay
//! server pacing a recorded two-call response (gpt-4.1's, its calls respelled as the built-in `fetch_url` and
//! `read_file`) at 50 ms an event.
//!
//! The lead is structural, not a race: the server holds back the second call's first chunk until the first call,
//! `fetch_url`, has fetched the gate page. So that call started before the second call even began, and the eight
//! events still to come, 50 ms apart at least, put it at least 400 ms before the stream's end, however loaded the
//! machine. Sealed at `finish_reason` instead (`--seal-at finish`, the old default), the gate opens only by its
//! timeout and the fetch comes after `finish_reason`, two events before the end: the control test checks that.
//!
//! A server that interleaves two calls gets the clear error and runs nothing twice; with `--seal-at finish` the same
//! stream completes.

use std::collections::HashMap;
use std::path::Path;
use std::process::Output;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use headstart::core::{ContentBlock, Message, StopReason};
use headstart::store::StoredMessage;
use headstart::{SqliteStore, TranscriptStore};
use headstart_bench::headroom::{self, HeadroomOptions};
use headstart_providers::replay_server::chat_stream::chat_events;
use headstart_providers::replay_server::gate::second_call_start;
use headstart_providers::replay_server::respell::respell_chat_calls;
use headstart_providers::replay_server::{cassette_events, Page, ReplayServer, Reply};
use headstart_providers::{read_recording, WireFormat};
use serde_json::{json, Value};

mod support;
use support::{command, run_to_end, workdir};

const PACE: Duration = Duration::from_millis(50);
const GATE: &str = "/gate";

fn recorded_two_calls() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/providers/openai_chat__streaming_gpt41_parallel_model.yaml");
    let text = std::fs::read_to_string(path).expect("the recording");
    cassette_events(&text).expect("it parses").remove(0)
}

fn gate_page() -> HashMap<String, Page> {
    HashMap::from([(
        GATE.to_owned(),
        Page {
            delay: Duration::ZERO,
            body: "the gate is open".to_owned(),
        },
    )])
}

fn answer() -> Reply {
    Reply::Events(chat_events("answer", Some("Both done."), &[]))
}

/// A server pacing events `pace` apart whose first reply is `first(gate URL)`, then a plain answer; it serves the
/// gate page too, so the reply can name the server's own address.
async fn serve_with_gate(pace: Duration, first: impl Fn(&str) -> Reply + Send + Sync + 'static) -> ReplayServer {
    let gate_url: Arc<OnceLock<String>> = Arc::default();
    let url_for_rule = Arc::clone(&gate_url);
    let rule = move |number: usize, _: &Value| match number {
        0 => first(url_for_rule.get().map_or("", String::as_str)),
        _ => answer(),
    };
    let server = ReplayServer::start_choosing(rule, gate_page(), pace)
        .await
        .expect("a server");
    gate_url.set(server.url(GATE)).expect("set once");
    server
}

/// The recorded response calling `fetch_url` on the gate and `read_file` on the notes, the second call held back
/// until the gate was fetched (at most `timeout`).
async fn gated_server(timeout: Duration) -> ReplayServer {
    serve_with_gate(PACE, move |gate| {
        let url = json!({"url": gate});
        let path = json!({"path": "notes.txt"});
        let events = respell_chat_calls(&recorded_two_calls(), &[("fetch_url", &url), ("read_file", &path)]);
        let before = second_call_start(&events).expect("the recording has a second call");
        Reply::Gated {
            events,
            before,
            path: GATE.to_owned(),
            timeout,
        }
    })
    .await
}

/// When the gate was fetched, each time.
fn gate_fetches(server: &ReplayServer) -> Vec<Instant> {
    server
        .requests()
        .into_iter()
        .filter(|request| request.method == "GET" && request.path == GATE)
        .map(|request| request.at)
        .collect()
}

/// How many events of the recorded response the gate holds back: from the second call's first one to the end.
fn held_back() -> usize {
    let events = recorded_two_calls();
    events.len() - second_call_start(&events).expect("the recording has a second call")
}

/// `headstart run` of [`RUN`] and `extra` against `server`, in a fresh working directory; the directory and the
/// command's output.
async fn run(server: &ReplayServer, extra: &[&str]) -> (tempfile::TempDir, Output) {
    let dir = workdir();
    let mut args = RUN.to_vec();
    args.extend(extra);
    let output = run_to_end(&mut command(dir.path(), server, "openai-compatible", &args)).await;
    (dir, output)
}

async fn stored_log(db: &Path) -> Vec<StoredMessage> {
    let store = SqliteStore::open_read_only(db).expect("the database opens");
    let sessions = store.sessions().await.expect("sessions");
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    store.load_log(&sessions[0].id).await.expect("the log")
}

fn results(log: &[StoredMessage]) -> Vec<(String, String, bool)> {
    log.iter()
        .filter_map(|stored| match &stored.message {
            Message::ToolResult(result) => Some((result.tool_name.clone(), result.text(), result.is_error)),
            _ => None,
        })
        .collect()
}

const RUN: [&str; 6] = [
    "run",
    "--fetch",
    "--fetch-allow-private",
    "--continue-after-failure",
    "0",
    "Open the gate, then read the notes.",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_compatible_run_starts_the_first_call_eight_events_before_the_recorded_stream_ends() {
    let server = gated_server(Duration::from_secs(60)).await;
    let (dir, output) = run(&server, &["--record", "run.sse"]).await;
    assert!(output.status.success(), "{:?}", output.status);

    assert_eq!(gate_fetches(&server).len(), 1, "the early call ran once");
    let lead = server.lead(GATE, 0).expect("the gate was fetched");
    assert!(lead.events_after >= held_back(), "{lead:?}, {} held back", held_back());
    assert!(
        lead.ms >= 250.0,
        "the first call started {lead:?} before the stream ended"
    );
    let log = stored_log(&dir.path().join("headstart.db")).await;
    let results = results(&log);
    assert_eq!(
        results,
        [
            ("fetch_url".to_owned(), "the gate is open".to_owned(), false),
            ("read_file".to_owned(), "hello from the notes".to_owned(), false),
        ]
    );
    // The first call was committed in a fragment of its own, before the response's end.
    let fragments: Vec<usize> = log
        .iter()
        .filter_map(|stored| match &stored.message {
            Message::Assistant(fragment) if stored.request == Some(0) => Some(fragment.content.len()),
            _ => None,
        })
        .collect();
    assert!(fragments.len() >= 2, "{fragments:?}");

    // The recording holds both responses with their arrival times, and its headroom is the lead measured.
    let recording = dir.path().join("run.sse");
    let text = std::fs::read_to_string(&recording).expect("the recording was written");
    let responses = read_recording(&text).expect("it reads");
    assert_eq!(responses.len(), 2);
    assert_eq!(responses[0].format, Some(WireFormat::OpenAiChat));
    assert!(responses[0].events.iter().all(|event| event.at_ms.is_some()));
    let report = headroom::run(&HeadroomOptions {
        files: vec![recording],
        format: None,
    })
    .expect("headroom");
    let first = &report.responses[0].calls[0];
    assert_eq!(first.name, "fetch_url");
    let complete = first
        .rules
        .iter()
        .find(|seal| seal.rule == "complete")
        .expect("complete");
    let finish = first.rules.iter().find(|seal| seal.rule == "finish").expect("finish");
    assert!(complete.headroom >= Some(400.0), "{first:?}");
    assert!(finish.headroom < Some(150.0), "{first:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sealed_at_finish_reason_the_same_run_starts_the_call_only_after_the_stream() {
    // The control: without early sealing the gate opens by its timeout, and the fetch comes after the stream.
    let server = gated_server(Duration::from_secs(1)).await;
    let (_dir, output) = run(&server, &["--seal-at", "finish"]).await;
    assert!(output.status.success(), "{:?}", output.status);
    assert_eq!(gate_fetches(&server).len(), 1);
    let events = recorded_two_calls();
    let finish = events
        .iter()
        .position(|event| event.contains("\"finish_reason\":\"tool_calls\""))
        .expect("a finish_reason");
    assert_eq!(server.sent(0).len(), events.len());
    let lead = server.lead(GATE, 0).expect("the gate was fetched");
    assert!(
        lead.events_after < events.len() - finish,
        "the call started only once finish_reason had been sent, after the whole second call: {lead:?}"
    );
}

/// A server that interleaves the two calls: the first call's arguments continue after the second call started.
fn interleaving(url: &str) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        let chunk = json!({"id": "r", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    };
    let start = |index: u64, id: &str, name: &str| {
        chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        )
    };
    let args = |index: u64, text: &str| {
        chunk(
            json!({"tool_calls": [{"index": index, "function": {"arguments": text}}]}),
            Value::Null,
        )
    };
    vec![
        start(0, "call_a", "fetch_url"),
        args(0, "{\"url\": "),
        start(1, "call_b", "read_file"),
        args(1, "{\"path\": \"notes.txt\"}"),
        args(0, &format!("\"{url}\"}}")),
        chunk(json!({}), json!("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ]
}

async fn interleaving_server() -> ReplayServer {
    serve_with_gate(Duration::from_millis(5), |gate| Reply::Events(interleaving(gate))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_interleaves_calls_gets_a_clear_error_and_runs_nothing_twice_unless_sealed_at_finish() {
    let server = interleaving_server().await;
    let (dir, output) = run(&server, &[]).await;
    assert!(!output.status.success(), "the response failed");
    let log = stored_log(&dir.path().join("headstart.db")).await;
    let failed = log
        .iter()
        .find_map(|stored| match &stored.message {
            Message::Assistant(fragment) if fragment.stop_reason == StopReason::Error => fragment.error_message.clone(),
            _ => None,
        })
        .expect("the response ended as error");
    assert!(failed.contains("tool call index 0"), "{failed}");
    assert!(failed.contains("interleaves calls"), "{failed}");
    assert!(failed.contains("--seal-at finish"), "{failed}");
    assert!(gate_fetches(&server).len() <= 1, "nothing ran twice");
    // Every call stored has exactly one result.
    let calls: Vec<String> = log
        .iter()
        .filter_map(|stored| match &stored.message {
            Message::Assistant(fragment) => Some(fragment.content.clone()),
            _ => None,
        })
        .flatten()
        .filter_map(|block| match block {
            ContentBlock::ToolCall(call) => Some(call.id),
            _ => None,
        })
        .collect();
    let answered: Vec<String> = log
        .iter()
        .filter_map(|stored| match &stored.message {
            Message::ToolResult(result) => Some(result.tool_call_id.clone()),
            _ => None,
        })
        .collect();
    let mut sorted = answered.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), answered.len(), "one result per call: {answered:?}");
    assert_eq!(calls.len(), answered.len(), "{calls:?} {answered:?}");

    let server = interleaving_server().await;
    let (dir, output) = run(&server, &["--seal-at", "finish"]).await;
    assert!(output.status.success(), "{:?}", output.status);
    assert_eq!(gate_fetches(&server).len(), 1);
    let mut results = results(&stored_log(&dir.path().join("headstart.db")).await);
    results.sort();
    assert_eq!(
        results,
        [
            ("fetch_url".to_owned(), "the gate is open".to_owned(), false),
            ("read_file".to_owned(), "hello from the notes".to_owned(), false),
        ]
    );
}
