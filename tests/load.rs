//! Load: 1,000 concurrent agent sessions against one SQLite file, 10 tool calls each, on one multi-thread
//! runtime; nothing may be lost.
//!
//! Each session's first response streams five early calls (each committed with its own prefix and started at
//! once), three sync calls, then two more early calls that follow a sync call (so they wait for the end batch);
//! its second response answers in text. Tools and streams take no time (they only yield), so the run measures the
//! engine and the store, and stays fast in a debug build. One [`SqliteStore`] (one connection, `durability =
//! normal`) serves every session, as the engine is meant to be deployed.
//!
//! Checks, per session: the engine's invariants on what the store holds (`headstart_testkit::invariants`, shared with
//! the scenario, adapter and crash tests: sequence numbers 1..=n without gaps, every call exactly one result, which
//! follows its call, every run record settled with its result, owners stored before starts, one turn id per
//! request); besides, the run ended `Completed`, the transcript holds the ten calls in order, every call executed
//! exactly once and no result is an error, and every run record is `finished` with its result. Globally: the store
//! lists every session.
//!
//! `HEADSTART_LOAD_SESSIONS` overrides the number of sessions (default 1,000).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::delta_log::TimedDelta;
use headstart::store::{Durability, RunOutcome, RunState, SqliteOptions};
use headstart::{
    Agent, AgentEvent, AgentStop, Arguments, CancellationToken, Engine, Message, SqliteStore, Tool, ToolContext,
    ToolError, ToolOutput, ToolSpec, Toolbox, TranscriptStore, UserMessage,
};
use headstart_sim::sim_model::SimModel;
use headstart_testkit::fixtures::deltas::delta_log;
use headstart_testkit::invariants;
use serde_json::json;

const DEFAULT_SESSIONS: usize = 1_000;
const CALLS: usize = 10;

/// Counts executions per call id, and yields once so bodies interleave.
struct Counted {
    spec: ToolSpec,
    executed: Arc<Mutex<HashMap<String, usize>>>,
}

#[async_trait]
impl Tool for Counted {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, _args: Arguments, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        *self.executed.lock().unwrap().entry(ctx.call_id.clone()).or_default() += 1;
        tokio::task::yield_now().await;
        Ok(ToolOutput::text(format!("{} ok", ctx.call_id)))
    }
}

/// The tool of call `k` (0-based): async for 0–4 and 8–9, sync for 5–7.
fn tool_of(k: usize) -> &'static str {
    if (5..8).contains(&k) {
        "save"
    } else {
        "fetch"
    }
}

fn call_id(session: usize, k: usize) -> String {
    format!("s{session}_c{k}")
}

fn turns(session: usize) -> Vec<Vec<TimedDelta>> {
    let mut first = vec![json!({"type": "start"})];
    for k in 0..CALLS {
        first.extend([
            json!({"type": "toolcall_start", "index": k, "id": call_id(session, k), "name": tool_of(k)}),
            json!({"type": "toolcall_delta", "index": k, "delta": format!("{{\"k\": {k}}}")}),
            json!({"type": "toolcall_end", "index": k}),
        ]);
    }
    first.push(json!({"type": "done", "stop_reason": "tool_use", "usage": {"input": 10, "output": 10}}));
    let second = vec![
        json!({"type": "start"}),
        json!({"type": "text_start", "index": 0}),
        json!({"type": "text_delta", "index": 0, "delta": "done"}),
        json!({"type": "text_end", "index": 0}),
        json!({"type": "done", "stop_reason": "stop", "usage": {"input": 20, "output": 1}}),
    ];
    vec![delta_log(&first), delta_log(&second)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_concurrent_sessions_lose_nothing() {
    let sessions: usize = std::env::var("HEADSTART_LOAD_SESSIONS")
        .ok()
        .map_or(DEFAULT_SESSIONS, |value| {
            value.parse().expect("HEADSTART_LOAD_SESSIONS")
        });
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions {
        durability: Durability::Normal,
        ..SqliteOptions::default()
    };
    let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open(dir.path().join("load.db"), options).unwrap());
    let executed = Arc::new(Mutex::new(HashMap::new()));
    let toolbox = Toolbox::new()
        .with(Counted {
            spec: ToolSpec::new("fetch").early(true),
            executed: Arc::clone(&executed),
        })
        .and_then(|toolbox| {
            toolbox.with(Counted {
                spec: ToolSpec::new("save"),
                executed: Arc::clone(&executed),
            })
        })
        .unwrap();
    let engine = Engine::builder(Arc::clone(&store)).toolbox(toolbox).build();

    let started = Instant::now();
    let mut tasks = Vec::with_capacity(sessions);
    for n in 0..sessions {
        let agent = Agent::new(engine.clone(), Arc::new(SimModel::new(turns(n))));
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let session = store.create_session(0).await.expect("create session");
            let stop = agent
                .run(
                    &session,
                    UserMessage::new(format!("session {n}")),
                    CancellationToken::new(),
                )
                .filter_map(|event| async move {
                    match event {
                        AgentEvent::AgentEnd { stop } => Some(stop),
                        _ => None,
                    }
                })
                .collect::<Vec<_>>()
                .await;
            (n, session, stop)
        }));
    }
    let mut finished = Vec::with_capacity(sessions);
    for task in tasks {
        finished.push(task.await.expect("session task"));
    }
    let ran = started.elapsed();

    let executed = executed.lock().unwrap().clone();
    assert_eq!(executed.len(), sessions * CALLS, "distinct calls executed");
    let mut messages = 0usize;
    for (n, session, stop) in &finished {
        assert_eq!(stop, &[AgentStop::Completed], "session {n}: how the run ended");
        let log = store.load_log(session).await.unwrap();
        let runs = store.tool_runs(session).await.unwrap();
        let violations = invariants::check_log(&log, &runs);
        assert!(violations.is_empty(), "session {n}: {violations:?}");
        messages += log.len();
        let mut calls_seen: Vec<String> = Vec::new();
        for stored in &log {
            match &stored.message {
                Message::Assistant(fragment) => calls_seen.extend(fragment.tool_calls().map(|call| call.id.clone())),
                Message::ToolResult(result) => assert!(!result.is_error, "session {n}: {result:?}"),
                Message::User(_) => {}
            }
        }
        let expected: Vec<String> = (0..CALLS).map(|k| call_id(*n, k)).collect();
        assert_eq!(calls_seen, expected, "session {n}: calls in the transcript");
        for id in &expected {
            assert_eq!(executed.get(id), Some(&1), "session {n}: executions of {id}");
        }
        assert_eq!(runs.len(), CALLS, "session {n}: run records");
        for run in &runs {
            assert_eq!(
                (run.state, run.outcome),
                (RunState::Finished, Some(RunOutcome::Finished)),
                "session {n}: {run:?}"
            );
            assert!(run.result_seq.is_some(), "session {n}: {run:?}");
        }
        assert!(store.unfinished_calls(session).await.unwrap().is_empty());
    }
    assert_eq!(store.sessions().await.unwrap().len(), sessions, "sessions stored");
    println!(
        "load: {sessions} concurrent sessions, {} calls executed once each, {messages} messages, ran in {:.1} s, \
         checked in {:.1} s",
        sessions * CALLS,
        ran.as_secs_f64(),
        (started.elapsed() - ran).as_secs_f64()
    );
}
