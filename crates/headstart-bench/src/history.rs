//! `headstart bench history`: what one step of the agent loop costs as the session's history grows.
//!
//! One session runs `rounds` requests on each store. Every response but the last is `bytes` of text and one early
//! call whose result is `result_bytes` long; the last is a plain answer. The model answers at once (no pacing), so
//! the run is all overhead. The figure is the **step gap**: from the response's last durable write (its result) to
//! the loop's next `Model::stream` call. It holds the outcome decision, the context brought up to date and handed
//! to the model, and the request's construction. Its median over the first and the last `window` steps, side by
//! side, shows whether a step at round 1,000 costs what it cost at round 1.
//!
//! With `wire`, the model also builds each request's body in that wire format the way `HttpModel` does (from the
//! items kept from the request before, `BodyCache`) and, beside it, whole (`build_body`), and reports both times:
//! what a provider request costs to build at the session's start and at its end, cached and not.
//!
//! With `verify`, the model also compares every request's context with a fresh read of the whole log
//! (`TranscriptStore::model_context`), and the run fails on any difference: a check, so its timings are not
//! reported as figures.
//!
//! Runtime: current-thread, as the other single-session modes.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::future::BoxFuture;
use futures::StreamExt;
use headstart::core::{DoneReason, Usage};
use headstart::store::{Layered, SqliteOptions, SqliteStore, Write, WriteFuture, WriteLayer, Written};
use headstart::{
    Agent, AgentEvent, AgentStop, Arguments, CancellationToken, DeltaEvent, DeltaStream, Engine, EngineConfig, Model,
    ModelError, ModelRequest, SessionId, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, Toolbox, TranscriptStore,
    UserMessage,
};
use headstart_providers::request::{build_body, BodyCache, RequestSettings};
use headstart_providers::WireFormat;
use serde::Serialize;

use crate::{bench_dir, current_thread_runtime, durability_name, median, peak_rss_mb, round3, BenchError, Durability};

/// Options of `headstart bench history`.
#[derive(Debug, Clone)]
pub struct HistoryOptions {
    /// Requests in the session (at least 2).
    pub rounds: usize,
    /// Text bytes of each response.
    pub bytes: usize,
    /// Bytes of each call's result.
    pub result_bytes: usize,
    /// Steps at each end of the session whose gaps are compared.
    pub window: usize,
    /// Compare every request's context with a fresh read of the store.
    pub verify: bool,
    /// Also build each request's body in this wire format, cached and whole.
    pub wire: Option<WireFormat>,
    /// Where the SQLite files go (default: the system's temporary directory).
    pub dir: Option<std::path::PathBuf>,
}

impl Default for HistoryOptions {
    fn default() -> Self {
        HistoryOptions {
            rounds: 1_000,
            bytes: 2_500,
            result_bytes: 600,
            window: 50,
            verify: false,
            wire: None,
            dir: None,
        }
    }
}

/// Opens a store on the benchmark's runtime (a PostgreSQL pool's connections live on the runtime that made them).
pub type OpenStore = Box<dyn FnOnce() -> BoxFuture<'static, Result<Arc<dyn TranscriptStore>, BenchError>>>;

/// A store to run the session on, by name.
pub struct HistoryStore {
    /// The row's name (`sqlite normal`, `postgresql`).
    pub name: String,
    /// Opens the store; the session is created in it (and left there).
    pub open: OpenStore,
}

/// One store's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryRow {
    /// The store.
    pub store: String,
    /// Median step gap over the first `window` steps, in ms.
    pub first_ms: f64,
    /// Median step gap over the last `window` steps, in ms.
    pub last_ms: f64,
    /// `last_ms / first_ms`.
    pub growth: f64,
    /// With `wire`: the median time to build a body from the kept items, over the first and the last steps, in ms.
    pub body_ms: Option<(f64, f64)>,
    /// With `wire`: the same for the whole body serialized anew.
    pub whole_body_ms: Option<(f64, f64)>,
    /// The session's stored message bodies at the end, in KiB.
    pub history_kib: f64,
    /// The process's peak resident set size after this store's run, in MiB (0 where unknown).
    pub peak_rss_mb: f64,
}

/// The report of `headstart bench history`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryReport {
    /// Requests per session.
    pub rounds: usize,
    /// Text bytes per response.
    pub bytes: usize,
    /// Bytes per result.
    pub result_bytes: usize,
    /// Steps per window.
    pub window: usize,
    /// Whether every request's context was checked against a fresh read.
    pub verified: bool,
    /// One row per store.
    pub rows: Vec<HistoryRow>,
}

impl HistoryReport {
    /// The human table.
    pub fn table(&self) -> String {
        let mut out = format!(
            "history: {} rounds, {} B of text and a {} B result each; step gap (last durable write -> next \
             request), median of the first and the last {} steps{}\n",
            self.rounds,
            self.bytes,
            self.result_bytes,
            self.window,
            if self.verified {
                " (verified: timings include the check)"
            } else {
                ""
            },
        );
        let _ = writeln!(
            out,
            "{:<16} {:>10} {:>10} {:>8} {:>12} {:>10}",
            "store", "first ms", "last ms", "growth", "history KiB", "peak MiB"
        );
        for row in &self.rows {
            let _ = writeln!(
                out,
                "{:<16} {:>10.3} {:>10.3} {:>7.2}x {:>12.1} {:>10.1}",
                row.store, row.first_ms, row.last_ms, row.growth, row.history_kib, row.peak_rss_mb
            );
        }
        let bodies = self
            .rows
            .iter()
            .filter_map(|row| Some((row, row.body_ms?, row.whole_body_ms?)));
        for (n, (row, cached, whole)) in bodies.enumerate() {
            if n == 0 {
                let _ = writeln!(
                    out,
                    "request body, first -> last ms: from kept items | serialized whole"
                );
            }
            let _ = writeln!(
                out,
                "{:<16} {:>8.3} -> {:<8.3} | {:>8.3} -> {:.3}",
                row.store, cached.0, cached.1, whole.0, whole.1
            );
        }
        out
    }
}

/// The SQLite stores the benchmark always measures (normal and full durability) in a fresh directory, followed by
/// `others`.
pub fn run(options: &HistoryOptions, others: Vec<HistoryStore>) -> Result<HistoryReport, BenchError> {
    let dir = bench_dir(options.dir.as_deref())?;
    let mut stores = Vec::new();
    for durability in [Durability::Normal, Durability::Full] {
        let name = durability_name(durability);
        let sqlite = SqliteStore::open(
            dir.path().join(format!("history-{name}.db")),
            SqliteOptions {
                durability,
                ..SqliteOptions::default()
            },
        )?;
        let sqlite: Arc<dyn TranscriptStore> = Arc::new(sqlite);
        stores.push(HistoryStore {
            name: format!("sqlite {name}"),
            open: Box::new(move || Box::pin(std::future::ready(Ok(sqlite)))),
        });
    }
    stores.extend(others);
    let runtime = current_thread_runtime()?;
    let mut rows = Vec::new();
    for store in stores {
        let (gaps, history) = runtime.block_on(async {
            let opened = (store.open)().await?;
            let gaps = one_session(options, Arc::clone(&opened)).await?;
            let history = history_bytes(opened.as_ref(), &gaps.session).await?;
            Ok::<_, BenchError>((gaps, history))
        })?;
        let window = options.window.clamp(1, gaps.steps.len().max(1));
        let ms = |steps: &[Duration]| {
            let ms: Vec<f64> = steps.iter().map(|gap| gap.as_secs_f64() * 1000.0).collect();
            median(&ms)
        };
        let ends = |steps: &[Duration]| {
            let first = ms(&steps[..window.min(steps.len())]);
            let last = ms(&steps[steps.len().saturating_sub(window)..]);
            (first, last)
        };
        let (first, last) = ends(&gaps.steps);
        let bodies = options.wire.map(|_| {
            let (cached, whole) = (ends(&gaps.bodies), ends(&gaps.whole_bodies));
            ((round3(cached.0), round3(cached.1)), (round3(whole.0), round3(whole.1)))
        });
        rows.push(HistoryRow {
            store: store.name,
            first_ms: round3(first),
            last_ms: round3(last),
            growth: round3(last / first.max(f64::MIN_POSITIVE)),
            body_ms: bodies.map(|(cached, _)| cached),
            whole_body_ms: bodies.map(|(_, whole)| whole),
            history_kib: round3(history as f64 / 1024.0),
            peak_rss_mb: round3(peak_rss_mb().unwrap_or(0.0)),
        });
    }
    Ok(HistoryReport {
        rounds: options.rounds,
        bytes: options.bytes,
        result_bytes: options.result_bytes,
        window: options.window,
        verified: options.verify,
        rows,
    })
}

/// The step gaps of one session, in request order (request 1 on), and the body times (every request).
struct Gaps {
    session: SessionId,
    steps: Vec<Duration>,
    bodies: Vec<Duration>,
    whole_bodies: Vec<Duration>,
}

async fn one_session(options: &HistoryOptions, inner: Arc<dyn TranscriptStore>) -> Result<Gaps, BenchError> {
    let rounds = options.rounds.max(2);
    let clock = Arc::new(Layered::new(inner, WriteClock::default()));
    let store: Arc<dyn TranscriptStore> = Arc::clone(&clock) as Arc<dyn TranscriptStore>;
    let toolbox = Toolbox::new()
        .with(Lookup {
            result: "r".repeat(options.result_bytes),
        })
        .map_err(|error| BenchError::new(error.to_string()))?;
    let engine = Engine::builder(Arc::clone(&store))
        .toolbox(toolbox)
        .config(EngineConfig::default().max_requests(u32::try_from(rounds).unwrap_or(u32::MAX)))
        .build();
    let session = engine.create_session().await?;
    let model = HistoryModel {
        rounds,
        text: "t".repeat(options.bytes),
        clock,
        steps: Mutex::default(),
        verify: options.verify.then(|| (Arc::clone(&store), session.clone())),
        wire: options.wire,
        bodies: BodyCache::new(),
        body_times: Mutex::default(),
    };
    let model = Arc::new(model);
    let agent = Agent::new(engine, Arc::clone(&model) as Arc<dyn Model>);
    let mut events = agent.run(&session, UserMessage::new("go"), CancellationToken::new());
    let mut stop = None;
    while let Some(event) = events.next().await {
        if let AgentEvent::AgentEnd { stop: end } = event {
            stop = Some(end);
        }
    }
    if stop != Some(AgentStop::Completed) {
        return Err(BenchError::new(format!("the session ended with {stop:?}")));
    }
    let steps = std::mem::take(&mut *model.steps.lock().unwrap_or_else(PoisonError::into_inner));
    if steps.len() + 1 != rounds {
        return Err(BenchError::new(format!(
            "{} of {rounds} requests were made",
            steps.len() + 1
        )));
    }
    let (bodies, whole_bodies) = std::mem::take(&mut *model.body_times.lock().unwrap_or_else(PoisonError::into_inner))
        .into_iter()
        .unzip();
    Ok(Gaps {
        session,
        steps,
        bodies,
        whole_bodies,
    })
}

async fn history_bytes(store: &dyn TranscriptStore, session: &SessionId) -> Result<usize, BenchError> {
    let log = store.load_log(session).await?;
    Ok(log
        .iter()
        .map(|stored| serde_json::to_string(&stored.message).map_or(0, |body| body.len()))
        .sum())
}

/// Notes when the last durable write ended.
#[derive(Debug, Default)]
struct WriteClock {
    last_write: Mutex<Option<Instant>>,
}

impl WriteLayer for WriteClock {
    fn around<'a, T: Written + 'a>(&'a self, _write: Write<'a>, next: WriteFuture<'a, T>) -> WriteFuture<'a, T> {
        Box::pin(async move {
            let written = next.await;
            *self.last_write.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
            written
        })
    }
}

/// Answers each request at once: `text` and one early `lookup` call, a plain answer for the last request. Notes
/// each request's step gap, and checks its context when asked to.
struct HistoryModel {
    rounds: usize,
    text: String,
    clock: Arc<Layered<WriteClock>>,
    steps: Mutex<Vec<Duration>>,
    verify: Option<(Arc<dyn TranscriptStore>, SessionId)>,
    wire: Option<WireFormat>,
    bodies: BodyCache,
    /// Per request: the body from kept items, and the whole body.
    body_times: Mutex<Vec<(Duration, Duration)>>,
}

#[async_trait]
impl Model for HistoryModel {
    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let now = Instant::now();
        if request.request > 0 {
            let last_write = *self
                .clock
                .layer()
                .last_write
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let gap = last_write.map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
            self.steps.lock().unwrap_or_else(PoisonError::into_inner).push(gap);
        }
        if let Some((store, session)) = &self.verify {
            let fresh = store
                .model_context(session)
                .await
                .map_err(|error| ModelError::new(format!("verify: {error}")))?;
            if request.context.to_vec() != fresh {
                return Err(ModelError::new(format!(
                    "verify: request {} got a context that differs from the store's",
                    request.request
                )));
            }
        }
        if let Some(format) = self.wire {
            let settings = RequestSettings {
                model: "history".to_owned(),
                ..RequestSettings::default()
            };
            let started = Instant::now();
            let cached = self
                .bodies
                .body_text(format, &settings, &request.context, &request.tools);
            let between = Instant::now();
            let whole = build_body(format, &settings, &request.context, &request.tools).to_string();
            let times = (between - started, between.elapsed());
            self.body_times
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(times);
            if cached.len() != whole.len() {
                return Err(ModelError::new(format!(
                    "request {}: the cached body has {} bytes, the whole one {}",
                    request.request,
                    cached.len(),
                    whole.len()
                )));
            }
        }
        let last = usize::try_from(request.request).unwrap_or(usize::MAX) + 1 >= self.rounds;
        let mut events = vec![
            DeltaEvent::Start {
                model: Some("history".to_owned()),
                response_id: None,
            },
            DeltaEvent::TextStart { index: 0 },
        ];
        // Text in deltas of about 250 bytes, as a provider streams it.
        let mut rest = self.text.as_str();
        while !rest.is_empty() {
            let (piece, after) = rest.split_at(rest.len().min(250));
            events.push(DeltaEvent::TextDelta {
                index: 0,
                delta: piece.to_owned(),
            });
            rest = after;
        }
        events.push(DeltaEvent::TextEnd { index: 0 });
        if !last {
            events.extend([
                DeltaEvent::ToolcallStart {
                    index: 1,
                    id: format!("call_{}", request.request),
                    name: "lookup".to_owned(),
                    early: true,
                    provider_async: false,
                },
                DeltaEvent::ToolcallDelta {
                    index: 1,
                    delta: format!(r#"{{"round": {}}}"#, request.request),
                },
                DeltaEvent::ToolcallEnd {
                    index: 1,
                    arguments: None,
                },
            ]);
        }
        events.push(DeltaEvent::Done {
            stop_reason: if last { DoneReason::Stop } else { DoneReason::ToolUse },
            usage: Usage::default(),
        });
        Ok(Box::pin(futures::stream::iter(events.into_iter().map(Ok))))
    }
}

/// The early tool: returns its fixed result at once.
struct Lookup {
    result: String,
}

#[async_trait]
impl Tool for Lookup {
    fn spec(&self) -> &ToolSpec {
        static SPEC: std::sync::LazyLock<ToolSpec> = std::sync::LazyLock::new(|| ToolSpec::new("lookup").early(true));
        &SPEC
    }

    async fn execute(&self, _arguments: Arguments, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(self.result.clone()))
    }
}
