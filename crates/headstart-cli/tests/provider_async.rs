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

use std::collections::HashMap;
use std::time::Duration;

use headstart::core::{ContentBlock, Message};
use headstart::{SessionId, SqliteStore, TranscriptStore};
use headstart_providers::replay_server::responses_input::Checked;
use headstart_providers::replay_server::{ReplayServer, Reply, SeenRequest};
use serde_json::json;

mod support;
use support::{command, event, run_to_end, terminal_commit_us, workdir};

/// Each event of the first response is sent this long after the one before.
const PACE: Duration = Duration::from_millis(60);
/// Text deltas after the call: the model goes on for about `TAIL × PACE` (1.2 s) after the call is sealed.
const TAIL: usize = 20;

/// A Responses stream as GPT-6 Astra sends it for an async call: the `function_call` item with `async: true`, then
/// a commentary message while the result is pending, then `response.completed`.
fn async_call_then_commentary() -> Vec<String> {
    let call = json!({"id": "fc_1", "type": "function_call", "status": "in_progress", "arguments": "",
                      "async": true, "call_id": "call_read", "name": "read_file"});
    let arguments = json!({"path": "notes.txt"}).to_string();
    let mut done = call.clone();
    done["status"] = json!("completed");
    done["arguments"] = json!(arguments);
    let mut events = vec![
        event(
            "response.created",
            json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        ),
        event(
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0, "item": call}),
        ),
        event(
            "response.function_call_arguments.delta",
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0,
                   "delta": arguments}),
        ),
        event(
            "response.function_call_arguments.done",
            json!({"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0,
                   "arguments": arguments}),
        ),
        event(
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
        ),
        event(
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 1,
                   "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                            "phase": "commentary"}}),
        ),
    ];
    for word in 0..TAIL {
        events.push(event(
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1,
                   "content_index": 0, "delta": format!("waiting {word} ")}),
        ));
    }
    events.push(event(
        "response.completed",
        json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
               "incomplete_details": null, "usage": {"input_tokens": 10, "output_tokens": 30}}}),
    ));
    events
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
    let replies = vec![Reply::Events(async_call_then_commentary()), Reply::Events(answer())];
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
    let inspected = std::process::Command::new(env!("CARGO_BIN_EXE_headstart"))
        .arg("inspect")
        .arg(dir.path().join("headstart.db"))
        .output()
        .expect("inspect runs");
    let text = String::from_utf8_lossy(&inspected.stdout);
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
