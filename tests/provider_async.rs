//! Provider-async calls in the agent loop (contract §3.7.5, §3.7.6), on tokio's paused clock: a response ends
//! while such a call runs, its result is written when ready and reaches the model in the first request built
//! after that, exactly once, where it arrived; a response with nothing new to send is not followed by another
//! request until a pending result is ready (the "yields again and again" pitfall); a sync call still waits for the
//! end of its stream; cancelling the run cancels pending calls and stores their results.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::delta_log::TimedDelta;
use headstart::core::{DoneReason, Usage};
use headstart::{
    Agent, AgentEvent, AgentStop, Arguments, AsyncDelivery, CancellationToken, DeltaEvent, DeltaStream, Engine,
    EngineConfig, Message, Model, ModelError, ModelRequest, SqliteStore, Tool, ToolContext, ToolError, ToolOutput,
    ToolSpec, Toolbox, TranscriptStore, UserMessage,
};
use headstart_sim::sim_model::timed_stream;
use headstart_testkit::fixtures::deltas::{at, text_response};
use headstart_testkit::invariants::check_session;
use serde_json::json;
use tokio::time::Instant;

/// A tool that works `ms` milliseconds; provider-async or not.
struct Work {
    spec: ToolSpec,
    ms: u64,
}

#[async_trait]
impl Tool for Work {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, _: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(self.ms)) => {}
            () = context.cancel.cancelled() => return Err(ToolError::new("cancelled")),
        }
        Ok(ToolOutput::text(format!("{} done", context.call_id)))
    }
}

fn provider_async(name: &'static str, ms: u64) -> Work {
    Work {
        spec: ToolSpec::new(name).description("Works a while.").provider_async(true),
        ms,
    }
}

fn sync(name: &'static str, ms: u64) -> Work {
    Work {
        spec: ToolSpec::new(name).description("Works a while."),
        ms,
    }
}

/// A request as the model saw it: when (ms after the run began) and its context.
struct Seen {
    at_ms: u64,
    context: Vec<Message>,
}

/// Answers request `n` with `turns[n]` and records every request.
struct Recording {
    turns: Vec<Vec<TimedDelta>>,
    seen: Arc<Mutex<Vec<Seen>>>,
    began: Instant,
}

#[async_trait]
impl Model for Recording {
    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let mut seen = self.seen.lock().expect("not poisoned");
        let n = seen.len();
        seen.push(Seen {
            at_ms: u64::try_from(self.began.elapsed().as_millis()).expect("short"),
            context: request.context.to_vec(),
        });
        let turn =
            (self.turns.get(n).cloned()).ok_or_else(|| ModelError::new(format!("no response for request {n}")))?;
        Ok(timed_stream(turn))
    }
}

/// A response calling `calls` (id, tool, provider-async marker), each sealed at `sealed_ms`, then text until
/// `done_ms`, then `done(tool_use)`.
fn calls_then_text(calls: &[(&str, &str, bool)], sealed_ms: u64, done_ms: u64) -> Vec<TimedDelta> {
    let mut events = vec![at(
        0,
        DeltaEvent::Start {
            model: None,
            response_id: None,
        },
    )];
    for (index, &(id, name, provider_async)) in calls.iter().enumerate() {
        events.push(at(
            0,
            DeltaEvent::ToolcallStart {
                index,
                id: id.into(),
                name: name.into(),
                early: false,
                provider_async,
            },
        ));
        events.push(at(
            sealed_ms,
            DeltaEvent::ToolcallEnd {
                index,
                arguments: Some(json!({})),
            },
        ));
    }
    let text = calls.len();
    events.extend([
        at(sealed_ms, DeltaEvent::TextStart { index: text }),
        at(
            done_ms,
            DeltaEvent::TextDelta {
                index: text,
                delta: "going on".into(),
            },
        ),
        at(done_ms, DeltaEvent::TextEnd { index: text }),
        at(
            done_ms,
            DeltaEvent::Done {
                stop_reason: DoneReason::ToolUse,
                usage: Usage::default(),
            },
        ),
    ]);
    events
}

/// A response calling `slow` and `slower` (both marked async) and `lookup` (sync).
fn two_async_and_a_sync() -> Vec<TimedDelta> {
    calls_then_text(
        &[("a1", "slow", true), ("a2", "slower", true), ("s1", "lookup", false)],
        10,
        100,
    )
}

struct Ran {
    stop: AgentStop,
    seen: Vec<Seen>,
    events: Vec<AgentEvent>,
    context: Vec<Message>,
}

async fn run(tools: Vec<Work>, turns: Vec<Vec<TimedDelta>>, config: EngineConfig, cancel: CancellationToken) -> Ran {
    let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().expect("a store"));
    let session = store.create_session(0).await.expect("a session");
    let mut toolbox = Toolbox::new();
    for tool in tools {
        toolbox.register(tool).expect("a tool");
    }
    let engine = Engine::builder(Arc::clone(&store))
        .toolbox(toolbox)
        .config(config)
        .build();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let model = Recording {
        turns,
        seen: Arc::clone(&seen),
        began: Instant::now(),
    };
    let agent = Agent::new(engine, Arc::new(model));
    let events: Vec<AgentEvent> = agent.run(&session, UserMessage::new("go"), cancel).collect().await;
    let Some(AgentEvent::AgentEnd { stop }) = events.last().cloned() else {
        panic!("no agent_end last: {:?}", events.last())
    };
    let violations = check_session(store.as_ref(), &session).await.expect("the log loads");
    assert!(violations.is_empty(), "{violations:?}");
    let context = store.model_context(&session).await.expect("the context loads");
    let seen = std::mem::take(&mut *seen.lock().expect("not poisoned"));
    Ran {
        stop,
        seen,
        events,
        context,
    }
}

/// What a context holds, compactly: `call:<id>` for each call, `result:<id>` for each result, `user`, `text`.
fn shape(context: &[Message]) -> Vec<String> {
    let mut shape = Vec::new();
    for message in context {
        match message {
            Message::User(_) => shape.push("user".to_owned()),
            Message::Assistant(response) => {
                shape.extend(response.tool_calls().map(|call| format!("call:{}", call.id)));
                if response.tool_calls().next().is_none() {
                    shape.push("text".to_owned());
                }
            }
            Message::ToolResult(result) => shape.push(format!("result:{}", result.tool_call_id)),
        }
    }
    shape
}

/// The `pending` list of each `turn_end`, in order.
fn pending_at_ends(events: &[AgentEvent]) -> Vec<Vec<String>> {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ResponseEnd { outcome, .. } => Some(outcome.pending.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_result_slower_than_two_responses_reaches_the_model_once_in_the_request_after_it_is_ready() {
    let turns = vec![
        // a1 runs a second; s1 (sync) runs after the stream, so the next request has its result to send.
        calls_then_text(&[("a1", "research", true), ("s1", "lookup", false)], 10, 100),
        calls_then_text(&[("s2", "lookup", false)], 10, 100),
        // Nothing to call: the model only waits. The loop must not ask it again before a1's result is ready.
        text_response("still waiting"),
        text_response("research says: done"),
    ];
    let ran = run(
        vec![provider_async("research", 1_000), sync("lookup", 10)],
        turns,
        EngineConfig::default(),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.stop, AgentStop::Completed);
    let shapes: Vec<Vec<String>> = ran.seen.iter().map(|seen| shape(&seen.context)).collect();
    assert_eq!(
        shapes,
        [
            vec!["user"],
            vec!["user", "call:a1", "call:s1", "result:s1"],
            vec!["user", "call:a1", "call:s1", "result:s1", "call:s2", "result:s2"],
            // a1's result comes where it arrived, at the request after it was ready: once, never beside its call.
            vec![
                "user",
                "call:a1",
                "call:s1",
                "result:s1",
                "call:s2",
                "result:s2",
                "text",
                "result:a1"
            ],
        ]
    );
    let times: Vec<u64> = ran.seen.iter().map(|seen| seen.at_ms).collect();
    assert!(
        times[1] < 200 && times[2] < 400,
        "the loop went on without a1: {times:?}"
    );
    assert!(
        times[3] >= 1_010,
        "the response that only waited was not followed before a1 was ready: {times:?}"
    );
    // Each `turn_end` names the calls its own response left running.
    assert_eq!(
        pending_at_ends(&ran.events),
        [vec!["a1".to_owned()], vec![], vec![], vec![]]
    );
    // The stored context ends as the last request saw it, plus the answer.
    assert_eq!(shape(&ran.context).last().map(String::as_str), Some("text"));
}

#[tokio::test(start_paused = true)]
async fn two_async_calls_and_a_sync_call_the_sync_one_waits_for_the_stream_and_results_come_as_they_are_ready() {
    for (delivery, expected_requests) in [(AsyncDelivery::AllPending, 3), (AsyncDelivery::AsReady, 4)] {
        let turns = vec![
            two_async_and_a_sync(),
            text_response("waiting"),
            text_response("one in"),
            text_response("both in"),
        ];
        let ran = run(
            vec![
                provider_async("slow", 300),
                provider_async("slower", 600),
                sync("lookup", 50),
            ],
            turns,
            EngineConfig::default().async_delivery(delivery),
            CancellationToken::new(),
        )
        .await;
        assert_eq!(ran.stop, AgentStop::Completed, "{delivery:?}");
        assert_eq!(ran.seen.len(), expected_requests, "{delivery:?}");
        let starts: Vec<(String, u64)> = ran
            .events
            .iter()
            .filter_map(|event| match event {
                AgentEvent::ToolExecutionStart { call } => Some(call.id.clone()),
                _ => None,
            })
            .zip([10, 10, 100])
            .collect();
        assert_eq!(
            starts.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
            ["a1", "a2", "s1"],
            "the async calls start at their seal, the sync one after the stream"
        );
        // The second request carries s1 beside its call; a1 and a2 come later, in the order they were ready.
        assert_eq!(
            shape(&ran.seen[1].context),
            ["user", "call:a1", "call:a2", "call:s1", "result:s1"]
        );
        let last = shape(&ran.seen[expected_requests - 1].context);
        let tail: Vec<&str> = last
            .iter()
            .map(String::as_str)
            .filter(|s| s.starts_with("result:a"))
            .collect();
        assert_eq!(tail, ["result:a1", "result:a2"], "{delivery:?}");
        match delivery {
            AsyncDelivery::AllPending => {
                assert!(
                    ran.seen[2].at_ms >= 600,
                    "all pending waits for a2: {}",
                    ran.seen[2].at_ms
                );
            }
            AsyncDelivery::AsReady => {
                let (third, fourth) = (&ran.seen[2], &ran.seen[3]);
                assert!(
                    (300..600).contains(&third.at_ms) && fourth.at_ms >= 600,
                    "as ready: a1 alone, then a2 ({} ms, {} ms)",
                    third.at_ms,
                    fourth.at_ms
                );
                assert_eq!(shape(&third.context).last().map(String::as_str), Some("result:a1"));
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn cancelling_the_run_while_a_call_is_pending_cancels_it_and_stores_its_result() {
    let cancel = CancellationToken::new();
    let turns = vec![
        calls_then_text(&[("a1", "research", true)], 10, 100),
        text_response("never asked"),
    ];
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        canceller.cancel();
    });
    let ran = run(
        vec![provider_async("research", 10_000)],
        turns,
        EngineConfig::default(),
        cancel,
    )
    .await;
    assert_eq!(ran.stop, AgentStop::Cancelled);
    assert_eq!(
        ran.seen.len(),
        1,
        "only a1 was pending: the loop waited instead of asking again"
    );
    assert_eq!(shape(&ran.context), ["user", "call:a1", "result:a1"]);
    let ended: Vec<bool> = ran
        .events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolExecutionEnd { is_error, .. } => Some(*is_error),
            _ => None,
        })
        .collect();
    assert_eq!(ended, [true], "the cancelled call has its one (error) result");
}

#[tokio::test(start_paused = true)]
async fn a_call_the_provider_did_not_mark_async_waits_for_its_response_as_usual() {
    let turns = vec![
        calls_then_text(&[("a1", "research", false)], 10, 100),
        text_response("done"),
    ];
    let ran = run(
        vec![provider_async("research", 1_000)],
        turns,
        EngineConfig::default(),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.stop, AgentStop::Completed);
    assert_eq!(pending_at_ends(&ran.events), [Vec::<String>::new(), vec![]]);
    assert_eq!(shape(&ran.seen[1].context), ["user", "call:a1", "result:a1"]);
    assert!(ran.seen[1].at_ms >= 1_010);
}

#[tokio::test(start_paused = true)]
async fn a_result_ready_while_a_response_streams_comes_after_that_response() {
    // The second response streams for a second without committing anything; a1 is ready 300 ms in.
    let mut slow = text_response("thinking it over");
    for timed in slow.iter_mut().skip(2) {
        timed.at_ms = 1_000;
    }
    let turns = vec![
        calls_then_text(&[("a1", "research", true), ("s1", "lookup", false)], 10, 100),
        slow,
        text_response("done"),
    ];
    let ran = run(
        vec![provider_async("research", 300), sync("lookup", 10)],
        turns,
        EngineConfig::default(),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.stop, AgentStop::Completed);
    assert_eq!(
        ran.seen.len(),
        3,
        "the result arrived during the second response: a third request carries it"
    );
    assert_eq!(
        shape(&ran.seen[2].context),
        ["user", "call:a1", "call:s1", "result:s1", "text", "result:a1"],
        "after the response that never saw it"
    );
    let marked: Vec<Option<u32>> = ran
        .context
        .iter()
        .filter_map(|message| match message {
            Message::ToolResult(result) if result.tool_call_id == "a1" => Some(result.ready_during),
            _ => None,
        })
        .collect();
    assert_eq!(marked, [Some(1)]);
}

/// The pitfall of results lost at teardown (openclaw #60082): a run that stops with a call pending (here at its
/// request limit) ends only once the call has its stored result, and the session's next run delivers it.
#[tokio::test(start_paused = true)]
async fn a_run_that_stops_with_a_call_pending_stores_its_result_and_the_next_run_delivers_it() {
    let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().expect("a store"));
    let session = store.create_session(0).await.expect("a session");
    let mut toolbox = Toolbox::new();
    toolbox.register(provider_async("research", 300)).expect("a tool");
    let engine = Engine::builder(Arc::clone(&store))
        .toolbox(toolbox)
        .config(EngineConfig::default().max_requests(1))
        .build();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let model = Recording {
        turns: vec![
            calls_then_text(&[("a1", "research", true)], 10, 100),
            text_response("with the research"),
        ],
        seen: Arc::clone(&seen),
        began: Instant::now(),
    };
    let agent = Agent::new(engine, Arc::new(model));
    let first: Vec<AgentEvent> = agent
        .run(&session, UserMessage::new("go"), CancellationToken::new())
        .collect()
        .await;
    let Some(AgentEvent::AgentEnd { stop }) = first.last() else {
        panic!("no agent_end last")
    };
    assert_eq!(*stop, AgentStop::MaxRequests);
    assert!(
        first
            .iter()
            .any(|event| matches!(event, AgentEvent::ToolExecutionEnd { tool_call_id, .. } if tool_call_id == "a1")),
        "the run ended after a1's result"
    );
    let second: Vec<AgentEvent> = agent
        .run(&session, UserMessage::new("and?"), CancellationToken::new())
        .collect()
        .await;
    assert!(matches!(
        second.last(),
        Some(AgentEvent::AgentEnd {
            stop: AgentStop::Completed
        })
    ));
    let second_context = seen.lock().expect("not poisoned")[1].context.clone();
    assert_eq!(shape(&second_context), ["user", "call:a1", "result:a1", "user"]);
    let violations = check_session(store.as_ref(), &session).await.expect("the log loads");
    assert!(violations.is_empty(), "{violations:?}");
}

/// The pitfall of replaying work that had started (OpenClaw PR #151371): the stream fails after an async call
/// started, the loop continues from the stored context (contract §3.6.4), and the call has run once, with one
/// result.
#[tokio::test(start_paused = true)]
async fn a_stream_failing_after_an_async_call_started_never_runs_it_again() {
    let mut broken = calls_then_text(&[("a1", "research", true)], 10, 100);
    broken.truncate(broken.len() - 1);
    broken.push(at(
        100,
        DeltaEvent::Error {
            stop_reason: headstart::core::ErrorReason::Error,
            message: "connection reset".into(),
            usage: None,
            kind: None,
        },
    ));
    let ran = run(
        vec![provider_async("research", 300)],
        vec![broken, text_response("done")],
        EngineConfig::default().continue_after_failed_stream(Some(1)),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.stop, AgentStop::Completed);
    let starts = ran
        .events
        .iter()
        .filter(|event| matches!(event, AgentEvent::ToolExecutionStart { call } if call.id == "a1"))
        .count();
    assert_eq!(starts, 1, "started once, never replayed");
    assert_eq!(shape(&ran.seen[1].context), ["user", "call:a1", "result:a1"]);
}

/// A run that fails (here: the next request cannot be made) cancels its pending calls instead of waiting for them,
/// and their results are still stored.
#[tokio::test(start_paused = true)]
async fn a_run_that_fails_cancels_its_pending_calls() {
    let began = Instant::now();
    let ran = run(
        vec![provider_async("research", 600_000), sync("lookup", 10)],
        // No second response: the request after the first fails to open.
        vec![calls_then_text(
            &[("a1", "research", true), ("s1", "lookup", false)],
            10,
            100,
        )],
        EngineConfig::default(),
        CancellationToken::new(),
    )
    .await;
    assert!(matches!(ran.stop, AgentStop::Error(_)), "{:?}", ran.stop);
    assert!(
        began.elapsed() < Duration::from_secs(60),
        "did not wait ten minutes for research"
    );
    assert_eq!(
        shape(&ran.context),
        ["user", "call:a1", "call:s1", "result:s1", "result:a1"]
    );
}

/// A hostile model calling async tools response after response cannot pile up work: past `max_pending_calls`, a
/// response waits for its excess calls as for any call.
#[tokio::test(start_paused = true)]
async fn a_response_leaves_no_more_calls_pending_than_the_limit() {
    let turns = vec![two_async_and_a_sync(), text_response("waiting"), text_response("done")];
    let ran = run(
        vec![
            provider_async("slow", 300),
            provider_async("slower", 600),
            sync("lookup", 10),
        ],
        turns,
        EngineConfig::default().max_pending_calls(1),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(ran.stop, AgentStop::Completed);
    assert_eq!(
        pending_at_ends(&ran.events)[0],
        ["a2"],
        "a1 was waited for: one pending at most"
    );
    assert!(
        ran.seen[1].at_ms >= 310,
        "the first response ended once a1 was done: {}",
        ran.seen[1].at_ms
    );
    assert_eq!(
        shape(&ran.seen[1].context),
        ["user", "call:a1", "call:a2", "call:s1", "result:a1", "result:s1"]
    );
}
