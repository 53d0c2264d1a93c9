//! A body's end known to a host (issue 43): a body a host ran with [`headstart::run_body`] and whose end it hands to
//! [`Engine::settle_known`] is stored with the same state, outcome and text as the engine stores the same end on its
//! live path, for a body cancelled, one that passed its timeout and one that panicked.
//!
//! Restate's `Tools` service is such a host (`headstart-restate`'s `tools.rs`); its test 12 checks the timeout and the
//! panic end to end. Nothing cancels a body there (a deployment that dies leaves its calls interrupted), so the
//! cancelled end is checked here, where both paths can make it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::{AssistantMessage, ContentBlock, DeltaEvent, DoneReason, StopReason, ToolArguments, Usage};
use headstart::store::{AdmittedCall, CallKey, SqliteStore};
use headstart::{
    AgentEvent, Arguments, BodyEnd, CancellationToken, Engine, Message, SessionId, Tool, ToolCall, ToolContext,
    ToolError, ToolOutput, ToolSpec, Toolbox, TranscriptStore,
};

/// How a test body ends.
#[derive(Clone, Copy)]
enum Ending {
    /// Waits for its cancellation, then fails as a body that honours it does.
    Cancelled,
    /// Outlives its 20 ms timeout.
    TimesOut,
    /// Panics.
    Panics,
}

struct Body {
    spec: ToolSpec,
    ending: Ending,
}

impl Body {
    fn new(name: &str, ending: Ending) -> Self {
        let spec = ToolSpec::new(name).early(true);
        let spec = match ending {
            Ending::TimesOut => spec.timeout(Some(Duration::from_millis(20))),
            _ => spec,
        };
        Body { spec, ending }
    }
}

#[async_trait]
impl Tool for Body {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, _args: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        match self.ending {
            Ending::Cancelled => {
                context.cancel.cancelled().await;
                Err(ToolError::new("stopped: the caller cancelled"))
            }
            Ending::TimesOut => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(ToolOutput::text("too late"))
            }
            Ending::Panics => panic!("boom"),
        }
    }
}

const BODIES: [(&str, Ending); 3] = [
    ("wait", Ending::Cancelled),
    ("slow", Ending::TimesOut),
    ("boom", Ending::Panics),
];

fn engine(store: Arc<dyn TranscriptStore>) -> Engine {
    let mut toolbox = Toolbox::new();
    for (name, ending) in BODIES {
        toolbox = toolbox.with(Body::new(name, ending)).expect("the schema compiles");
    }
    Engine::builder(store).toolbox(toolbox).build()
}

fn call(name: &str) -> ToolCall {
    ToolCall {
        id: format!("c_{name}"),
        name: name.to_owned(),
        arguments: ToolArguments::parse("{}"),
        provider_async: false,
    }
}

/// Each call's stored end: `(call id, state and outcome, result text)`, in call order.
async fn stored_ends(store: &dyn TranscriptStore, session: &SessionId) -> Vec<(String, String, String)> {
    let runs = store.tool_runs(session).await.expect("the runs");
    let texts: Vec<(String, String)> = store
        .load_log(session)
        .await
        .expect("the log")
        .into_iter()
        .filter_map(|stored| match stored.message {
            Message::ToolResult(result) => Some((result.tool_call_id.clone(), result.text())),
            _ => None,
        })
        .collect();
    let mut ends: Vec<(String, String, String)> = runs
        .into_iter()
        .map(|run| {
            let text = texts
                .iter()
                .find(|(id, _)| *id == run.call_id)
                .map(|(_, text)| text.clone())
                .unwrap_or_default();
            (run.call_id, format!("{:?} {:?}", run.state, run.outcome), text)
        })
        .collect();
    ends.sort();
    ends
}

/// The live path: one response admits the three calls; once the timeout and the panic have ended, the caller
/// cancels, and the waiting body is cancelled.
async fn live_ends() -> Vec<(String, String, String)> {
    let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().expect("a store"));
    let engine = engine(Arc::clone(&store));
    let session = engine.create_session().await.expect("a session");
    let mut deltas = vec![DeltaEvent::Start {
        model: None,
        response_id: Some("r0".to_owned()),
    }];
    for (index, (name, _)) in BODIES.iter().enumerate() {
        deltas.extend(headstart_testkit::fixtures::deltas::sealed_call(
            index,
            &format!("c_{name}"),
            name,
            serde_json::json!({}),
        ));
    }
    deltas.push(DeltaEvent::Done {
        stop_reason: DoneReason::ToolUse,
        usage: Usage::default(),
    });
    let stream = futures::stream::iter(deltas.into_iter().map(Ok));
    let cancel = CancellationToken::new();
    let mut events = engine.wrap(&session, 0, stream, cancel.clone());
    let mut ended = Vec::new();
    while let Some(event) = events.next().await {
        if let AgentEvent::ToolExecutionEnd { tool_call_id, .. } = &event {
            ended.push(tool_call_id.clone());
            if ended.len() == 2 {
                assert!(
                    !ended.contains(&"c_wait".to_owned()),
                    "the waiting body ends only when cancelled"
                );
                cancel.cancel();
            }
        }
    }
    events.settled().await;
    stored_ends(store.as_ref(), &session).await
}

/// The host's path: the crash left the three calls admitted and started; the host ran each body itself (the
/// waiting one with its cancellation already asked for) and hands their ends to the engine.
async fn host_ends() -> Vec<(String, String, String)> {
    let sqlite = SqliteStore::open_in_memory().expect("a store");
    let session = sqlite.create_session(0).await.expect("a session");
    let calls: Vec<ToolCall> = BODIES.iter().map(|(name, _)| call(name)).collect();
    let fragment = AssistantMessage {
        turn_id: "r0".into(),
        stop_reason: StopReason::ToolUse,
        content: calls.iter().cloned().map(ContentBlock::ToolCall).collect(),
        usage: Usage::default(),
        model: None,
        error_message: None,
    };
    let admitted: Vec<AdmittedCall> = calls
        .iter()
        .map(|call| AdmittedCall {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            sealed_at_us: None,
        })
        .collect();
    sqlite
        .commit_fragment(&session, 0, &fragment, &admitted, 1)
        .await
        .expect("the fragment");
    for call in &calls {
        sqlite
            .mark_started(&session, &CallKey::new(0, &call.id), 2)
            .await
            .expect("started");
    }
    let store: Arc<dyn TranscriptStore> = Arc::new(sqlite);
    let engine = engine(Arc::clone(&store));
    let mut ends = Vec::new();
    for call in &calls {
        let tool = engine.toolbox().get(&call.name).cloned().expect("the tool");
        let context = ToolContext::detached(call.id.clone());
        context.cancel.cancel();
        let arguments = call.arguments.as_object().cloned().unwrap_or_default();
        let returned = headstart::run_body(tool.as_ref(), arguments, context).await;
        ends.push((call.id.clone(), BodyEnd::Returned(returned)));
    }
    engine.settle_known(&session, ends).await.expect("settled");
    stored_ends(store.as_ref(), &session).await
}

#[tokio::test]
async fn a_body_cancelled_timed_out_or_panicked_is_stored_alike_by_a_host_and_by_the_engine() {
    let live = live_ends().await;
    let outcomes: Vec<&str> = live.iter().map(|(_, outcome, _)| outcome.as_str()).collect();
    assert_eq!(
        outcomes,
        [
            "Finished Some(Panicked)",
            "Cancelled Some(TimedOut)",
            "Cancelled Some(Cancelled)"
        ],
        "{live:?}"
    );
    assert_eq!(host_ends().await, live, "a host's ends are stored as the engine's own");
}
