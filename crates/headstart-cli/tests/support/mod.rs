//! What the end-to-end tests of this package share: the command against a local replay server, synthesized
//! Anthropic streams, readers of what was stored or sent, and a child process that cannot outlive its test.
// Each test file uses some of these.
#![allow(dead_code)]

pub mod campaign;
mod child;
mod down;
#[allow(unused_imports)] // Used by the test files that start long-lived children (fleet, crash).
pub use child::ChildGuard;
#[allow(unused_imports)] // Used by the test files of provider outages.
pub use down::DownProvider;

use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use headstart::core::Message;
use headstart::store::StoredMessage;
use headstart_providers::replay_server::chat_stream::{chat_events, ChatCall};
use headstart_providers::replay_server::{ReplayServer, Reply, SeenRequest};
use serde_json::{json, Value};

/// The replay server's pause before each SSE event.
pub const DELAY: Duration = Duration::from_millis(5);
/// The variable the test key is passed in.
pub const KEY: &str = "HEADSTART_RUN_TEST_KEY";
/// The next response id.
static NEXT_RESPONSE: AtomicUsize = AtomicUsize::new(0);

/// `headstart run|resume …` against `server`, in `dir`, with the test key set.
pub fn command(dir: &Path, server: &ReplayServer, provider: &str, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_headstart"));
    command
        .current_dir(dir)
        .env(KEY, "test-key")
        .args(args)
        .args(["--provider", provider, "--model", "m", "--api-key-env", KEY])
        .arg("--base-url")
        .arg(server.url("/v1"))
        .kill_on_drop(true);
    command
}

/// A page that answers after `delay`, on a server of its own (the model's replies name its URL, which exists only
/// once it listens); its URL.
pub async fn page_after(delay: Duration) -> (ReplayServer, String) {
    let pages = std::collections::HashMap::from([(
        "/slow".to_owned(),
        headstart_providers::replay_server::Page {
            delay,
            body: "the page, at last".into(),
        },
    )]);
    let page_server = ReplayServer::start(Vec::new(), pages, DELAY)
        .await
        .expect("the page server starts");
    let url = page_server.url("/slow");
    (page_server, url)
}

/// Runs `command` to its end (at most two minutes) and prints its output.
pub async fn run_to_end(command: &mut tokio::process::Command) -> Output {
    let output = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("the command finished")
        .expect("the command ran");
    eprintln!("stdout:\n{}", String::from_utf8_lossy(&output.stdout));
    eprintln!("stderr:\n{}", String::from_utf8_lossy(&output.stderr));
    output
}

/// The texts of the stored tool results, in log order.
pub fn result_texts(log: &[StoredMessage]) -> Vec<String> {
    log.iter()
        .filter_map(|stored| match &stored.message {
            Message::ToolResult(result) => Some(result.text()),
            _ => None,
        })
        .collect()
}

/// One SSE event of the Anthropic Messages stream.
pub fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// An Anthropic response: optional text, then `tool_use` blocks `(id, name, input)`.
pub fn anthropic(text: Option<&str>, calls: &[(&str, &str, Value)]) -> Vec<String> {
    // Each response has its own id, as a provider's: the id is the turn its fragments are grouped by.
    let id = format!("msg_{}", NEXT_RESPONSE.fetch_add(1, Ordering::Relaxed));
    let mut events = vec![event(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
            "model": "m", "content": [], "stop_reason": null, "usage": {"input_tokens": 3, "output_tokens": 1}}}),
    )];
    let mut index = 0;
    if let Some(text) = text {
        events.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ));
        for word in text.split_inclusive(' ') {
            events.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word}}),
            ));
        }
        events.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        index = 1;
    }
    for (id, name, input) in calls {
        events.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        events.push(event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
        ));
        events.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    let stop = if calls.is_empty() { "end_turn" } else { "tool_use" };
    events.push(event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 9}}),
    ));
    events.push(event("message_stop", json!({"type": "message_stop"})));
    events
}

/// A Chat Completions response (`--provider openai` or `openai-compatible`) with an id of its own: optional text,
/// then tool calls `(id, name, arguments)` ([`chat_events`]).
pub fn openai_chat(text: Option<&str>, calls: &[(&str, &str, Value)]) -> Vec<String> {
    let id = format!("chatcmpl-{}", NEXT_RESPONSE.fetch_add(1, Ordering::Relaxed));
    let calls: Vec<ChatCall<'_>> = calls
        .iter()
        .map(|(id, name, arguments)| ChatCall { id, name, arguments })
        .collect();
    chat_events(&id, text, &calls)
}

/// The final answer: text, no calls.
pub fn answer() -> Reply {
    Reply::Events(anthropic(Some("The notes say hello."), &[]))
}

/// When request `request`'s last assistant fragment, its terminal commit, was stored (µs, the writer's clock).
pub fn terminal_commit_us(log: &[StoredMessage], request: u32) -> i64 {
    log.iter()
        .filter(|stored| stored.request == Some(request) && matches!(stored.message, Message::Assistant(_)))
        .map(|stored| stored.at_us)
        .max()
        .unwrap_or_else(|| panic!("request {request} stored no fragment"))
}

/// A working directory with `notes.txt`.
pub fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello from the notes").unwrap();
    dir
}

/// The tool results a model request carries: (call id, content).
pub fn tool_results(request: &SeenRequest) -> Vec<(String, String)> {
    request.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(tool_results_in)
        .collect()
}

/// The `tool_result` blocks of one Anthropic message: `(tool_use_id, content)`.
pub fn tool_results_in(message: &Value) -> Vec<(String, String)> {
    message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| block["type"] == "tool_result")
        .map(|block| {
            let id = block["tool_use_id"].as_str().unwrap_or_default().to_owned();
            let content = match &block["content"] {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            (id, content)
        })
        .collect()
}

/// `headstart submit --store STORE --count COUNT PROMPT` with the binary `bin`; the ids it printed, one a session.
///
/// # Panics
///
/// If submit fails (with its standard error).
pub fn submit_count(bin: &Path, store: &Path, count: usize, prompt: &str) -> Vec<String> {
    let submitted = std::process::Command::new(bin)
        .args(["submit", "--store"])
        .arg(store)
        .args(["--count", &count.to_string(), prompt])
        .output()
        .expect("run submit");
    assert!(
        submitted.status.success(),
        "{}",
        String::from_utf8_lossy(&submitted.stderr)
    );
    String::from_utf8_lossy(&submitted.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Each line of `log` (a child's standard error), as it comes, on a thread of its own.
pub fn lines_of(log: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead as _;
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(log).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    received
}

/// The address of a worker's `metrics http://ADDR/metrics` log line; `None` for any other line.
pub fn metrics_address(line: &str) -> Option<std::net::SocketAddr> {
    let url = line.strip_prefix("metrics ")?;
    let addr = url.trim_start_matches("http://").trim_end_matches("/metrics");
    Some(addr.parse().expect("the logged metrics address"))
}

/// Removes every field that holds a time from `value`: `*_us`, `timestamp`, and `turn_id` (a UUIDv7 the engine makes
/// from its clock when the model names no response, as a scenario's does not). What is left is what two
/// resumptions or recoveries of one crash must agree on.
pub fn strip_times(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            fields.retain(|key, _| !key.ends_with("_us") && key != "timestamp" && key != "turn_id");
            fields.values_mut().for_each(strip_times);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_times),
        _ => {}
    }
}

/// Copies the SQLite store `from` to `to` as it is now, what its write-ahead log holds included (`VACUUM INTO`).
pub fn copy_sqlite(from: &Path, to: &Path) {
    let source = rusqlite::Connection::open(from).unwrap_or_else(|e| panic!("open {}: {e}", from.display()));
    source
        .execute("VACUUM INTO ?1", [to.display().to_string()])
        .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), to.display()));
}
