//! The engine side of fleets (contract §7.5, issue 14): every call's context carries its stable idempotency key, a
//! lease guard keeps calls from starting once the lease may have expired (§7.5.4), and a fenced write stops the run
//! as `AgentStop::Fenced` (§7.5.2).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::{DoneReason, Usage};
use headstart::store::{idempotency_key, CallKey, RunOutcome, RunState, SessionQueue, SqliteStore};
use headstart::{
    Agent, AgentEvent, AgentStop, Arguments, CancellationToken, DeltaEvent, DeltaStream, Engine, Message, Model,
    ModelError, ModelRequest, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, Toolbox, TranscriptStore,
    UserMessage, LEASE_MAY_HAVE_EXPIRED,
};
use headstart_testkit::invariants::check_session;

/// Records the idempotency key and the session of every call it runs.
#[derive(Default)]
struct Recording {
    keys: Mutex<Vec<(String, String)>>,
    sessions: Mutex<Vec<Option<headstart::SessionId>>>,
    runs: AtomicUsize,
}

struct Record(Arc<Recording>);

#[async_trait]
impl Tool for Record {
    fn spec(&self) -> &ToolSpec {
        static SPEC: std::sync::LazyLock<ToolSpec> = std::sync::LazyLock::new(|| ToolSpec::new("record").early(true));
        &SPEC
    }

    async fn execute(&self, _arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        self.0.runs.fetch_add(1, Ordering::SeqCst);
        let mut keys = self.0.keys.lock().map_err(|_| ToolError::new("poisoned"))?;
        keys.push((context.call_id.clone(), context.idempotency_key.clone()));
        let mut sessions = self.0.sessions.lock().map_err(|_| ToolError::new("poisoned"))?;
        sessions.push(context.session_id.clone());
        Ok(ToolOutput::text("ok"))
    }
}

/// One response calling `record` with the given call ids, then a plain answer.
struct TwoTurns {
    ids: Vec<&'static str>,
}

#[async_trait]
impl Model for TwoTurns {
    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let mut events = vec![DeltaEvent::Start {
            model: None,
            response_id: None,
        }];
        if request.request == 0 {
            for (index, id) in self.ids.iter().enumerate() {
                events.push(DeltaEvent::ToolcallStart {
                    index,
                    id: (*id).to_owned(),
                    name: "record".to_owned(),
                    early: false,
                    provider_async: false,
                });
                events.push(DeltaEvent::ToolcallEnd {
                    index,
                    arguments: Some(serde_json::json!({})),
                });
            }
        }
        let stop_reason = if request.request == 0 {
            DoneReason::ToolUse
        } else {
            DoneReason::Stop
        };
        events.push(DeltaEvent::Done {
            stop_reason,
            usage: Usage::default(),
        });
        Ok(futures::stream::iter(events.into_iter().map(Ok)).boxed())
    }
}

async fn run_to_end(agent: &Agent, session: &headstart::SessionId, prompt: Option<&str>) -> Vec<AgentEvent> {
    let events = match prompt {
        Some(text) => agent.run(session, UserMessage::new(text), CancellationToken::new()),
        None => agent.resume(session, CancellationToken::new()),
    };
    events.collect().await
}

fn agent_stop(events: &[AgentEvent]) -> &AgentStop {
    match events.last() {
        Some(AgentEvent::AgentEnd { stop }) => stop,
        other => panic!("the last event is not agent_end: {other:?}"),
    }
}

#[tokio::test]
async fn every_call_context_carries_its_session_and_stable_idempotency_key() {
    let store = Arc::new(SqliteStore::open_in_memory().expect("in-memory store"));
    let recording = Arc::new(Recording::default());
    let engine = Engine::builder(store.clone())
        .toolbox(Toolbox::new().with(Record(recording.clone())).expect("toolbox"))
        .build();
    let session = store.create_session(0).await.expect("session");
    let agent = Agent::new(engine, Arc::new(TwoTurns { ids: vec!["c1", "c2"] }));
    let events = run_to_end(&agent, &session, Some("go")).await;
    assert_eq!(agent_stop(&events), &AgentStop::Completed);
    let mut keys = recording.keys.lock().expect("keys").clone();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            ("c1".to_owned(), idempotency_key(&session, &CallKey::new(0, "c1"))),
            ("c2".to_owned(), idempotency_key(&session, &CallKey::new(0, "c2"))),
        ]
    );
    assert_ne!(keys[0].1, keys[1].1);
    let sessions = recording.sessions.lock().expect("sessions").clone();
    assert_eq!(
        sessions,
        vec![Some(session.clone()); 2],
        "every call's context names its session"
    );
}

#[tokio::test]
async fn a_lease_that_may_have_expired_starts_no_call() {
    let store = Arc::new(SqliteStore::open_in_memory().expect("in-memory store"));
    let recording = Arc::new(Recording::default());
    let expired = Arc::new(AtomicBool::new(true));
    let guard = {
        let expired = Arc::clone(&expired);
        move || expired.load(Ordering::SeqCst)
    };
    let engine = Engine::builder(store.clone())
        .toolbox(Toolbox::new().with(Record(recording.clone())).expect("toolbox"))
        .lease_guard(Arc::new(guard))
        .build();
    let session = store.create_session(0).await.expect("session");
    let agent = Agent::new(engine, Arc::new(TwoTurns { ids: vec!["c1", "c2"] }));
    let events = run_to_end(&agent, &session, Some("go")).await;
    assert_eq!(recording.runs.load(Ordering::SeqCst), 0, "no body ran");
    // Each refused call still gets its start event right before its end (contract §5.7), and exactly one result.
    for id in ["c1", "c2"] {
        let tool_events: Vec<&str> = events
            .iter()
            .filter(|event| event.tool_call_id() == Some(id))
            .map(AgentEvent::type_name)
            .collect();
        assert_eq!(tool_events, ["tool_execution_start", "tool_execution_end"], "{id}");
    }
    let expected = format!("cancelled before start: {LEASE_MAY_HAVE_EXPIRED}");
    let log = store.load_log(&session).await.expect("log");
    let results: Vec<_> = log
        .iter()
        .filter_map(|stored| match &stored.message {
            Message::ToolResult(result) => Some(result),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2);
    for result in results {
        assert!(result.is_error);
        assert_eq!(
            result.content,
            vec![headstart::core::ContentBlock::text(expected.clone())]
        );
    }
    for run in store.tool_runs(&session).await.expect("runs") {
        assert_eq!(run.state, RunState::Skipped, "{}", run.call_id);
        assert_eq!(run.outcome, Some(RunOutcome::Skipped), "{}", run.call_id);
        assert_eq!(run.started_at_us, None, "{}", run.call_id);
    }
    assert_eq!(check_session(store.as_ref(), &session).await.expect("check"), vec![]);

    // Once the guard allows again, calls run as usual.
    expired.store(false, Ordering::SeqCst);
    let session = store.create_session(0).await.expect("session");
    let events = run_to_end(&agent, &session, Some("go")).await;
    assert_eq!(agent_stop(&events), &AgentStop::Completed);
    assert_eq!(recording.runs.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_fenced_write_stops_the_run_as_fenced() {
    let store = Arc::new(SqliteStore::open_in_memory().expect("in-memory store"));
    let session = store.submit(&UserMessage::new("go"), 0).await.expect("submit");
    // A lease of zero expires at once, so the second worker's claim takes the session over.
    let first = store.claim("w1", Duration::ZERO, 1).await.expect("claim").remove(0);
    let second = store.claim("w2", Duration::from_secs(60), 1).await.expect("claim");
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].previous_owner.as_deref(), Some("w1"));
    let recording = Arc::new(Recording::default());
    let engine = Engine::builder(SessionQueue::fenced(store.as_ref(), &first.lease))
        .toolbox(Toolbox::new().with(Record(recording.clone())).expect("toolbox"))
        .build();
    let agent = Agent::new(engine, Arc::new(TwoTurns { ids: vec!["c1"] }));
    let events = run_to_end(&agent, &session, None).await;
    assert!(
        matches!(agent_stop(&events), AgentStop::Fenced(message) if message.contains("fenced")),
        "{:?}",
        agent_stop(&events)
    );
    assert_eq!(
        recording.runs.load(Ordering::SeqCst),
        0,
        "the fragment was never durable: no call ran"
    );
    assert_eq!(store.load_log(&session).await.expect("log").len(), 1, "only the prompt");
}

/// Fails every request: a test that expects the model never to be asked.
struct Unreachable;

#[async_trait]
impl Model for Unreachable {
    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        Err(ModelError::new(format!(
            "the model was asked (request {})",
            request.request
        )))
    }
}

#[tokio::test]
async fn resuming_a_session_that_ends_with_a_final_answer_asks_nothing() {
    let store = Arc::new(SqliteStore::open_in_memory().expect("in-memory store"));
    let recording = Arc::new(Recording::default());
    let engine = Engine::builder(store.clone())
        .toolbox(Toolbox::new().with(Record(recording.clone())).expect("toolbox"))
        .build();
    let session = store.create_session(0).await.expect("session");
    let events = run_to_end(
        &Agent::new(engine.clone(), Arc::new(TwoTurns { ids: vec!["c1"] })),
        &session,
        Some("go"),
    )
    .await;
    assert_eq!(agent_stop(&events), &AgentStop::Completed);
    let stored = store.load_log(&session).await.expect("log").len();

    // The worker that ran it died before finishing it; the next one resumes: the loop is already over.
    let events = run_to_end(&Agent::new(engine.clone(), Arc::new(Unreachable)), &session, None).await;
    assert_eq!(agent_stop(&events), &AgentStop::Completed);
    assert_eq!(
        store.load_log(&session).await.expect("log").len(),
        stored,
        "nothing written"
    );

    // A session holding only its prompt does ask.
    let resumable = store.create_session(0).await.expect("session");
    store
        .append_user(&resumable, &UserMessage::new("go"), 0)
        .await
        .expect("prompt");
    let events = run_to_end(&Agent::new(engine, Arc::new(Unreachable)), &resumable, None).await;
    assert!(
        matches!(agent_stop(&events), AgentStop::Error(message) if message.contains("request 0")),
        "{:?}",
        agent_stop(&events)
    );
}
