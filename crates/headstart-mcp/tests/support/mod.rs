//! Running MCP tools the way an agent does: through the engine, over a scripted delta stream.

#![allow(dead_code)] // Each test file uses a different part.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use headstart::core::{DoneReason, ToolResultMessage, Usage};
use headstart::{
    AgentEvent, CancellationToken, DeltaEvent, Engine, Message, ModelError, SqliteStore, ToolOutput, Toolbox,
    TranscriptStore,
};

/// The deltas of one sealed call.
pub use headstart_testkit::fixtures::deltas::sealed_call as call;

/// The first delta of a response.
pub fn start() -> DeltaEvent {
    DeltaEvent::Start {
        model: None,
        response_id: None,
    }
}

/// The last delta of a response that called tools.
pub fn done() -> DeltaEvent {
    DeltaEvent::Done {
        stop_reason: DoneReason::ToolUse,
        usage: Usage::default(),
    }
}

/// A response made of these deltas, sent at once.
pub fn deltas(
    events: impl IntoIterator<Item = DeltaEvent>,
) -> impl Stream<Item = Result<DeltaEvent, ModelError>> + Send + 'static {
    futures::stream::iter(events.into_iter().map(Ok).collect::<Vec<_>>())
}

/// The events of one wrapped response.
pub struct Run {
    /// Every event, in order.
    pub events: Vec<AgentEvent>,
}

impl Run {
    /// The durable result of call `id`.
    pub fn result(&self, id: &str) -> &ToolResultMessage {
        self.events
            .iter()
            .find_map(|event| match event {
                AgentEvent::MessageEnd { message, .. } => match message.as_ref() {
                    Message::ToolResult(result) if result.tool_call_id == id => Some(result),
                    _ => None,
                },
                _ => None,
            })
            .unwrap_or_else(|| panic!("no result for {id}: {:?}", self.names()))
    }

    /// The text of call `id`'s result.
    pub fn text(&self, id: &str) -> String {
        self.result(id)
            .content
            .iter()
            .filter_map(|block| block.as_text())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The partial results of call `id`.
    pub fn updates(&self, id: &str) -> Vec<&ToolOutput> {
        self.events
            .iter()
            .filter_map(|event| match event {
                AgentEvent::ToolExecutionUpdate { tool_call_id, update } if tool_call_id == id => Some(update),
                _ => None,
            })
            .collect()
    }

    /// Where the first event matching `predicate` is.
    pub fn position(&self, predicate: impl Fn(&AgentEvent) -> bool) -> usize {
        self.events
            .iter()
            .position(predicate)
            .unwrap_or_else(|| panic!("no such event in {:?}", self.names()))
    }

    /// Where call `id` started.
    pub fn started(&self, id: &str) -> usize {
        self.position(|event| matches!(event, AgentEvent::ToolExecutionStart { call } if call.id == id))
    }

    /// The event names, for failure messages.
    pub fn names(&self) -> Vec<&'static str> {
        self.events.iter().map(AgentEvent::type_name).collect()
    }
}

/// Wraps `stream` with an engine holding `toolbox`, and collects its events; `on_event` sees each as it comes.
pub async fn run<S>(
    toolbox: Toolbox,
    stream: S,
    cancel: CancellationToken,
    mut on_event: impl FnMut(&AgentEvent),
) -> Run
where
    S: Stream<Item = Result<DeltaEvent, ModelError>> + Send + 'static,
{
    let store = Arc::new(SqliteStore::open_in_memory().expect("an in-memory store"));
    let engine = Engine::builder(store.clone()).toolbox(toolbox).build();
    let session = store.create_session(0).await.expect("a session");
    let mut events = engine.wrap(&session, 0, stream, cancel);
    let mut seen = Vec::new();
    let collect = async {
        while let Some(event) = events.next().await {
            on_event(&event);
            seen.push(event);
        }
    };
    tokio::time::timeout(Duration::from_secs(60), collect)
        .await
        .expect("the response ends within a minute");
    Run { events: seen }
}
