//! End to end over real HTTP: a local server (hyper on 127.0.0.1, port 0) replays the four recorded Anthropic
//! exchanges of `tests/fixtures/providers/` one SSE event at a time with small delays; `HttpModel` talks to it
//! and an `Agent` runs async arithmetic tools. The first calls start while their HTTP response is still streaming.
//! The fault tests script the same server to answer 429, 503 or 400 first (contract §3.6.6).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use headstart::{
    Agent, AgentEvent, AgentStop, Arguments, CancellationToken, DeltaEvent, Engine, EngineConfig, Message, SessionId,
    SqliteStore, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, Toolbox, TranscriptStore, UserMessage,
};
use headstart_providers::http::{HttpModel, HttpModelConfig};
use headstart_providers::replay_server::{cassette_events, ReplayServer, Reply};
use headstart_providers::WireFormat;
use serde_json::{json, Value};

/// The server's pause before each SSE event. The timing checks compare a call's start with events still to come
/// (the next call's first event, the response's last): one to two pauses of margin for a commit and a task start,
/// which a loaded machine can stretch past 15 ms.
const DELAY: Duration = Duration::from_millis(40);
const KEY_VARIABLE: &str = "HEADSTART_PROVIDERS_E2E_TEST_KEY";
const PROMPT: &str = "Calculate ((10 - 4) * (3 + 5)) / 3 and describe the result in one short paragraph.";

type Starts = Arc<Mutex<Vec<(String, Instant)>>>;

struct Arithmetic {
    spec: ToolSpec,
    op: fn(i64, i64) -> i64,
    starts: Starts,
}

#[async_trait::async_trait]
impl Tool for Arithmetic {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        self.starts
            .lock()
            .unwrap()
            .push((context.call_id.clone(), Instant::now()));
        let get = |key: &str| {
            arguments
                .get(key)
                .and_then(Value::as_i64)
                .ok_or("x and y must be integers")
        };
        Ok(ToolOutput::text(((self.op)(get("x")?, get("y")?)).to_string()))
    }
}

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/providers")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

/// Each exchange's body split into its SSE events (each with its blank line).
fn exchanges() -> Vec<Vec<String>> {
    cassette_events(&fixture("anthropic__multi_turn_streaming_tools.yaml")).unwrap()
}

async fn serve(replies: Vec<Reply>) -> ReplayServer {
    ReplayServer::start(replies, HashMap::new(), DELAY).await.unwrap()
}

fn model(server: &ReplayServer) -> HttpModel {
    // Edition 2021: setting a variable nobody else reads is fine.
    std::env::set_var(KEY_VARIABLE, "test-key");
    let config = HttpModelConfig::new(WireFormat::Anthropic, "claude-sonnet-4-6")
        .with_base_url(server.url("/v1"))
        .with_api_key_env(Some(KEY_VARIABLE));
    HttpModel::new(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_tools_start_while_the_http_response_is_still_streaming() {
    let exchanges = exchanges();
    assert_eq!(exchanges.len(), 4);
    let server = serve(exchanges.into_iter().map(Reply::Events).collect()).await;

    let starts: Starts = Arc::default();
    let (events, store, session) = run_agent(&server, &starts).await;

    // The run completed after four requests, answered by the replayed exchanges.
    assert!(
        matches!(
            events.last(),
            Some(AgentEvent::AgentEnd {
                stop: AgentStop::Completed
            })
        ),
        "{:?}",
        events.last()
    );
    let requests = server.model_requests();
    assert_eq!(requests.len(), 4);
    for request in &requests {
        assert_eq!(request.headers.get("x-api-key").map(String::as_str), Some("test-key"));
        assert_eq!(
            request.headers.get("anthropic-version").map(String::as_str),
            Some("2023-06-01")
        );
        assert_eq!(request.body["stream"], true);
        assert_eq!(request.body["model"], "claude-sonnet-4-6");
        assert_eq!(request.body["tools"].as_array().map(Vec::len), Some(4));
    }
    assert_eq!(
        requests[0].body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": PROMPT}]}])
    );
    // The second request carries the first response (merged back into one message) and both results.
    let messages = &requests[1].body["messages"];
    assert_eq!(
        messages[1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_REDACTED_1", "name": "subtract", "input": {"x": 10, "y": 4}})
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_REDACTED_1", "content": "6", "is_error": false},
            {"type": "tool_result", "tool_use_id": "toolu_REDACTED_2", "content": "8", "is_error": false},
        ]})
    );

    // Each call started before the HTTP response that carried it had finished streaming.
    let starts = starts.lock().unwrap().clone();
    let finished = server.finished();
    let finished_at = |exchange: usize| {
        finished
            .iter()
            .find(|(e, _)| *e == exchange)
            .map(|(_, at)| *at)
            .unwrap()
    };
    let started_at = |id: &str| starts.iter().find(|(call, _)| call == id).map(|(_, at)| *at).unwrap();
    for (id, exchange) in [
        ("toolu_REDACTED_1", 0),
        ("toolu_REDACTED_2", 0),
        ("toolu_REDACTED_3", 1),
        ("toolu_REDACTED_4", 2),
    ] {
        assert!(
            started_at(id) < finished_at(exchange),
            "{id} started {:?} after its response finished",
            started_at(id).duration_since(finished_at(exchange))
        );
    }
    // The first call even started before the model began streaming the second one.
    let subtract_started = events
        .iter()
        .position(|e| matches!(e, AgentEvent::ToolExecutionStart { call } if call.id == "toolu_REDACTED_1"))
        .unwrap();
    let add_streamed = events
        .iter()
        .position(|e| {
            matches!(e, AgentEvent::MessageUpdate { delta: DeltaEvent::ToolcallStart { name, .. }, .. } if name == "add")
        })
        .unwrap();
    assert!(subtract_started < add_streamed);

    // The transcript holds every result, in call order.
    let context = store.model_context(&session).await.unwrap();
    let results: Vec<String> = context
        .iter()
        .filter_map(|message| match message {
            Message::ToolResult(result) => Some(result.text()),
            _ => None,
        })
        .collect();
    assert_eq!(results, ["6", "8", "48", "16"]);
}

/// Runs the agent with the arithmetic tools against `server` on a fresh in-memory store.
async fn run_agent(server: &ReplayServer, starts: &Starts) -> (Vec<AgentEvent>, Arc<dyn TranscriptStore>, SessionId) {
    run_agent_with(server, starts, EngineConfig::default()).await
}

/// [`run_agent`] with an engine configuration.
async fn run_agent_with(
    server: &ReplayServer,
    starts: &Starts,
    config: EngineConfig,
) -> (Vec<AgentEvent>, Arc<dyn TranscriptStore>, SessionId) {
    let tool = |name: &str, op| Arithmetic {
        spec: ToolSpec::new(name)
            .description("Integer arithmetic on x and y.")
            .parameters(
                json!({"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                               "required": ["x", "y"]}),
            )
            .early(true),
        op,
        starts: starts.clone(),
    };
    let toolbox = Toolbox::new()
        .with(tool("add", |x, y| x + y))
        .unwrap()
        .with(tool("subtract", |x, y| x - y))
        .unwrap()
        .with(tool("multiply", |x, y| x * y))
        .unwrap()
        .with(tool("divide", |x, y| x / y))
        .unwrap();
    let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().unwrap());
    let session = store.create_session(0).await.unwrap();
    let engine = Engine::builder(store.clone()).toolbox(toolbox).config(config).build();
    let agent = Agent::new(engine, Arc::new(model(server)));
    let run = agent.run(&session, UserMessage::new(PROMPT), CancellationToken::new());
    let events: Vec<AgentEvent> = tokio::time::timeout(Duration::from_secs(60), run.collect())
        .await
        .expect("the agent run finished");
    (events, store, session)
}

fn status(status: u16, headers: &[(&str, &str)], message: &str) -> Reply {
    Reply::Status {
        status,
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
        body: json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}).to_string(),
    }
}

fn stop_of(events: &[AgentEvent]) -> AgentStop {
    match events.last() {
        Some(AgentEvent::AgentEnd { stop }) => stop.clone(),
        other => panic!("the last event is {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_retried_after_its_retry_after_and_leaves_nothing_stored() {
    let mut replies = vec![status(429, &[("retry-after", "1")], "rate limited")];
    replies.extend(exchanges().into_iter().map(Reply::Events));
    let server = serve(replies).await;
    let (events, store, session) = run_agent(&server, &Starts::default()).await;
    assert_eq!(stop_of(&events), AgentStop::Completed);

    let requests = server.model_requests();
    assert_eq!(requests.len(), 5, "one retry, then the four recorded exchanges");
    assert_eq!(requests[0].body, requests[1].body, "the retry is the same request");
    let waited = requests[1].at.duration_since(requests[0].at);
    assert!(
        waited >= Duration::from_secs(1),
        "retried after {waited:?}, before Retry-After"
    );
    // The failed attempt stored nothing: the transcript is the recorded conversation's, four responses in all.
    let log = store.load_log(&session).await.unwrap();
    let assistants = log
        .iter()
        .filter(|m| matches!(m.message, Message::Assistant(_)))
        .count();
    let errors = log
        .iter()
        .filter(|m| matches!(&m.message, Message::Assistant(a) if a.stop_reason.is_abnormal()))
        .count();
    assert_eq!(errors, 0);
    assert!(assistants >= 4, "{assistants} fragments");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_after_the_retry_budget_fails_the_run_with_the_providers_message() {
    let replies = vec![status(503, &[], "upstream is overloaded"); 3];
    let server = serve(replies).await;
    let (events, store, session) = run_agent(&server, &Starts::default()).await;
    let AgentStop::Error(message) = stop_of(&events) else {
        panic!("{:?}", stop_of(&events))
    };
    assert!(
        message.contains("HTTP 503") && message.contains("upstream is overloaded"),
        "{message}"
    );
    assert!(message.contains("3 attempts"), "{message}");
    assert_eq!(
        server.model_requests().len(),
        3,
        "the first attempt and the default two retries"
    );
    // Only the prompt is stored.
    assert_eq!(store.load_log(&session).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_client_errors_fail_at_once() {
    let server = serve(vec![status(400, &[], "tools.0.name: bad name")]).await;
    let (events, _, _) = run_agent(&server, &Starts::default()).await;
    let AgentStop::Error(message) = stop_of(&events) else {
        panic!("{:?}", stop_of(&events))
    };
    assert!(
        message.contains("HTTP 400") && message.contains("bad name"),
        "{message}"
    );
    assert_eq!(server.model_requests().len(), 1);
}

/// The first exchange cut by a connection reset right after its second call (`add`) was sealed: both calls were
/// committed and ran before the stream broke.
fn reset_after_two_calls() -> Vec<Reply> {
    let mut exchanges = exchanges().into_iter();
    let first = exchanges.next().unwrap();
    let second_call = first.iter().position(|e| e.contains("toolu_REDACTED_2")).unwrap();
    let sealed = second_call
        + first[second_call..]
            .iter()
            .position(|e| e.contains("content_block_stop"))
            .unwrap();
    let mut replies = vec![Reply::ResetAfter {
        events: first,
        keep: sealed + 1,
    }];
    replies.extend(exchanges.map(Reply::Events));
    replies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_reset_after_committed_calls_continues_from_their_results() {
    let server = serve(reset_after_two_calls()).await;
    let config = EngineConfig::default().continue_after_failed_stream(Some(1));
    let (events, store, session) = run_agent_with(&server, &Starts::default(), config).await;
    assert_eq!(stop_of(&events), AgentStop::Completed);
    let requests = server.model_requests();
    assert_eq!(
        requests.len(),
        4,
        "the broken response, then the three recorded follow-ups"
    );
    // The request after the reset carries both committed calls, each followed by its result.
    let messages = &requests[1].body["messages"];
    let assistant = messages[1]["content"].as_array().unwrap();
    let ids: Vec<&str> = assistant
        .iter()
        .filter(|block| block["type"] == "tool_use")
        .filter_map(|block| block["id"].as_str())
        .collect();
    assert_eq!(ids, ["toolu_REDACTED_1", "toolu_REDACTED_2"]);
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_REDACTED_1", "content": "6", "is_error": false},
            {"type": "tool_result", "tool_use_id": "toolu_REDACTED_2", "content": "8", "is_error": false},
        ]})
    );
    // The broken response is stored as failed, its calls kept; the transcript is valid to continue.
    let failed = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ResponseEnd { outcome, .. } if outcome.stop_reason.is_abnormal()))
        .count();
    assert_eq!(failed, 1);
    let context = store.model_context(&session).await.unwrap();
    let results = context.iter().filter(|m| matches!(m, Message::ToolResult(_))).count();
    assert_eq!(results, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_policy_a_stream_reset_stops_the_run() {
    let server = serve(reset_after_two_calls()).await;
    let (events, store, session) = run_agent(&server, &Starts::default()).await;
    assert_eq!(stop_of(&events), AgentStop::ResponseFailed);
    assert_eq!(server.model_requests().len(), 1);
    // The calls that ran keep their results.
    let context = store.model_context(&session).await.unwrap();
    let results: Vec<String> = context
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(result) => Some(result.text()),
            _ => None,
        })
        .collect();
    assert_eq!(results, ["6", "8"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_event_before_any_delta_is_retried() {
    let overloaded = vec![
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_x\",\"type\":\"message\",\
         \"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n"
            .to_owned(),
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
            .to_owned(),
    ];
    let mut replies = vec![Reply::Events(overloaded)];
    replies.extend(exchanges().into_iter().map(Reply::Events));
    let server = serve(replies).await;
    let (events, store, session) = run_agent(&server, &Starts::default()).await;
    assert_eq!(stop_of(&events), AgentStop::Completed);
    assert_eq!(server.model_requests().len(), 5);
    // Nothing of the overloaded attempt is stored: no response carries its id or failed.
    let log = store.load_log(&session).await.unwrap();
    assert!(!log.iter().any(|m| matches!(&m.message, Message::Assistant(a)
        if a.turn_id == "msg_x" || a.stop_reason.is_abnormal())));
}
