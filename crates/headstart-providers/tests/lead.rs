//! Early execution leads the stream on every streamed wire format, through `HttpModel` and the engine: the replay
//! server paces a recorded two-call response at 50 ms an event and holds back the event that begins the second
//! call until the first call's early tool has fetched a gate page (`Reply::Gated`).
//!
//! The lead is structural, not a race between timers: the first call started before the second call began, and
//! every held-back event came at least 50 ms after the one before, so the call started at least that many events,
//! and that many pauses, before the stream's end, however loaded the machine. Chat Completions sealed at
//! `finish_reason` (`SealAt::Finish`, the rule before issue 29) is the control: its gate opens only by its timeout,
//! and the fetch comes with no more than the last two events still to send. Gemini sends each call whole, both in
//! its last chunk: it has no second call to hold back and no headroom (docs/performance.md).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use headstart::{
    Arguments, CancellationToken, Engine, SessionId, SqliteStore, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
    Toolbox, TranscriptStore,
};
use headstart_providers::http::{HttpModel, HttpModelConfig};
use headstart_providers::replay_server::gate::second_call_start;
use headstart_providers::replay_server::{cassette_events, Page, ReplayServer, Reply};
use headstart_providers::{SealAt, WireFormat};

const PACE: Duration = Duration::from_millis(50);
const GATE: &str = "/gate";
const KEY_VARIABLE: &str = "HEADSTART_PROVIDERS_LEAD_TEST_KEY";

/// An early tool. The first call's tool records whether its own call was durable, then fetches the gate.
struct Early {
    spec: ToolSpec,
    gate: Option<String>,
    store: Arc<SqliteStore>,
    durable_at_start: Arc<Mutex<Vec<bool>>>,
}

#[async_trait::async_trait]
impl Tool for Early {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, _arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        if let Some(url) = &self.gate {
            let session = context.session_id.clone().ok_or("no session")?;
            let runs = self
                .store
                .tool_runs(&session)
                .await
                .map_err(|error| error.to_string())?;
            let durable = runs.iter().any(|run| run.call_id == context.call_id);
            self.durable_at_start.lock().map_err(|_| "poisoned")?.push(durable);
            let body = reqwest::get(url).await.map_err(|error| error.to_string())?;
            return Ok(ToolOutput::text(body.text().await.map_err(|error| error.to_string())?));
        }
        Ok(ToolOutput::text("ran"))
    }
}

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/providers")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

/// What one paced, gated response did.
struct Outcome {
    lead: headstart_providers::replay_server::Lead,
    held_back: usize,
    durable_at_start: Vec<bool>,
    results: Vec<(String, String)>,
}

async fn run(name: &str, format: WireFormat, tools: [&str; 2], seal_at: SealAt, gate_timeout: Duration) -> Outcome {
    let events = cassette_events(&fixture(name)).unwrap().remove(0);
    let before = second_call_start(&events).expect("the recording has a second call");
    let held_back = events.len() - before;
    let reply = Reply::Gated {
        events,
        before,
        path: GATE.to_owned(),
        timeout: gate_timeout,
    };
    let pages = HashMap::from([(
        GATE.to_owned(),
        Page {
            delay: Duration::ZERO,
            body: "open".to_owned(),
        },
    )]);
    let server = ReplayServer::start(vec![reply], pages, PACE).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("lead.db"), Default::default()).unwrap());
    let durable_at_start: Arc<Mutex<Vec<bool>>> = Arc::default();
    let tool = |name: &str, gate: Option<String>| Early {
        spec: ToolSpec::new(name)
            .description("An early tool of the recording.")
            .early(true),
        gate,
        store: Arc::clone(&store),
        durable_at_start: Arc::clone(&durable_at_start),
    };
    let toolbox = Toolbox::new()
        .with(tool(tools[0], Some(server.url(GATE))))
        .unwrap()
        .with(tool(tools[1], None))
        .unwrap();
    let engine = Engine::builder(Arc::clone(&store) as Arc<dyn TranscriptStore>)
        .toolbox(toolbox)
        .build();
    std::env::set_var(KEY_VARIABLE, "test-key");
    let mut config = HttpModelConfig::new(format, "m")
        .with_base_url(server.url("/v1"))
        .with_api_key_env(Some(KEY_VARIABLE));
    config.convert.seal_at = seal_at;
    let model = HttpModel::new(config).unwrap();

    let session: SessionId = engine.create_session().await.unwrap();
    let stream = model.stream_context(&[], &[]).await.unwrap();
    let mut events = engine
        .wrap_next(&session, stream, CancellationToken::new())
        .await
        .unwrap();
    while events.next().await.is_some() {}

    let log = store.load_log(&session).await.unwrap();
    let results = log
        .iter()
        .filter_map(|stored| match &stored.message {
            headstart::Message::ToolResult(result) => Some((result.tool_name.clone(), result.text())),
            _ => None,
        })
        .collect();
    let durable_at_start = durable_at_start.lock().unwrap().clone();
    Outcome {
        lead: server.lead(GATE, 0).expect("the first call fetched the gate"),
        held_back,
        durable_at_start,
        results,
    }
}

const CASES: [(&str, WireFormat, [&str; 2]); 3] = [
    (
        "openai_chat__streaming_gpt41_parallel_model.yaml",
        WireFormat::OpenAiChat,
        ["alpha", "beta"],
    ),
    (
        "openai_responses__parallel_tool_calls.yaml",
        WireFormat::OpenAiResponses,
        ["lookup_harbor_label", "lookup_orchard_label"],
    ),
    (
        "anthropic__multi_turn_streaming_tools.yaml",
        WireFormat::Anthropic,
        ["subtract", "add"],
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_every_streamed_format_the_first_call_starts_before_the_second_begins() {
    for (name, format, tools) in CASES {
        let outcome = run(name, format, tools, SealAt::default(), Duration::from_secs(60)).await;
        let Outcome {
            lead,
            held_back,
            durable_at_start,
            mut results,
        } = outcome;
        assert!(held_back >= 4, "{name}: {held_back}");
        assert!(
            lead.events_after >= held_back,
            "{name}: {lead:?}, {held_back} held back"
        );
        let pauses = u32::try_from(held_back - 1).unwrap();
        assert!(lead.ms >= (PACE * pauses).as_secs_f64() * 1000.0, "{name}: {lead:?}");
        if format == WireFormat::OpenAiChat {
            assert!(lead.ms >= 250.0, "{name}: {lead:?}");
        }
        assert_eq!(
            durable_at_start,
            [true],
            "{name}: the call was committed before its body began"
        );
        results.sort();
        let mut expected = vec![
            (tools[0].to_owned(), "open".to_owned()),
            (tools[1].to_owned(), "ran".to_owned()),
        ];
        expected.sort();
        assert_eq!(results, expected, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_completions_sealed_at_finish_reason_starts_the_first_call_at_the_end() {
    let (name, format, tools) = CASES[0];
    let outcome = run(name, format, tools, SealAt::Finish, Duration::from_millis(500)).await;
    assert!(outcome.lead.events_after <= 2, "{:?}", outcome.lead);
    assert_eq!(outcome.results.len(), 2);
}
