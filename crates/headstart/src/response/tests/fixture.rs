//! What the driver's unit tests share: an engine over an in-memory store with an early tool (`fetch`) and a sync one
//! (`write`), a driver for request 0 of one of its sessions, the deltas of a response, and the events the driver
//! emitted, by name.

use std::sync::Arc;
use std::task::{Context, Poll};

use headstart_core::{DeltaEvent, DoneReason, ToolArguments, ToolCall, ToolResultMessage, Usage};
use headstart_store::{SessionId, SqliteStore, TranscriptStore};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::TokioClock;
use crate::config::EngineConfig;
use crate::engine::Engine;
use crate::events::event::AgentEvent;
use crate::events::outbox::Outbox;
use crate::events::queue::EventStream;
use crate::response::driver::ResponseDriver;
use crate::response::telemetry::ChatSpan;
use crate::response::write_queue::ResultWrite;
use crate::tools::toolbox::Toolbox;
use crate::tools::typed::tool_fn;

/// The write of an error result `result of <id>` for a call that never started and has no run.
pub(super) fn result_write(id: &str) -> ResultWrite {
    let call = Arc::new(ToolCall {
        id: id.to_owned(),
        name: "write".to_owned(),
        arguments: ToolArguments::Valid(serde_json::Map::new()),
        provider_async: false,
    });
    ResultWrite {
        result: ToolResultMessage::error(&call, format!("result of {id}")),
        call,
        run: None,
        never_started: true,
    }
}

/// No arguments.
#[derive(Deserialize, JsonSchema)]
pub(super) struct NoArguments {}

/// An engine, one of its sessions, and both ends of a run's event queue.
pub(super) struct Fixture {
    pub engine: Engine,
    pub session: SessionId,
    pub tasks: TaskTracker,
    pub cancel: CancellationToken,
    pub out: Outbox,
    pub events: EventStream,
}

impl Fixture {
    /// `fetch` (early) and `write` (sync) under `config`, on tokio's clock.
    pub async fn new(config: EngineConfig) -> Fixture {
        let fetch = tool_fn("fetch", |_: NoArguments, _| async { Ok("fetched") }).early();
        let write = tool_fn("write", |_: NoArguments, _| async { Ok("written") });
        let toolbox = Toolbox::new()
            .with(fetch)
            .and_then(|toolbox| toolbox.with(write))
            .expect("the schemas compile");
        let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().expect("an in-memory store"));
        let engine = Engine::builder(store)
            .toolbox(toolbox)
            .config(config)
            .clock(Arc::new(TokioClock::starting_now()))
            .build();
        let session = engine.create_session().await.expect("a session");
        let cancel = CancellationToken::new();
        let run = engine.open_run(&cancel);
        Fixture {
            engine,
            session,
            tasks: run.tasks,
            cancel: run.cancel,
            out: run.out,
            events: run.events,
        }
    }

    /// A fixture whose driver writes to a session the store does not have: every write fails.
    pub async fn failing_store(config: EngineConfig) -> Fixture {
        let mut fixture = Fixture::new(config).await;
        fixture.session = SessionId::from("no-such-session");
        fixture
    }

    /// The driver of request 0.
    pub fn driver(&mut self) -> ResponseDriver<'_> {
        let chat = ChatSpan::open(&self.session, 0, None, None, 0);
        ResponseDriver::new(
            Arc::clone(self.engine.parts()),
            self.session.clone(),
            0,
            self.tasks.clone(),
            &mut self.out,
            chat,
            0,
        )
    }

    /// The session's stored messages, by role (`assistant:<stop reason>`, `tool_result:<text>`).
    pub async fn log(&self) -> Vec<String> {
        let log = self.engine.store().load_log(&self.session).await.expect("the log");
        log.into_iter()
            .map(|stored| match stored.message {
                headstart_core::Message::Assistant(fragment) => format!("assistant:{}", fragment.stop_reason),
                headstart_core::Message::ToolResult(result) => format!("tool_result:{}", result.text()),
                headstart_core::Message::User(_) => "user".to_owned(),
            })
            .collect()
    }
}

/// The events queued so far, by name, without waiting (the driver must have flushed them).
pub(super) fn taken(events: &mut EventStream) -> Vec<String> {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let mut names = Vec::new();
    while let Poll::Ready(Some(emitted)) = events.poll_next_emitted(&mut cx) {
        names.push(name(&emitted.event));
    }
    names
}

/// An event's name, with what tells events of one kind apart: `message_update:<index>`,
/// `message_end:<stored>`, `tool_execution_start:<call id>`.
fn name(event: &AgentEvent) -> String {
    match event {
        AgentEvent::MessageUpdate { index, .. } => format!("message_update:{index}"),
        AgentEvent::MessageEnd { seq, .. } => {
            format!("message_end:{}", if seq.is_some() { "stored" } else { "not stored" })
        }
        AgentEvent::ToolExecutionStart { call } => format!("tool_execution_start:{}", call.id),
        other => other.type_name().to_owned(),
    }
}

/// `start`.
pub(super) fn start() -> DeltaEvent {
    DeltaEvent::Start {
        model: None,
        response_id: Some("r0".to_owned()),
    }
}

/// The three events of a complete call `id` to `tool` at `index`, without arguments.
pub(super) fn call(index: usize, id: &str, tool: &str) -> [DeltaEvent; 3] {
    [
        DeltaEvent::ToolcallStart {
            index,
            id: id.to_owned(),
            name: tool.to_owned(),
            early: false,
            provider_async: false,
        },
        DeltaEvent::ToolcallDelta {
            index,
            delta: "{}".to_owned(),
        },
        DeltaEvent::ToolcallEnd { index, arguments: None },
    ]
}

/// A complete text block at `index`.
pub(super) fn text(index: usize, text: &str) -> [DeltaEvent; 3] {
    [
        DeltaEvent::TextStart { index },
        DeltaEvent::TextDelta {
            index,
            delta: text.to_owned(),
        },
        DeltaEvent::TextEnd { index },
    ]
}

/// `done` with `reason`.
pub(super) fn done(reason: DoneReason) -> DeltaEvent {
    DeltaEvent::Done {
        stop_reason: reason,
        usage: Usage::default(),
    }
}
