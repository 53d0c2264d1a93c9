//! `headstart bench sessions`: many concurrent agent sessions in one process against one SQLite file.
//!
//! Each of `sessions` concurrent tasks creates a session and runs the [`Agent`] loop on it, on the wall clock: the
//! first response streams a little text and two calls to an early tool (each body sleeps `tool_ms`), one token
//! every `token_ms`, and ends with `done(tool_use)`; the loop then makes a second request, answered with a short
//! text and `done(stop)`. Per session that is 2 executed calls and 10 durable writes (session, prompt, two prefix
//! commits, the terminal fragment, two `started` marks, two results, the final fragment) plus two context reads.
//!
//! All sessions start at once; `wall_ms` runs from the first spawn to the last session's `agent_end`.
//! `calls_per_s` counts executed calls, `commits_per_s` counts the store's durable write transactions as the
//! engine issues them (every write method of the store is one transaction), and `peak_rss_mb` is the process's
//! peak resident set (`VmHWM`) after the run.
//!
//! Runtime: multi-thread, one worker per core (`std::thread::available_parallelism`); SQLite work runs on tokio's
//! blocking pool.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::delta_log::TimedDelta;
use headstart::core::{DoneReason, Usage};
use headstart::store::{RunOutcome, SqliteOptions, SqliteStore};
use headstart::{
    Agent, AgentEvent, AgentStop, CancellationToken, DeltaEvent, DeltaStream, Engine, Model, ModelError, ModelRequest,
    Toolbox, TranscriptStore, UserMessage,
};
use headstart_sim::sim_model::timed_stream;
use serde::Serialize;

use crate::instrumented::instrumented;
use crate::overlap::WORDS;
use crate::tools::BenchTool;
use crate::{bench_dir, durability_name, peak_rss_mb, round3, BenchError, Durability};

/// Options of the sessions benchmark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionsOptions {
    /// Number of concurrent sessions.
    pub sessions: usize,
    /// Time between two deltas of a response.
    pub token_ms: u64,
    /// How long each tool body sleeps.
    pub tool_ms: u64,
    /// Durability of the SQLite store.
    pub durability: Durability,
    /// Parent directory of the temporary database (default: the system's temporary directory).
    pub dir: Option<PathBuf>,
    /// The store's group commit ([`SqliteOptions::group_commit`]).
    pub group_commit: bool,
    /// Worker threads of the runtime (`None`: one per core).
    pub workers: Option<usize>,
}

impl Default for SessionsOptions {
    fn default() -> Self {
        SessionsOptions {
            sessions: 10_000,
            token_ms: 10,
            tool_ms: 20,
            durability: Durability::Normal,
            dir: None,
            group_commit: true,
            workers: None,
        }
    }
}

/// The figures of the sessions benchmark; serializes to exactly `sessions`, `wall_ms`, `calls_per_s`,
/// `commits_per_s`, `peak_rss_mb`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionsReport {
    /// Concurrent sessions.
    pub sessions: usize,
    /// From the first spawn to the last `agent_end`.
    pub wall_ms: f64,
    /// Executed tool calls per second.
    pub calls_per_s: f64,
    /// Durable store writes per second.
    pub commits_per_s: f64,
    /// Peak resident set size of the process, MiB (0 where unknown).
    pub peak_rss_mb: f64,
    /// Executed calls.
    #[serde(skip)]
    pub calls: u64,
    /// Durable store writes.
    #[serde(skip)]
    pub commits: u64,
    /// The store's durability.
    #[serde(skip)]
    pub durability: Durability,
    /// Worker threads.
    #[serde(skip)]
    pub workers: usize,
    /// Whether the store ran with group commit.
    #[serde(skip)]
    pub group_commit: bool,
    /// The shortest possible session (streaming and tool time only), ms.
    #[serde(skip)]
    pub ideal_session_ms: f64,
}

impl SessionsReport {
    /// The human table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "sessions: {} concurrent agent sessions, one SQLite file (durability {}, group commit {}), {} worker threads",
            self.sessions,
            durability_name(self.durability),
            if self.group_commit { "on" } else { "off" },
            self.workers
        );
        let _ = writeln!(
            out,
            "  {:<38} {:>12.1}   (one session alone needs at least {:.0} ms)",
            "wall ms", self.wall_ms, self.ideal_session_ms
        );
        let _ = writeln!(out, "  {:<38} {:>12}", "calls executed", self.calls);
        let _ = writeln!(out, "  {:<38} {:>12.1}", "calls / s", self.calls_per_s);
        let _ = writeln!(out, "  {:<38} {:>12}", "durable writes", self.commits);
        let _ = writeln!(out, "  {:<38} {:>12.1}", "durable writes / s", self.commits_per_s);
        let _ = writeln!(out, "  {:<38} {:>12.1}", "peak RSS MiB", self.peak_rss_mb);
        out
    }
}

/// The model every session talks to: a response with two early calls, then a short closing text.
struct SessionModel {
    first: Vec<TimedDelta>,
    last: Vec<TimedDelta>,
}

impl SessionModel {
    fn new(token_ms: u64, tool_ms: u64) -> Self {
        let mut clock = 0;
        let mut tick = || {
            clock += token_ms;
            clock
        };
        let mut first = vec![at(0, start())];
        let mut index = 0;
        for call in 0..2 {
            push_text(&mut first, index, 4, &mut tick);
            index += 1;
            let now = tick();
            first.push(at(
                now,
                DeltaEvent::ToolcallStart {
                    index,
                    id: format!("call-{call}"),
                    name: "fetch".to_owned(),
                    early: false,
                    provider_async: false,
                },
            ));
            for piece in [r#"{"ms": "#.to_owned(), format!("{tool_ms}}}")] {
                first.push(at(tick(), DeltaEvent::ToolcallDelta { index, delta: piece }));
            }
            let now = tick();
            first.push(at(now, DeltaEvent::ToolcallEnd { index, arguments: None }));
            index += 1;
        }
        let now = tick();
        first.push(at(now, done(DoneReason::ToolUse)));
        let mut clock = 0;
        let mut tick = || {
            clock += token_ms;
            clock
        };
        let mut last = vec![at(0, start())];
        push_text(&mut last, 0, 4, &mut tick);
        let now = tick();
        last.push(at(now, done(DoneReason::Stop)));
        SessionModel { first, last }
    }

    /// The shortest time one session can take: both responses streamed, the second call's body in between.
    fn ideal_ms(&self, tool_ms: u64) -> u64 {
        let end = |events: &[TimedDelta]| events.last().map_or(0, |event| event.at_ms);
        let second_call_sealed = self
            .first
            .iter()
            .rev()
            .find(|event| matches!(event.event, DeltaEvent::ToolcallEnd { .. }))
            .map_or(0, |event| event.at_ms);
        end(&self.first).max(second_call_sealed + tool_ms) + end(&self.last)
    }
}

fn at(at_ms: u64, event: DeltaEvent) -> TimedDelta {
    TimedDelta { at_ms, event }
}

fn start() -> DeltaEvent {
    DeltaEvent::Start {
        model: Some("bench".to_owned()),
        response_id: None,
    }
}

fn done(stop_reason: DoneReason) -> DeltaEvent {
    DeltaEvent::Done {
        stop_reason,
        usage: Usage::default(),
    }
}

fn push_text(events: &mut Vec<TimedDelta>, index: usize, tokens: usize, tick: &mut impl FnMut() -> u64) {
    let now = tick();
    events.push(at(now, DeltaEvent::TextStart { index }));
    for token in 0..tokens {
        let now = tick();
        events.push(at(
            now,
            DeltaEvent::TextDelta {
                index,
                delta: WORDS[token % WORDS.len()].to_owned(),
            },
        ));
    }
    let now = tick();
    events.push(at(now, DeltaEvent::TextEnd { index }));
}

#[async_trait]
impl Model for SessionModel {
    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        match request.request {
            0 => Ok(timed_stream(self.first.clone())),
            1 => Ok(timed_stream(self.last.clone())),
            other => Err(ModelError::new(format!("no response for request {other}"))),
        }
    }
}

/// Runs the benchmark.
pub fn run(options: &SessionsOptions) -> Result<SessionsReport, BenchError> {
    let dir = bench_dir(options.dir.as_deref())?;
    let workers = options
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from))
        .max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    let sqlite = SqliteStore::open(
        dir.path().join("sessions.db"),
        SqliteOptions {
            durability: options.durability,
            group_commit: options.group_commit,
            ..SqliteOptions::default()
        },
    )?;
    let store = Arc::new(instrumented(Arc::new(sqlite)));
    let toolbox = Toolbox::new()
        .with(BenchTool::new("fetch", true, None))
        .map_err(|error| BenchError::new(error.to_string()))?;
    let engine = Engine::builder(Arc::clone(&store) as Arc<dyn TranscriptStore>)
        .toolbox(toolbox)
        .build();
    let model = SessionModel::new(options.token_ms, options.tool_ms);
    let ideal_session_ms = model.ideal_ms(options.tool_ms) as f64;
    let agent = Agent::new(engine, Arc::new(model));
    let sessions = options.sessions.max(1);
    let (elapsed, calls) = runtime.block_on(async {
        let started = Instant::now();
        let tasks: Vec<_> = (0..sessions)
            .map(|_| tokio::spawn(one_session(agent.clone())))
            .collect();
        let mut calls = 0;
        for task in tasks {
            calls += task
                .await
                .map_err(|error| BenchError::new(format!("a session task failed: {error}")))??;
        }
        Ok::<(Duration, u64), BenchError>((started.elapsed(), calls))
    })?;
    let commits = store.layer().writes();
    drop(runtime);
    let seconds = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
    Ok(SessionsReport {
        sessions,
        wall_ms: round3(elapsed.as_secs_f64() * 1000.0),
        calls_per_s: round3(calls as f64 / seconds),
        commits_per_s: round3(commits as f64 / seconds),
        peak_rss_mb: round3(peak_rss_mb().unwrap_or(0.0)),
        calls,
        commits,
        durability: options.durability,
        workers,
        group_commit: options.group_commit,
        ideal_session_ms,
    })
}

/// One session: creates it, runs the agent loop to its end; returns the number of executed calls.
async fn one_session(agent: Agent) -> Result<u64, BenchError> {
    let store = Arc::clone(agent.engine().store());
    let session = store.create_session(agent.engine().clock().now_us()).await?;
    let mut events = agent.run(
        &session,
        UserMessage::new("Check both files."),
        CancellationToken::new(),
    );
    let mut calls = 0;
    let mut stop = None;
    while let Some(event) = events.next().await {
        match event {
            AgentEvent::ToolExecutionEnd {
                is_error: false,
                outcome: Some(RunOutcome::Finished),
                ..
            } => calls += 1,
            AgentEvent::AgentEnd { stop: end } => stop = Some(end),
            _ => {}
        }
    }
    match stop {
        Some(AgentStop::Completed) => Ok(calls),
        other => Err(BenchError::new(format!("session {session} ended with {other:?}"))),
    }
}
