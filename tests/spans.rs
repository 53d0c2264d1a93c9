//! The engine's OpenTelemetry GenAI spans, recorded by an in-memory `tracing` layer: the tree (`invoke_agent` >
//! `chat` and `execute_tool`), the attribute names and values on a replayed scenario, the overlap of an early call
//! with its `chat` span, and the opt-in content capture and `error.type` on a wrapped response.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use headstart::core::{DoneReason, Usage};
use headstart::schemars::JsonSchema;
use headstart::store::SqliteStore;
use headstart::{tool_fn, CancellationToken, DeltaEvent, Engine, EngineConfig, ToolContext, ToolFailure, Toolbox};
use headstart_sim::replay::{replay_blocking, ReplayOptions};
use headstart_sim::scenario::Scenario;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

/// One recorded span: its fields as text, its parent, and when (in layer callbacks) it opened and closed.
#[derive(Debug, Clone)]
struct SpanRecord {
    id: u64,
    name: &'static str,
    parent: Option<u64>,
    fields: BTreeMap<String, String>,
    opened: usize,
    closed: Option<usize>,
}

impl SpanRecord {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

#[derive(Default)]
struct Log {
    spans: Vec<SpanRecord>,
    tick: usize,
}

/// The in-memory layer.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Log>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent = ctx
            .span(id)
            .and_then(|span| span.parent())
            .map(|parent| parent.id().into_u64());
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let mut log = self.0.lock().expect("the log");
        log.tick += 1;
        let opened = log.tick;
        log.spans.push(SpanRecord {
            id: id.into_u64(),
            name: attrs.metadata().name(),
            parent,
            fields,
            opened,
            closed: None,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut log = self.0.lock().expect("the log");
        if let Some(span) = log.spans.iter_mut().rev().find(|span| span.id == id.into_u64()) {
            values.record(&mut Fields(&mut span.fields));
        }
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        let mut log = self.0.lock().expect("the log");
        log.tick += 1;
        let tick = log.tick;
        if let Some(span) = log.spans.iter_mut().rev().find(|span| span.id == id.into_u64()) {
            span.closed = Some(tick);
        }
    }
}

impl Recorder {
    fn spans(&self) -> Vec<SpanRecord> {
        self.0.lock().expect("the log").spans.clone()
    }
}

fn named<'a>(spans: &'a [SpanRecord], name: &str) -> Vec<&'a SpanRecord> {
    spans.iter().filter(|span| span.name == name).collect()
}

#[test]
fn a_replayed_scenario_has_the_genai_span_tree_and_attributes() {
    let recorder = Recorder::default();
    let subscriber = tracing_subscriber::registry().with(recorder.clone());
    let scenario = Scenario::load("tests/scenarios/01-two-async-overlap.json").expect("the scenario loads");
    let outcome =
        tracing::subscriber::with_default(subscriber, || replay_blocking(&scenario, &ReplayOptions::default()));
    assert_eq!(outcome.exit_code, 0, "{:?}", outcome.report.error);
    let spans = recorder.spans();

    let agents = named(&spans, "invoke_agent");
    assert_eq!(agents.len(), 1, "{spans:#?}");
    let agent = agents[0];
    assert_eq!(agent.field("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(agent.field("gen_ai.provider.name"), Some("headstart.sim"));
    let conversation = agent.field("gen_ai.conversation.id").expect("the session");
    assert!(!conversation.is_empty());
    assert!(agent.closed.is_some(), "the run's span closes");

    let chats = named(&spans, "chat");
    assert_eq!(chats.len(), 2, "one per model request");
    for (request, chat) in chats.iter().enumerate() {
        assert_eq!(chat.parent, Some(agent.id), "chat is a child of invoke_agent");
        assert_eq!(chat.field("otel.name"), Some("chat simulated"));
        assert_eq!(chat.field("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.field("gen_ai.provider.name"), Some("headstart.sim"));
        assert_eq!(chat.field("gen_ai.request.model"), Some("simulated"));
        assert_eq!(chat.field("gen_ai.conversation.id"), Some(conversation));
        assert_eq!(chat.field("headstart.request"), Some(request.to_string().as_str()));
        // The first event of each response is at 0 ms of it, on the virtual clock.
        assert_eq!(chat.field("headstart.time_to_first_chunk_ms"), Some("0.0"));
        assert_eq!(chat.field("error.type"), None);
    }
    let first = chats[0];
    assert_eq!(first.field("gen_ai.response.finish_reasons"), Some("tool_use"));
    assert_eq!(first.field("gen_ai.usage.input_tokens"), Some("10"));
    assert_eq!(first.field("gen_ai.usage.output_tokens"), Some("50"));
    assert_eq!(first.field("gen_ai.usage.cache_read.input_tokens"), Some("0"));
    assert_eq!(first.field("gen_ai.usage.cache_creation.input_tokens"), Some("0"));
    assert_eq!(chats[1].field("gen_ai.response.finish_reasons"), Some("stop"));
    assert_eq!(chats[1].field("gen_ai.usage.input_tokens"), Some("30"));

    let tools = named(&spans, "execute_tool");
    assert_eq!(tools.len(), 2, "{tools:#?}");
    for (tool, id) in tools.iter().zip(["call_1", "call_2"]) {
        assert_eq!(tool.parent, Some(agent.id), "execute_tool is a sibling of chat");
        assert_eq!(tool.field("otel.name"), Some("execute_tool lookup"));
        assert_eq!(tool.field("gen_ai.operation.name"), Some("execute_tool"));
        assert_eq!(tool.field("gen_ai.tool.name"), Some("lookup"));
        assert_eq!(tool.field("gen_ai.tool.call.id"), Some(id));
        assert_eq!(tool.field("gen_ai.tool.type"), Some("function"));
        assert_eq!(tool.field("headstart.early"), Some("true"));
        // Sealed and started at the same virtual instant: the commit in between takes no virtual time.
        assert_eq!(tool.field("headstart.seal_to_start_ms"), Some("0.0"));
        assert_eq!(tool.field("headstart.commit_ms"), Some("0.0"));
        assert_eq!(tool.field("error.type"), None);
        assert_eq!(
            tool.field("gen_ai.tool.call.arguments"),
            None,
            "content is not captured by default"
        );
        assert_eq!(tool.field("gen_ai.tool.call.result"), None);
        // The point of early execution, as a trace view shows it: the call runs inside its response's stream.
        let chat_closed = first.closed.expect("the chat span closed");
        assert!(tool.opened < chat_closed, "{id} starts before its chat span ends");
        assert!(tool.opened > first.opened);
    }
    // call_2 ends (220 ms) before the stream does (400 ms); call_1 (330 ms) too.
    assert!(tools.iter().all(|tool| tool.closed < first.closed));
}

/// A tool that always fails.
#[derive(serde::Deserialize, JsonSchema)]
struct Path {
    path: String,
}

#[tokio::test]
async fn a_wrapped_response_captures_content_on_request_and_names_the_error() {
    let recorder = Recorder::default();
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(recorder.clone()));
    let read = tool_fn("read", |args: Path, _ctx: ToolContext| async move {
        let text = std::fs::read_to_string(&args.path)?;
        Ok::<_, ToolFailure>(text)
    });
    let engine = Engine::builder(Arc::new(SqliteStore::open_in_memory().expect("store")))
        .toolbox(Toolbox::new().with(read).expect("the schema compiles"))
        .config(EngineConfig::default().capture_content(true))
        .build();
    let session = engine.create_session().await.expect("a session");
    let deltas = futures::stream::iter(
        [
            DeltaEvent::Start {
                model: Some("m-2025".into()),
                response_id: Some("resp_1".into()),
            },
            DeltaEvent::ToolcallStart {
                index: 0,
                id: "c1".into(),
                name: "read".into(),
                early: false,
                provider_async: false,
            },
            DeltaEvent::ToolcallEnd {
                index: 0,
                arguments: Some(serde_json::json!({"path": "/nonexistent/headstart"})),
            },
            DeltaEvent::Done {
                stop_reason: DoneReason::ToolUse,
                usage: Usage {
                    cache_read: 7,
                    cache_write: 3,
                    ..Usage::default()
                },
            },
        ]
        .map(Ok),
    );
    let caller = tracing::info_span!("caller");
    let mut events = {
        let _entered = caller.enter();
        engine
            .wrap_next(&session, deltas, CancellationToken::new())
            .await
            .expect("wraps")
    };
    while events.next().await.is_some() {}
    drop(events);
    let spans = recorder.spans();
    let caller = named(&spans, "caller")[0].id;
    let chat = named(&spans, "chat")[0];
    assert_eq!(
        chat.parent,
        Some(caller),
        "a wrapped response's spans belong to the caller's"
    );
    assert_eq!(chat.field("otel.name"), Some("chat"), "wrap knows no request model");
    assert_eq!(chat.field("gen_ai.response.model"), Some("m-2025"));
    assert_eq!(chat.field("gen_ai.response.id"), Some("resp_1"));
    assert_eq!(chat.field("gen_ai.usage.cache_read.input_tokens"), Some("7"));
    assert_eq!(chat.field("gen_ai.usage.cache_creation.input_tokens"), Some("3"));
    let tool = named(&spans, "execute_tool")[0];
    assert_eq!(tool.parent, Some(caller));
    assert_eq!(
        tool.field("headstart.early"),
        Some("false"),
        "a sync call runs after the stream"
    );
    assert_eq!(tool.field("error.type"), Some("error"));
    assert_eq!(
        tool.field("gen_ai.tool.call.arguments"),
        Some(r#"{"path":"/nonexistent/headstart"}"#)
    );
    let expected = std::fs::read_to_string("/nonexistent/headstart")
        .expect_err("missing")
        .to_string();
    assert_eq!(tool.field("gen_ai.tool.call.result"), Some(expected.as_str()));
    assert!(
        tool.opened > chat.closed.expect("closed"),
        "sync calls start after the stream ended"
    );
}
