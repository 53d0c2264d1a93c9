//! `headstart bench overlap`: how much tool latency early execution hides, on the wall clock.
//!
//! One realistic response ([`ResponseSpec::realistic`]: text at about 60 tokens/s, six early calls of 100–800 ms
//! and a final sync call) is run three ways in one process, alternating, `runs` times:
//! - **early**: headstart as configured by default (early calls start at their `toolcall_end`);
//! - **batch**: the same engine with `early_execution = false`, i.e. every call waits for the end of the stream
//!   (what most agent loops do);
//! - **lower bound**, computed from the early run's own event times: the latest of (seal time + body time) over
//!   the early calls and (stream end + body time) over the sync calls. Nothing that commits before it runs can
//!   finish earlier; `overhead_ms` = early − lower bound is what the engine adds (commits, scheduling, result
//!   writes, event delivery).
//!
//! Each time is measured from the moment the simulated model starts sending to the response's `turn_end` (every
//! call has its durable result). The model is a separate OS thread that sends each delta event over a channel at
//! its scheduled time and records when it actually sent it, like a network stream: the engine is woken by the
//! channel, not by a timer, and the seal times of the lower bound are the real send times. Tool bodies sleep on
//! tokio's timer and log when they began and returned; the lower bound uses those measured body times.
//!
//! Runtime: current-thread (one response is one task); SQLite runs on tokio's blocking pool as in production.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use headstart::core::{DoneReason, Usage};
use headstart::store::{SqliteOptions, SqliteStore};
use headstart::{
    AgentEvent, CancellationToken, DeltaEvent, Engine, EngineConfig, ModelError, Toolbox, TranscriptStore,
};
use serde::Serialize;

use crate::tools::{BenchTool, CallLog};
use crate::{bench_dir, current_thread_runtime, durability_name, median, round3, BenchError, Durability};

/// The name of the early tool of the response.
const ASYNC_TOOL: &str = "fetch";
/// The name of the sync tool of the response.
const SYNC_TOOL: &str = "apply";

/// One content block of a simulated response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockSpec {
    /// A text block of `tokens` deltas.
    Text {
        /// Number of text deltas.
        tokens: usize,
    },
    /// A tool call whose arguments stream as `arg_tokens` deltas; its body takes `tool_ms`.
    Call {
        /// How long the tool's body sleeps.
        tool_ms: u64,
        /// An early tool, or a sync one.
        early: bool,
        /// Number of argument deltas (at least 1).
        arg_tokens: usize,
    },
}

/// A simulated response: its blocks, streamed one delta per `token_interval`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseSpec {
    /// Time between two deltas (the token rate).
    pub token_interval: Duration,
    /// The content blocks, in order. The response ends with `done(tool_use)` right after the last block.
    pub blocks: Vec<BlockSpec>,
}

impl Default for ResponseSpec {
    fn default() -> Self {
        Self::realistic()
    }
}

impl ResponseSpec {
    /// The default response: 96 text tokens and 56 argument tokens at 16 ms per token (≈ 60 tokens/s, 2.4 s of
    /// streaming); six early calls (800, 500, 650, 300, 150, 100 ms), each after some text; then one sync call
    /// (200 ms) that ends the response.
    pub fn realistic() -> Self {
        let mut blocks = vec![BlockSpec::Text { tokens: 24 }];
        for tool_ms in [800, 500, 650, 300, 150, 100] {
            blocks.push(BlockSpec::Call {
                tool_ms,
                early: true,
                arg_tokens: 8,
            });
            blocks.push(BlockSpec::Text { tokens: 12 });
        }
        blocks.push(BlockSpec::Call {
            tool_ms: 200,
            early: false,
            arg_tokens: 8,
        });
        ResponseSpec {
            token_interval: Duration::from_millis(16),
            blocks,
        }
    }

    /// A response that takes a few milliseconds (for tests): a little text, an early call and a sync call.
    pub fn tiny() -> Self {
        ResponseSpec {
            token_interval: Duration::from_millis(1),
            blocks: vec![
                BlockSpec::Text { tokens: 2 },
                BlockSpec::Call {
                    tool_ms: 3,
                    early: true,
                    arg_tokens: 2,
                },
                BlockSpec::Call {
                    tool_ms: 1,
                    early: false,
                    arg_tokens: 2,
                },
            ],
        }
    }

    /// Number of tool calls.
    pub fn calls(&self) -> usize {
        self.blocks
            .iter()
            .filter(|block| matches!(block, BlockSpec::Call { .. }))
            .count()
    }

    /// Number of early calls.
    pub fn async_calls(&self) -> usize {
        self.blocks
            .iter()
            .filter(|block| matches!(block, BlockSpec::Call { early: true, .. }))
            .count()
    }

    /// The delta events with their send offsets, and where the calls and the end are.
    fn script(&self, tag: &str) -> Script {
        let mut events = Vec::new();
        let mut calls = Vec::new();
        let mut at = Duration::ZERO;
        events.push((
            at,
            DeltaEvent::Start {
                model: Some("bench".to_owned()),
                response_id: Some(format!("{tag}-response")),
            },
        ));
        for (index, block) in self.blocks.iter().enumerate() {
            match block {
                BlockSpec::Text { tokens } => {
                    events.push((at, DeltaEvent::TextStart { index }));
                    for token in 0..*tokens {
                        at += self.token_interval;
                        let delta = WORDS[token % WORDS.len()].to_owned();
                        events.push((at, DeltaEvent::TextDelta { index, delta }));
                    }
                    events.push((at, DeltaEvent::TextEnd { index }));
                }
                BlockSpec::Call {
                    tool_ms,
                    early,
                    arg_tokens,
                } => {
                    let id = format!("{tag}-call-{index}");
                    let name = if *early { ASYNC_TOOL } else { SYNC_TOOL };
                    events.push((
                        at,
                        DeltaEvent::ToolcallStart {
                            index,
                            id: id.clone(),
                            name: name.to_owned(),
                            early: false,
                        },
                    ));
                    let arguments = format!(r#"{{"ms": {tool_ms}, "path": "src/module_{index}/file.rs"}}"#);
                    for delta in split_even(&arguments, *arg_tokens) {
                        at += self.token_interval;
                        events.push((at, DeltaEvent::ToolcallDelta { index, delta }));
                    }
                    events.push((at, DeltaEvent::ToolcallEnd { index, arguments: None }));
                    calls.push(ScriptedCall {
                        id,
                        early: *early,
                        sealed_at: events.len() - 1,
                    });
                }
            }
        }
        events.push((
            at,
            DeltaEvent::Done {
                stop_reason: DoneReason::ToolUse,
                usage: Usage::default(),
            },
        ));
        let done_at = events.len() - 1;
        Script { events, calls, done_at }
    }
}

/// A few words for text deltas.
pub(crate) const WORDS: [&str; 8] = ["The ", "file ", "shows ", "that ", "the ", "tests ", "pass, ", "so "];

/// Splits ASCII `text` into `parts` pieces of nearly equal length (at least one piece).
fn split_even(text: &str, parts: usize) -> Vec<String> {
    let parts = parts.clamp(1, text.len().max(1));
    let bytes = text.as_bytes();
    (0..parts)
        .map(|part| {
            let from = part * bytes.len() / parts;
            let to = (part + 1) * bytes.len() / parts;
            String::from_utf8_lossy(&bytes[from..to]).into_owned()
        })
        .collect()
}

struct ScriptedCall {
    id: String,
    early: bool,
    /// Position of its `toolcall_end` in the script.
    sealed_at: usize,
}

struct Script {
    events: Vec<(Duration, DeltaEvent)>,
    calls: Vec<ScriptedCall>,
    done_at: usize,
}

/// Options of the overlap benchmark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlapOptions {
    /// Number of runs of each contender; figures are medians over the runs.
    pub runs: usize,
    /// Durability of the SQLite store.
    pub durability: Durability,
    /// Parent directory of the temporary database (default: the system's temporary directory).
    pub dir: Option<PathBuf>,
    /// The store's group commit ([`SqliteOptions::group_commit`]).
    pub group_commit: bool,
    /// The response.
    pub response: ResponseSpec,
}

impl Default for OverlapOptions {
    fn default() -> Self {
        OverlapOptions {
            runs: 5,
            durability: Durability::Normal,
            dir: None,
            group_commit: true,
            response: ResponseSpec::realistic(),
        }
    }
}

/// The figures of the overlap benchmark; serializes to exactly `early_ms`, `batch_ms`, `lower_bound_ms`,
/// `speedup`, `overhead_ms`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverlapReport {
    /// Median time to `turn_end` with early execution.
    pub early_ms: f64,
    /// Median time to `turn_end` with end-of-stream batching (`early_execution = false`).
    pub batch_ms: f64,
    /// Median lower bound, from the early runs' event times.
    pub lower_bound_ms: f64,
    /// `batch_ms / early_ms`.
    pub speedup: f64,
    /// Median over runs of (early − lower bound).
    pub overhead_ms: f64,
    /// Number of runs.
    #[serde(skip)]
    pub runs: usize,
    /// Calls admitted per response.
    #[serde(skip)]
    pub admitted_calls: usize,
    /// Early calls per response.
    #[serde(skip)]
    pub async_calls: usize,
    /// When the stream ends, from its start.
    #[serde(skip)]
    pub stream_ms: f64,
    /// The store's durability.
    #[serde(skip)]
    pub durability: Durability,
}

impl OverlapReport {
    /// The human table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let per_call = self.overhead_ms / self.admitted_calls.max(1) as f64;
        let _ = writeln!(
            out,
            "overlap: {} calls ({} async, {} sync), stream {:.0} ms, durability {}, median of {} runs",
            self.admitted_calls,
            self.async_calls,
            self.admitted_calls.saturating_sub(self.async_calls),
            self.stream_ms,
            durability_name(self.durability),
            self.runs
        );
        let _ = writeln!(out, "  {:<38} {:>10}", "", "ms");
        let _ = writeln!(out, "  {:<38} {:>10.1}", "early execution (headstart)", self.early_ms);
        let _ = writeln!(out, "  {:<38} {:>10.1}", "end-of-stream batch", self.batch_ms);
        let _ = writeln!(out, "  {:<38} {:>10.1}", "lower bound", self.lower_bound_ms);
        let _ = writeln!(out, "  {:<38} {:>10.3}", "speedup (batch / early)", self.speedup);
        let _ = writeln!(
            out,
            "  {:<38} {:>10.3}",
            "overhead (early - lower bound)", self.overhead_ms
        );
        let _ = writeln!(out, "  {:<38} {:>10.3}", "overhead per admitted call", per_call);
        out
    }
}

/// One measured run.
struct RunTimes {
    total_ms: f64,
    lower_bound_ms: f64,
    admitted: usize,
}

/// Runs the benchmark.
pub fn run(options: &OverlapOptions) -> Result<OverlapReport, BenchError> {
    let dir = bench_dir(options.dir.as_deref())?;
    let runtime = current_thread_runtime()?;
    let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open(
        dir.path().join("overlap.db"),
        SqliteOptions {
            durability: options.durability,
            group_commit: options.group_commit,
            ..SqliteOptions::default()
        },
    )?);
    let log = CallLog::new();
    let toolbox = Toolbox::new()
        .with(BenchTool::new(ASYNC_TOOL, true, Some(Arc::clone(&log))))
        .and_then(|toolbox| toolbox.with(BenchTool::new(SYNC_TOOL, false, Some(Arc::clone(&log)))))
        .map_err(|error| BenchError::new(error.to_string()))?;
    let early = Engine::builder(Arc::clone(&store)).toolbox(toolbox.clone()).build();
    let batch = Engine::builder(Arc::clone(&store))
        .toolbox(toolbox)
        .config(EngineConfig::default().early_execution(false))
        .build();
    let runs = options.runs.max(1);
    let (early_runs, batch_runs) = runtime.block_on(async {
        let mut early_runs = Vec::with_capacity(runs);
        let mut batch_runs = Vec::with_capacity(runs);
        for run in 0..runs {
            early_runs.push(run_once(&early, &store, &log, &options.response, &format!("e{run}")).await?);
            batch_runs.push(run_once(&batch, &store, &log, &options.response, &format!("b{run}")).await?);
        }
        Ok::<_, BenchError>((early_runs, batch_runs))
    })?;
    let early_ms = median(&early_runs.iter().map(|run| run.total_ms).collect::<Vec<_>>());
    let batch_ms = median(&batch_runs.iter().map(|run| run.total_ms).collect::<Vec<_>>());
    let lower_bound_ms = median(&early_runs.iter().map(|run| run.lower_bound_ms).collect::<Vec<_>>());
    let overhead_ms = median(
        &early_runs
            .iter()
            .map(|run| run.total_ms - run.lower_bound_ms)
            .collect::<Vec<_>>(),
    );
    let script = options.response.script("x");
    let stream_ms = script.events.last().map_or(0.0, |(at, _)| at.as_secs_f64() * 1000.0);
    Ok(OverlapReport {
        early_ms: round3(early_ms),
        batch_ms: round3(batch_ms),
        lower_bound_ms: round3(lower_bound_ms),
        speedup: round3(if early_ms > 0.0 { batch_ms / early_ms } else { 0.0 }),
        overhead_ms: round3(overhead_ms),
        runs,
        admitted_calls: early_runs.first().map_or(0, |run| run.admitted),
        async_calls: options.response.async_calls(),
        stream_ms,
        durability: options.durability,
    })
}

/// Streams the response once through `engine` on a fresh session.
async fn run_once(
    engine: &Engine,
    store: &Arc<dyn TranscriptStore>,
    log: &Arc<CallLog>,
    response: &ResponseSpec,
    tag: &str,
) -> Result<RunTimes, BenchError> {
    let session = store.create_session(0).await?;
    let Script { events, calls, done_at } = response.script(tag);
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<Result<DeltaEvent, ModelError>>();
    let start = Instant::now();
    let model = std::thread::spawn(move || {
        let mut sent = Vec::with_capacity(events.len());
        for (offset, event) in events {
            let due = start + offset;
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            sent.push(Instant::now());
            if sender.send(Ok(event)).is_err() {
                break;
            }
        }
        sent
    });
    let stream = futures::stream::poll_fn(move |cx| receiver.poll_recv(cx));
    let mut agent_events = engine.wrap(&session, 0, stream, CancellationToken::new());
    let mut ended = None;
    let mut failed = Vec::new();
    while let Some(event) = agent_events.next().await {
        match event {
            AgentEvent::ResponseEnd { outcome, .. } => ended = Some((Instant::now(), outcome)),
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                is_error: true,
                ..
            } => failed.push(tool_call_id),
            _ => {}
        }
    }
    let sent = model
        .join()
        .map_err(|_| BenchError::new("the simulated model thread panicked"))?;
    let Some((ended, outcome)) = ended else {
        return Err(BenchError::new("the response ended without turn_end"));
    };
    if let Some(failure) = outcome.store_failure.or(outcome.error) {
        return Err(BenchError::new(format!("the response failed: {failure}")));
    }
    if !failed.is_empty() {
        return Err(BenchError::new(format!("calls failed: {failed:?}")));
    }
    let done = sent
        .get(done_at)
        .copied()
        .ok_or_else(|| BenchError::new("the model did not send done"))?;
    let mut bound = done;
    for call in &calls {
        let body = log
            .body_of(&call.id)
            .ok_or_else(|| BenchError::new(format!("call {} never ran", call.id)))?;
        let ready = if call.early { sent[call.sealed_at] } else { done };
        bound = bound.max(ready + body);
    }
    Ok(RunTimes {
        total_ms: ms_between(start, ended),
        lower_bound_ms: ms_between(start, bound),
        admitted: outcome.admitted,
    })
}

fn ms_between(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_even_keeps_every_byte() {
        let text = r#"{"ms": 300, "path": "x"}"#;
        let parts = split_even(text, 8);
        assert_eq!(parts.len(), 8);
        assert_eq!(parts.concat(), text);
        assert_eq!(split_even("ab", 5).concat(), "ab");
    }

    #[test]
    fn the_realistic_response_has_the_shape_issue_6_asks_for() {
        let spec = ResponseSpec::realistic();
        assert!((4..=8).contains(&spec.async_calls()));
        assert_eq!(spec.calls() - spec.async_calls(), 1);
        let script = spec.script("t");
        assert_eq!(script.calls.len(), spec.calls());
        assert_eq!(script.done_at, script.events.len() - 1);
    }
}
