//! End to end over real HTTP: a local server (hyper on 127.0.0.1, port 0) replays the four recorded Anthropic
//! exchanges of `tests/fixtures/providers/` one SSE event at a time with small delays; `HttpModel` talks to it
//! and an `Agent` runs async arithmetic tools. The first calls start while their HTTP response is still streaming.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use headstart::{
    Agent, AgentEvent, AgentStop, Arguments, CancellationToken, DeltaEvent, Engine, Message, SqliteStore, Tool,
    ToolContext, ToolError, ToolOutput, Toolbox, TranscriptStore, UserMessage,
};
use headstart_providers::http::{HttpModel, HttpModelConfig};
use headstart_providers::{read_capture, WireFormat};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use serde_json::{json, Value};

const DELAY: Duration = Duration::from_millis(15);
const KEY_VARIABLE: &str = "HEADSTART_PROVIDERS_E2E_TEST_KEY";
const PROMPT: &str = "Calculate ((10 - 4) * (3 + 5)) / 3 and describe the result in one short paragraph.";

type Starts = Arc<Mutex<Vec<(String, Instant)>>>;

struct Arithmetic {
    name: &'static str,
    op: fn(i64, i64) -> i64,
    starts: Starts,
}

#[async_trait::async_trait]
impl Tool for Arithmetic {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        "Integer arithmetic on x and y."
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
               "required": ["x", "y"]})
    }

    fn is_async(&self) -> bool {
        true
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

/// One request as the server saw it: the `x-api-key` and `anthropic-version` headers and the JSON body.
#[derive(Debug, Clone)]
struct SeenRequest {
    api_key: Option<String>,
    version: Option<String>,
    body: Value,
}

/// What the server saw and when each response body ended.
#[derive(Default)]
struct Recorded {
    requests: Mutex<Vec<SeenRequest>>,
    finished: Mutex<Vec<(usize, Instant)>>,
}

/// Serves exchange k of the cassette to the k-th request, one SSE event per `DELAY`.
async fn serve(exchanges: Arc<Vec<Vec<String>>>, recorded: Arc<Recorded>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let counter = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (exchanges, recorded, counter) = (exchanges.clone(), recorded.clone(), counter.clone());
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let (exchanges, recorded, counter) = (exchanges.clone(), recorded.clone(), counter.clone());
                async move {
                    let header = |name: &str| {
                        request
                            .headers()
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_owned)
                    };
                    let (api_key, version) = (header("x-api-key"), header("anthropic-version"));
                    let body = request.into_body().collect().await.unwrap().to_bytes();
                    let body: Value = serde_json::from_slice(&body).unwrap();
                    recorded
                        .requests
                        .lock()
                        .unwrap()
                        .push(SeenRequest { api_key, version, body });
                    let exchange = counter.fetch_add(1, Ordering::SeqCst);
                    let events = exchanges.get(exchange).cloned().unwrap_or_default();
                    let frames: BoxStream<'static, Result<Frame<Bytes>, Infallible>> =
                        futures::stream::unfold(0usize, move |next| {
                            let (events, recorded) = (events.clone(), recorded.clone());
                            async move {
                                if next == events.len() {
                                    recorded.finished.lock().unwrap().push((exchange, Instant::now()));
                                    return None;
                                }
                                tokio::time::sleep(DELAY).await;
                                Some((Ok(Frame::data(Bytes::from(events[next].clone()))), next + 1))
                            }
                        })
                        .boxed();
                    let response = Response::builder()
                        .header("content-type", "text/event-stream; charset=utf-8")
                        .body(StreamBody::new(frames))
                        .unwrap();
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    address
}

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/providers")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

/// Each exchange's body split into its SSE events (each with its blank line).
fn exchanges() -> Vec<Vec<String>> {
    read_capture(&fixture("anthropic__multi_turn_streaming_tools.yaml"))
        .unwrap()
        .into_iter()
        .map(|exchange| exchange.body.split_inclusive("\n\n").map(str::to_owned).collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_tools_start_while_the_http_response_is_still_streaming() {
    let exchanges = Arc::new(exchanges());
    assert_eq!(exchanges.len(), 4);
    let recorded = Arc::new(Recorded::default());
    let address = serve(exchanges.clone(), recorded.clone()).await;

    // Edition 2021: setting a variable nobody else reads is fine.
    std::env::set_var(KEY_VARIABLE, "test-key");
    let config = HttpModelConfig::new(WireFormat::Anthropic, "claude-sonnet-4-6")
        .with_base_url(format!("http://{address}/v1"))
        .with_api_key_env(Some(KEY_VARIABLE));
    let model = HttpModel::new(config).unwrap();

    let starts: Starts = Arc::default();
    let tool = |name, op| Arithmetic {
        name,
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
    let engine = Engine::builder(store.clone()).toolbox(toolbox).build();
    let agent = Agent::new(engine, Arc::new(model));

    let run = agent.run(&session, UserMessage::new(PROMPT), CancellationToken::new());
    let events: Vec<AgentEvent> = tokio::time::timeout(Duration::from_secs(60), run.collect())
        .await
        .expect("the agent run finished");

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
    let requests = recorded.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 4);
    for request in &requests {
        assert_eq!(request.api_key.as_deref(), Some("test-key"));
        assert_eq!(request.version.as_deref(), Some("2023-06-01"));
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
    let finished = recorded.finished.lock().unwrap().clone();
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
