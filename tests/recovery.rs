//! Recovery (contract §7.4): unfinished calls get a result, the model context becomes valid, and an agent resumes.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::{AssistantMessage, ContentBlock, StopReason, ToolArguments, Usage};
use headstart::store::{AdmittedCall, CallKey, RunOutcome, RunState, SqliteOptions, SqliteStore};
use headstart::{
    expects_answer, recover_session, Agent, AgentEvent, AgentStop, Arguments, CancellationToken, Engine, Message,
    RecoveryAction, RecoveryPolicy, SessionId, Tool, ToolCall, ToolContext, ToolError, ToolOutput, ToolSpec, Toolbox,
    TranscriptStore, UserMessage, INTERRUPTED,
};
use headstart_sim::sim_model::SimModel;
use headstart_testkit::fixtures::deltas::text_response;

struct Fetch {
    spec: ToolSpec,
}

impl Fetch {
    fn new(idempotent: bool) -> Self {
        Fetch {
            spec: ToolSpec::new("fetch").early(true).idempotent(idempotent),
        }
    }
}

#[async_trait]
impl Tool for Fetch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, args: Arguments, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("fetched {}", args["url"])))
    }
}

fn call(id: &str) -> ToolCall {
    let arguments = ToolArguments::parse(&format!(r#"{{"url": "{id}"}}"#));
    ToolCall {
        id: id.into(),
        name: "fetch".into(),
        arguments,
        provider_async: false,
    }
}

/// The state a crash leaves: a prefix with two admitted calls, one of which had started; no results.
async fn crashed_session(store: &SqliteStore) -> SessionId {
    let session = store.create_session(0).await.unwrap();
    store.append_user(&session, &UserMessage::new("go"), 1).await.unwrap();
    let fragment = AssistantMessage {
        turn_id: "t0".into(),
        stop_reason: StopReason::ToolUse,
        content: vec![
            ContentBlock::text("fetching"),
            ContentBlock::ToolCall(call("a")),
            ContentBlock::ToolCall(call("b")),
        ],
        usage: Usage::default(),
        model: None,
        error_message: None,
    };
    let admitted: Vec<AdmittedCall> = ["a", "b"]
        .iter()
        .map(|id| AdmittedCall {
            call_id: (*id).into(),
            tool_name: "fetch".into(),
            sealed_at_us: None,
        })
        .collect();
    store
        .commit_fragment(&session, 0, &fragment, &admitted, 2)
        .await
        .unwrap();
    store.mark_started(&session, &CallKey::new(0, "a"), 3).await.unwrap();
    session
}

#[tokio::test]
async fn default_policy_fails_unfinished_calls_and_the_agent_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("t.db"), SqliteOptions::default()).unwrap();
    let session = crashed_session(&store).await;
    assert_eq!(store.unfinished_calls(&session).await.unwrap().len(), 2);

    let recovered = recover_session(&store, &session, 10).await.unwrap();
    let summary: Vec<(&str, bool, RecoveryAction)> = recovered
        .iter()
        .map(|r| (r.call_id.as_str(), r.had_started, r.action))
        .collect();
    assert_eq!(
        summary,
        [
            ("a", true, RecoveryAction::Interrupted),
            ("b", false, RecoveryAction::Interrupted)
        ]
    );
    assert!(recovered.iter().all(|r| r.fragment_seq == 2));
    assert!(store.unfinished_calls(&session).await.unwrap().is_empty());
    let runs = store.tool_runs(&session).await.unwrap();
    let states: Vec<(RunState, Option<RunOutcome>)> = runs.iter().map(|r| (r.state, r.outcome)).collect();
    assert_eq!(
        states,
        [
            (RunState::Cancelled, Some(RunOutcome::Interrupted)),
            (RunState::Skipped, Some(RunOutcome::Interrupted))
        ]
    );

    // The model context is valid: the assistant message is followed by one result per call, in call order.
    let context = store.model_context(&session).await.unwrap();
    let results: Vec<(String, String)> = context
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((r.tool_call_id.clone(), r.text())),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            ("a".to_owned(), INTERRUPTED.to_owned()),
            ("b".to_owned(), INTERRUPTED.to_owned())
        ]
    );

    // Recovering again finds nothing.
    assert!(recover_session(&store, &session, 11).await.unwrap().is_empty());

    // An agent resumes the session from there.
    let store: Arc<dyn TranscriptStore> = Arc::new(store);
    let engine = Engine::builder(Arc::clone(&store))
        .toolbox(Toolbox::new().with(Fetch::new(false)).unwrap())
        .build();
    // The resumed loop's first request is request 1: request 0 is the crashed one, stored.
    let agent = Agent::new(
        engine,
        Arc::new(SimModel::new(vec![Vec::new(), text_response("recovered")])),
    );
    let events: Vec<AgentEvent> = agent.resume(&session, CancellationToken::new()).collect().await;
    assert!(
        matches!(
            events.last(),
            Some(AgentEvent::AgentEnd {
                stop: AgentStop::Completed
            })
        ),
        "{events:?}"
    );
    let log = store.load_log(&session).await.unwrap();
    assert!(matches!(&log.last().unwrap().message, Message::Assistant(m) if m.stop_reason == StopReason::Stop));
}

#[tokio::test]
async fn idempotent_tools_are_re_executed() {
    let store = SqliteStore::open_in_memory().unwrap();
    let session = crashed_session(&store).await;
    let store: Arc<dyn TranscriptStore> = Arc::new(store);
    let engine = Engine::builder(Arc::clone(&store))
        .toolbox(Toolbox::new().with(Fetch::new(true)).unwrap())
        .build();

    let recovered = engine
        .recover(&session, RecoveryPolicy::ReExecuteIdempotent)
        .await
        .unwrap();
    assert!(
        recovered.iter().all(|r| r.action == RecoveryAction::ReExecuted),
        "{recovered:?}"
    );
    let texts = result_texts(store.as_ref(), &session).await;
    assert_eq!(texts, ["fetched \"a\"", "fetched \"b\""]);
    let runs = store.tool_runs(&session).await.unwrap();
    assert!(runs
        .iter()
        .all(|r| r.state == RunState::Finished && r.outcome == Some(RunOutcome::Finished)));

    // The default policy on the same engine fails instead of re-running.
    let other = crashed_session_in(&store).await;
    let recovered = engine.recover(&other, RecoveryPolicy::FailAll).await.unwrap();
    assert!(recovered.iter().all(|r| r.action == RecoveryAction::Interrupted));
}

/// The texts of `session`'s stored results, in log order.
async fn result_texts(store: &dyn TranscriptStore, session: &SessionId) -> Vec<String> {
    store
        .load_log(session)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|m| match m.message {
            Message::ToolResult(r) => Some(r.text()),
            _ => None,
        })
        .collect()
}

async fn crashed_session_in(store: &Arc<dyn TranscriptStore>) -> SessionId {
    let session = store.create_session(0).await.unwrap();
    let fragment = AssistantMessage {
        turn_id: "t1".into(),
        stop_reason: StopReason::ToolUse,
        content: vec![ContentBlock::ToolCall(call("c"))],
        usage: Usage::default(),
        model: None,
        error_message: None,
    };
    let admitted = [AdmittedCall {
        call_id: "c".into(),
        tool_name: "fetch".into(),
        sealed_at_us: None,
    }];
    store
        .commit_fragment(&session, 0, &fragment, &admitted, 2)
        .await
        .unwrap();
    session
}

#[tokio::test]
async fn resume_after_crash_recovers_then_continues_only_when_an_answer_is_expected() {
    let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().unwrap());
    let session = crashed_session_in(&store).await;
    let engine = Engine::builder(Arc::clone(&store))
        .toolbox(Toolbox::new().with(Fetch::new(false)).unwrap())
        .build();
    // The stored response was request 0, so the resumed loop asks as request 1.
    let agent = Agent::new(
        engine,
        Arc::new(SimModel::new(vec![Vec::new(), text_response("recovered")])),
    );
    assert!(
        !expects_answer(&store.model_context(&session).await.unwrap()),
        "a call without its result"
    );

    let resumed = agent
        .resume_after_crash(&session, RecoveryPolicy::FailAll, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(resumed.recovered.len(), 1);
    assert_eq!(resumed.recovered[0].action, RecoveryAction::Interrupted);
    let events: Vec<AgentEvent> = resumed.events.expect("the results await an answer").collect().await;
    assert!(
        matches!(
            events.last(),
            Some(AgentEvent::AgentEnd {
                stop: AgentStop::Completed
            })
        ),
        "{events:?}"
    );
    let context = store.model_context(&session).await.unwrap();
    assert!(matches!(&context[1], Message::ToolResult(r) if r.text() == INTERRUPTED));
    assert!(!expects_answer(&context), "answered by the final text");

    // Resuming an answered conversation recovers nothing and starts no run.
    let again = agent
        .resume_after_crash(&session, RecoveryPolicy::FailAll, CancellationToken::new())
        .await
        .unwrap();
    assert!(again.recovered.is_empty() && again.events.is_none());
}

#[test]
fn a_bare_prompt_expects_an_answer_and_an_empty_session_does_not() {
    assert!(expects_answer(&[Message::User(UserMessage::new("hi"))]));
    assert!(!expects_answer(&[]));
}

/// Replaces any result mentioning a secret: what a redaction hook does on the live path.
struct Redact;

#[async_trait]
impl headstart::ToolHook for Redact {
    async fn after_tool_call(
        &self,
        _call: &ToolCall,
        result: &headstart::ResultDraft,
    ) -> Result<headstart::ResultOverride, ToolError> {
        let text: String = result
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        Ok(headstart::ResultOverride {
            content: text.contains("secret").then(|| vec![ContentBlock::text("[redacted]")]),
            ..headstart::ResultOverride::default()
        })
    }
}

#[tokio::test]
async fn ends_known_to_a_host_are_stored_through_the_after_hooks_and_interrupted_ones_recovered() {
    let store = SqliteStore::open_in_memory().unwrap();
    let session = crashed_session(&store).await;
    let store: Arc<dyn TranscriptStore> = Arc::new(store);
    let engine = Engine::builder(Arc::clone(&store))
        .toolbox(Toolbox::new().with(Fetch::new(true)).unwrap())
        .hooks(headstart::Hooks::new().with(Redact))
        .build();

    let ends = vec![
        (
            "a".to_owned(),
            headstart::BodyEnd::Returned(Ok(ToolOutput::text("the secret is 42"))),
        ),
        ("b".to_owned(), headstart::BodyEnd::Interrupted),
        // Not a call of the session: left alone.
        ("z".to_owned(), headstart::BodyEnd::Interrupted),
    ];
    let settled = engine.settle_known(&session, ends).await.unwrap();
    let actions: Vec<(&str, RecoveryAction)> = settled
        .iter()
        .map(|call| (call.call_id.as_str(), call.action))
        .collect();
    assert_eq!(
        actions,
        [("a", RecoveryAction::Settled), ("b", RecoveryAction::Interrupted)]
    );
    let texts = result_texts(store.as_ref(), &session).await;
    // The live path's hook ran on the returned end; recovery's interrupted result gets none, as in recover_session.
    assert_eq!(texts, ["[redacted]".to_owned(), INTERRUPTED.to_owned()]);
    let runs = store.tool_runs(&session).await.unwrap();
    let a = runs.iter().find(|run| run.call_id == "a").unwrap();
    assert_eq!((a.state, a.outcome), (RunState::Finished, Some(RunOutcome::Finished)));
    assert_eq!(a.started_at_us, Some(3), "the start the store had is kept");
    let b = runs.iter().find(|run| run.call_id == "b").unwrap();
    assert_eq!((b.state, b.outcome), (RunState::Skipped, Some(RunOutcome::Interrupted)));

    // Settled again, nothing is unfinished: nothing more is written.
    let again = engine
        .settle_known(&session, vec![("a".to_owned(), headstart::BodyEnd::Interrupted)])
        .await
        .unwrap();
    assert!(again.is_empty(), "{again:?}");
}
