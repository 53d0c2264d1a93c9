//! Typed tools end to end: the example runs, the schema `schemars` emits is what every provider request builder
//! sends and stays self-contained (`$defs` included), and the engine numbers a session's requests itself.

use std::sync::Arc;

use futures::StreamExt;
use headstart::core::{DoneReason, Usage};
use headstart::store::SqliteStore;
use headstart::{CancellationToken, Clock, DeltaEvent, Engine, TranscriptStore};
use headstart_providers::request::{build_body, RequestSettings};
use headstart_providers::WireFormat;
use serde_json::{json, Value};

#[allow(dead_code)] // its `main` is for `cargo run --example typed_tools`
#[path = "../examples/typed_tools.rs"]
mod typed_tools;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typed_tools_example_runs() {
    let summary = typed_tools::run().await.expect("the example runs");
    let first_start = summary.events.iter().position(|e| *e == "tool_execution_start");
    let last_update = summary.events.iter().rposition(|e| *e == "message_update");
    assert!(
        first_start < last_update,
        "search starts while the model streams: {:?}",
        summary.events
    );
    let by_id = |id: &str| summary.results.iter().find(|(call, ..)| call == id).cloned();
    assert_eq!(
        by_id("c1"),
        Some(("c1".into(), false, "3 results for tokio since 2020".into()))
    );
    let (_, c2_error, c2_text) = by_id("c2").expect("c2 has a result");
    assert!(
        !c2_error && c2_text.starts_with("wrote ") && c2_text.ends_with("tokio.txt"),
        "{c2_text}"
    );
    let (_, c3_error, c3_text) = by_id("c3").expect("c3 has a result");
    let missing = std::env::temp_dir().join("headstart-no-such-dir").join("x.txt");
    let io_text = std::fs::write(missing, "")
        .expect_err("the folder does not exist")
        .to_string();
    assert!(c3_error);
    assert_eq!(c3_text, io_text, "the io::Error's text is the result");
}

/// Where each wire format puts the first tool's schema.
fn sent_schema(format: WireFormat, body: &Value) -> &Value {
    match format {
        WireFormat::OpenAiChat => &body["tools"][0]["function"]["parameters"],
        WireFormat::OpenAiResponses => &body["tools"][0]["parameters"],
        WireFormat::Anthropic => &body["tools"][0]["input_schema"],
        WireFormat::Gemini => &body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"],
    }
}

/// Every `$ref` in `value`, recursively.
fn refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match (key.as_str(), inner) {
                    ("$ref", Value::String(target)) => out.push(target.clone()),
                    _ => refs(inner, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| refs(item, out)),
        _ => {}
    }
}

#[test]
fn every_provider_sends_the_typed_schema_whole_and_it_compiles() {
    let engine = Engine::builder(Arc::new(SqliteStore::open_in_memory().expect("store")))
        .toolbox(typed_tools_toolbox())
        .build();
    let tools = engine.toolbox().definitions();
    let schema = &tools[0].parameters;
    assert_eq!(schema["type"], "object", "providers want an object schema: {schema}");
    let mut targets = Vec::new();
    refs(schema, &mut targets);
    assert_eq!(targets, ["#/$defs/DateRange"], "{schema}");
    for format in WireFormat::ALL {
        let body = build_body(format, &RequestSettings::default(), &[], &tools);
        let sent = sent_schema(format, &body);
        assert_eq!(sent, schema, "{}: the schema is sent verbatim", format.as_str());
        // What the provider receives is self-contained: its references resolve inside it.
        let validator = jsonschema::validator_for(sent).expect("the sent schema compiles");
        assert!(validator.is_valid(&json!({"q": "x", "since": {"from": 2020}})));
        assert!(
            !validator.is_valid(&json!({"q": "x", "since": {"from": "2020"}})),
            "the $ref is followed"
        );
    }
}

/// The example's toolbox, through its public run path (the example's module is private to it).
fn typed_tools_toolbox() -> headstart::Toolbox {
    typed_tools::toolbox(std::env::temp_dir()).expect("the schemas compile")
}

/// A clock stuck at one reading.
struct Fixed(i64);

impl Clock for Fixed {
    fn now_us(&self) -> i64 {
        self.0
    }
}

fn one_text_response() -> impl futures::Stream<Item = Result<DeltaEvent, headstart::ModelError>> + Send + 'static {
    futures::stream::iter(
        [
            DeltaEvent::Start {
                model: None,
                response_id: None,
            },
            DeltaEvent::TextStart { index: 0 },
            DeltaEvent::TextDelta {
                index: 0,
                delta: "hi".into(),
            },
            DeltaEvent::TextEnd { index: 0 },
            DeltaEvent::Done {
                stop_reason: DoneReason::Stop,
                usage: Usage::default(),
            },
        ]
        .map(Ok),
    )
}

/// The request number of each `turn_start`.
async fn turn_of(engine: &Engine, session: &headstart::SessionId) -> u32 {
    let mut events = engine
        .wrap_next(session, one_text_response(), CancellationToken::new())
        .await
        .expect("the log loads");
    let mut request = None;
    while let Some(event) = events.next().await {
        if let headstart::AgentEvent::ResponseStart { request: number } = event {
            request = Some(number);
        }
    }
    request.expect("a turn_start")
}

#[tokio::test]
async fn the_engine_numbers_requests_from_the_log_and_stamps_sessions_with_its_clock() {
    let store = Arc::new(SqliteStore::open_in_memory().expect("store"));
    let engine = Engine::builder(store.clone()).clock(Arc::new(Fixed(1_234))).build();
    let session = engine.create_session().await.expect("a session");
    let info = store.sessions().await.expect("sessions");
    assert_eq!(
        info.iter().find(|s| s.id == session).map(|s| s.created_at_us),
        Some(1_234)
    );
    assert_eq!(turn_of(&engine, &session).await, 0);
    assert_eq!(turn_of(&engine, &session).await, 1);
    // A restart: a new engine over the same store continues the numbering, since it is read from the log.
    let restarted = Engine::builder(store.clone()).build();
    assert_eq!(restarted.next_request(&session).await.expect("the log loads"), 2);
    assert_eq!(turn_of(&restarted, &session).await, 2);
    let requests: Vec<Option<u32>> = store
        .load_log(&session)
        .await
        .expect("log")
        .iter()
        .map(|stored| stored.request)
        .collect();
    assert_eq!(requests, [Some(0), Some(1), Some(2)]);
}

/// No arguments.
#[derive(serde::Deserialize, headstart::schemars::JsonSchema)]
struct NoArgs {}

#[tokio::test(start_paused = true)]
async fn a_layered_toolbox_retries_through_the_engine() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use headstart::layer::RetryLayer;
    use headstart::{tool_fn, ToolContext, ToolFailure, Toolbox};

    let attempts = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&attempts);
    let flaky = tool_fn("flaky", move |_: NoArgs, _ctx: ToolContext| {
        let attempt = counter.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            if attempt < 3 {
                return Err(ToolFailure::msg(format!("attempt {attempt} failed")));
            }
            Ok(format!("attempt {attempt} worked"))
        }
    })
    .early()
    .idempotent();
    let toolbox = Toolbox::new()
        .with(flaky)
        .expect("schema")
        .layer(RetryLayer::new(3).backoff(Duration::from_millis(100), Duration::from_secs(1)));
    let engine = Engine::builder(Arc::new(SqliteStore::open_in_memory().expect("store")))
        .toolbox(toolbox)
        .build();
    assert!(
        engine.toolbox().get("flaky").is_some_and(|tool| tool.spec().early),
        "the layer keeps the flags"
    );
    let session = engine.create_session().await.expect("session");
    let deltas = futures::stream::iter(
        [
            DeltaEvent::Start {
                model: None,
                response_id: None,
            },
            DeltaEvent::ToolcallStart {
                index: 0,
                id: "c1".into(),
                name: "flaky".into(),
                early: false,
                provider_async: false,
            },
            DeltaEvent::ToolcallEnd {
                index: 0,
                arguments: Some(json!({})),
            },
            DeltaEvent::Done {
                stop_reason: DoneReason::ToolUse,
                usage: Usage::default(),
            },
        ]
        .map(Ok),
    );
    let started = tokio::time::Instant::now();
    let mut events = engine
        .wrap_next(&session, deltas, CancellationToken::new())
        .await
        .expect("wraps");
    let mut result = None;
    while let Some(event) = events.next().await {
        if let headstart::AgentEvent::MessageEnd { message, .. } = event {
            if let headstart::Message::ToolResult(tool_result) = message.as_ref() {
                result = Some((tool_result.is_error, tool_result.text()));
            }
        }
    }
    assert_eq!(result, Some((false, "attempt 3 worked".to_owned())));
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(300),
        "100 ms, then 200 ms of backoff"
    );
}
