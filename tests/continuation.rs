//! Continuing after a failed stream (contract §3.6.4, §3.6.5): a response that fails after committing prefixes is
//! followed by another request from the canonical context when the policy allows, within its budget; a response
//! that fails before committing anything, or with the policy off, ends the run as before. Paused clock.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::delta_log::TimedDelta;
use headstart::core::ErrorReason;
use headstart::{
    Agent, AgentEvent, AgentStop, Arguments, CancellationToken, DeltaEvent, Engine, EngineConfig, Message, SqliteStore,
    Tool, ToolContext, ToolError, ToolOutput, ToolSpec, Toolbox, TranscriptStore, UserMessage,
};
use headstart_sim::sim_model::SimModel;
use headstart_testkit::fixtures::deltas::{at, text_response};
use headstart_testkit::invariants::check_session;
use serde_json::json;

struct Step;

#[async_trait]
impl Tool for Step {
    fn spec(&self) -> &ToolSpec {
        static SPEC: std::sync::LazyLock<ToolSpec> = std::sync::LazyLock::new(|| {
            ToolSpec::new("step")
                .description("One step of work.")
                .parameters(json!({"type": "object"}))
                .early(true)
        });
        &SPEC
    }

    async fn execute(&self, _: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("did {}", context.call_id)))
    }
}

/// A response that seals an early call `id` at once (a committed prefix when `sealed`), then breaks.
fn breaks_after_call(id: &str, sealed: bool) -> Vec<TimedDelta> {
    let mut events = vec![
        at(
            0,
            DeltaEvent::Start {
                model: None,
                response_id: None,
            },
        ),
        at(
            0,
            DeltaEvent::ToolcallStart {
                index: 0,
                id: id.into(),
                name: "step".into(),
                early: false,
                provider_async: false,
            },
        ),
    ];
    if sealed {
        events.push(at(
            10,
            DeltaEvent::ToolcallEnd {
                index: 0,
                arguments: None,
            },
        ));
    }
    events.push(at(
        50,
        DeltaEvent::Error {
            stop_reason: ErrorReason::Error,
            message: "connection error while streaming: reset by peer".into(),
            usage: None,
            kind: None,
        },
    ));
    events
}

async fn run(turns: Vec<Vec<TimedDelta>>, budget: Option<u32>) -> (AgentStop, u32, Vec<Message>) {
    let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().expect("a store"));
    let session = store.create_session(0).await.expect("a session");
    let engine = Engine::builder(Arc::clone(&store))
        .toolbox(Toolbox::new().with(Step).expect("a tool"))
        .config(EngineConfig::default().continue_after_failed_stream(budget))
        .build();
    let agent = Agent::new(engine, Arc::new(SimModel::new(turns)));
    let events: Vec<AgentEvent> = agent
        .run(&session, UserMessage::new("go"), CancellationToken::new())
        .collect()
        .await;
    let requests = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ResponseStart { .. }))
        .count();
    let Some(AgentEvent::AgentEnd { stop }) = events.last() else {
        panic!("no agent_end last: {:?}", events.last())
    };
    let violations = check_session(store.as_ref(), &session).await.expect("the log loads");
    assert!(violations.is_empty(), "{violations:?}");
    let context = store.model_context(&session).await.expect("the context loads");
    (stop.clone(), u32::try_from(requests).expect("few requests"), context)
}

fn result_texts(context: &[Message]) -> Vec<String> {
    context
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(result) => Some(result.text()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_failed_stream_with_committed_work_continues_from_its_results() {
    let (stop, requests, context) = run(vec![breaks_after_call("c1", true), text_response("done")], Some(1)).await;
    assert_eq!(stop, AgentStop::Completed);
    assert_eq!(requests, 2);
    assert_eq!(result_texts(&context), ["did c1"]);
    // The canonical context is valid for a provider: the failed response's call is followed by its result.
    let call_at = context
        .iter()
        .position(|m| matches!(m, Message::Assistant(a) if a.tool_calls().any(|c| c.id == "c1")))
        .expect("the call is in the context");
    assert!(matches!(&context[call_at + 1], Message::ToolResult(r) if r.tool_call_id == "c1"));
}

#[tokio::test(start_paused = true)]
async fn the_budget_bounds_the_continuations() {
    let turns = (1..=4).map(|n| breaks_after_call(&format!("c{n}"), true)).collect();
    let (stop, requests, context) = run(turns, Some(2)).await;
    assert_eq!(stop, AgentStop::ResponseFailed);
    assert_eq!(requests, 3, "the first request and two continuations");
    assert_eq!(result_texts(&context), ["did c1", "did c2", "did c3"]);
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_failed_before_committing_anything_ends_the_run() {
    let (stop, requests, context) = run(vec![breaks_after_call("c1", false), text_response("done")], Some(3)).await;
    assert_eq!(stop, AgentStop::ResponseFailed);
    assert_eq!(requests, 1);
    assert_eq!(
        result_texts(&context),
        ["not executed: the response ended with stop reason error"]
    );
}

#[tokio::test(start_paused = true)]
async fn with_the_policy_off_a_failed_stream_ends_the_run() {
    let (stop, requests, context) = run(vec![breaks_after_call("c1", true), text_response("done")], None).await;
    assert_eq!(stop, AgentStop::ResponseFailed);
    assert_eq!(requests, 1);
    assert_eq!(result_texts(&context), ["did c1"]);
}
