//! `headstart bench admission`: from a sealed `toolcall_end` to the tool's `execute` starting.
//!
//! The admission path of an early call is: accumulate the `toolcall_end`, decide to commit, build the prefix
//! fragment, write it and its `admitted` run record in one durable transaction (on tokio's blocking pool), emit its
//! `message_end`, admit the call, prepare it (lookup, schema validation, hooks), start it, and poll its body. The
//! latency is measured from the instant the model stream hands the `toolcall_end` to the engine to the first
//! instruction of the tool's `execute`.
//!
//! The **floor** is what SQLite alone needs for the durable part: on a second database file in the same directory,
//! opened with the same pragmas (WAL, the same `synchronous`, foreign keys on), one `BEGIN IMMEDIATE`, an insert of
//! a row whose body is as large as the stored fragment, and `COMMIT`, timed around the SQLite calls only.
//!
//! Samples of both are interleaved in one run, one at a time: before each call, the stream waits until the store
//! has no write in flight (the previous call's `started` mark and result), takes one floor sample, waits again, and
//! only then streams the next call. Each response carries `calls_per_response` calls (a few text deltas, then a
//! call to an async no-op tool with three argument deltas).
//!
//! The **sequential gap** is the other place a durable write could sit between two calls: in sequential mode, from
//! one call's body returning to the next call's body beginning. One response of `calls` sync calls runs in
//! sequential mode on the same store; each gap is timed from the tool's own last and first lines.
//!
//! Runtime: current-thread.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use headstart::core::{DoneReason, Usage};
use headstart::store::{SqliteOptions, SqliteStore};
use headstart::{
    AgentEvent, CancellationToken, DeltaEvent, Engine, EngineConfig, ExecutionMode, ModelError, Toolbox,
    TranscriptStore,
};
use serde::{Serialize, Serializer};

use crate::floor::{fragment_bytes, Floor};
use crate::instrumented::{instrumented, InstrumentedStore};
use crate::tools::{BenchTool, CallLog};
use crate::{bench_dir, current_thread_runtime, durability_name, percentile, round3, BenchError, Durability};

/// Options of the admission benchmark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionOptions {
    /// Number of admissions (and floor samples) measured.
    pub calls: usize,
    /// Calls per response.
    pub calls_per_response: usize,
    /// Durability of both databases.
    pub durability: Durability,
    /// Parent directory of the temporary databases (default: the system's temporary directory).
    pub dir: Option<PathBuf>,
    /// The store's group commit ([`SqliteOptions::group_commit`]).
    pub group_commit: bool,
}

impl Default for AdmissionOptions {
    fn default() -> Self {
        AdmissionOptions {
            calls: 200,
            calls_per_response: 20,
            durability: Durability::Normal,
            dir: None,
            group_commit: true,
        }
    }
}

fn serialize_durability<S: Serializer>(durability: &Durability, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(durability_name(*durability))
}

/// The figures of the admission benchmark; serializes to exactly `durability`, `floor_p50_us`, `floor_p99_us`,
/// `admission_p50_us`, `admission_p99_us`, `sequential_gap_p50_us`, `sequential_gap_p99_us`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdmissionReport {
    /// The durability both databases ran with.
    #[serde(serialize_with = "serialize_durability")]
    pub durability: Durability,
    /// Bare SQLite commit of a same-sized row: median, µs.
    pub floor_p50_us: f64,
    /// Bare SQLite commit: 99th percentile, µs.
    pub floor_p99_us: f64,
    /// Sealed `toolcall_end` → `execute` starts: median, µs.
    pub admission_p50_us: f64,
    /// Sealed `toolcall_end` → `execute` starts: 99th percentile, µs.
    pub admission_p99_us: f64,
    /// Sequential mode, a call's body returning → the next call's body beginning: median, µs.
    pub sequential_gap_p50_us: f64,
    /// The sequential gap: 99th percentile, µs.
    pub sequential_gap_p99_us: f64,
    /// Number of samples of each.
    #[serde(skip)]
    pub samples: usize,
    /// Size of the stored fragment body (and of the floor's row), bytes.
    #[serde(skip)]
    pub row_bytes: usize,
    /// Whether the store ran with group commit.
    #[serde(skip)]
    pub group_commit: bool,
    /// A round trip to tokio's blocking pool with nothing to do (the hand-off every store operation pays): median,
    /// µs.
    #[serde(skip)]
    pub hop_p50_us: f64,
    /// The blocking-pool round trip: 99th percentile, µs.
    #[serde(skip)]
    pub hop_p99_us: f64,
    /// The fragment commit alone, as the engine awaits it (blocking-pool hand-off included): median, µs.
    #[serde(skip)]
    pub commit_p50_us: f64,
    /// The fragment commit alone: 99th percentile, µs.
    #[serde(skip)]
    pub commit_p99_us: f64,
}

impl AdmissionReport {
    /// The human table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "admission: durability {}, group commit {}, {} samples each, fragment row {} bytes",
            durability_name(self.durability),
            if self.group_commit { "on" } else { "off" },
            self.samples,
            self.row_bytes
        );
        let _ = writeln!(out, "  {:<44} {:>10} {:>10}", "", "p50 µs", "p99 µs");
        let _ = writeln!(
            out,
            "  {:<44} {:>10.1} {:>10.1}",
            "bare SQLite commit (floor)", self.floor_p50_us, self.floor_p99_us
        );
        let _ = writeln!(
            out,
            "  {:<44} {:>10.1} {:>10.1}",
            "blocking-pool round trip, empty", self.hop_p50_us, self.hop_p99_us
        );
        let _ = writeln!(
            out,
            "  {:<44} {:>10.1} {:>10.1}",
            "store.commit_fragment as awaited", self.commit_p50_us, self.commit_p99_us
        );
        let _ = writeln!(
            out,
            "  {:<44} {:>10.1} {:>10.1}",
            "toolcall_end -> execute (admission)", self.admission_p50_us, self.admission_p99_us
        );
        let _ = writeln!(
            out,
            "  {:<44} {:>10.1} {:>10.1}",
            "sequential: body returns -> next body begins", self.sequential_gap_p50_us, self.sequential_gap_p99_us
        );
        let _ = writeln!(
            out,
            "  {:<44} {:>10.1} {:>10.1}",
            "admission - floor",
            self.admission_p50_us - self.floor_p50_us,
            self.admission_p99_us - self.floor_p99_us
        );
        out
    }
}

/// Runs the benchmark.
pub fn run(options: &AdmissionOptions) -> Result<AdmissionReport, BenchError> {
    let dir = bench_dir(options.dir.as_deref())?;
    let runtime = current_thread_runtime()?;
    let sqlite = SqliteStore::open(
        dir.path().join("admission.db"),
        SqliteOptions {
            durability: options.durability,
            group_commit: options.group_commit,
            ..SqliteOptions::default()
        },
    )?;
    let store = Arc::new(instrumented(Arc::new(sqlite)));
    let log = CallLog::new();
    let toolbox = Toolbox::new()
        .with(BenchTool::new("probe", true, Some(Arc::clone(&log))))
        .map_err(|error| BenchError::new(error.to_string()))?;
    let engine = Engine::builder(Arc::clone(&store) as Arc<dyn TranscriptStore>)
        .toolbox(toolbox)
        .build();
    let mut floor = Floor::open(&dir.path().join("floor.db"), options.durability)?;
    let calls = options.calls.max(1);
    let per_response = options.calls_per_response.max(1);
    runtime.block_on(async {
        // Warm-up response: sizes the floor's row from the stored fragment, and is not measured.
        let session = store.create_session(0).await?;
        let warm = Arc::new(Samples::default());
        respond(&engine, &store, &session, 0, per_response.min(3), None, &warm).await?;
        let row_bytes = fragment_bytes(store.as_ref(), &session)
            .await?
            .first()
            .copied()
            .ok_or_else(|| BenchError::new("the warm-up response stored no fragment"))?;
        floor.resize(row_bytes);
        store.layer().take_fragment_commit_times();
        let floor = Arc::new(floor);
        let samples = Arc::new(Samples::default());
        let mut request = 1;
        let mut remaining = calls;
        while remaining > 0 {
            let count = remaining.min(per_response);
            respond(&engine, &store, &session, request, count, Some(&floor), &samples).await?;
            remaining -= count;
            request += 1;
        }
        let (floor_us, admission_us) = samples.collect(&log)?;
        let hop_us: Vec<f64> = samples
            .hops
            .lock()
            .map(|hops| hops.iter().map(|hop| hop.as_secs_f64() * 1e6).collect())
            .unwrap_or_default();
        let commit_us: Vec<f64> = store
            .layer()
            .take_fragment_commit_times()
            .iter()
            .map(|time| time.as_secs_f64() * 1e6)
            .collect();
        let gap_us = sequential_gaps(Arc::clone(&store) as Arc<dyn TranscriptStore>, calls).await?;
        Ok(AdmissionReport {
            durability: options.durability,
            sequential_gap_p50_us: round3(percentile(&gap_us, 50.0)),
            sequential_gap_p99_us: round3(percentile(&gap_us, 99.0)),
            floor_p50_us: round3(percentile(&floor_us, 50.0)),
            floor_p99_us: round3(percentile(&floor_us, 99.0)),
            admission_p50_us: round3(percentile(&admission_us, 50.0)),
            admission_p99_us: round3(percentile(&admission_us, 99.0)),
            samples: admission_us.len(),
            row_bytes,
            group_commit: options.group_commit,
            hop_p50_us: round3(percentile(&hop_us, 50.0)),
            hop_p99_us: round3(percentile(&hop_us, 99.0)),
            commit_p50_us: round3(percentile(&commit_us, 50.0)),
            commit_p99_us: round3(percentile(&commit_us, 99.0)),
        })
    })
}

/// One response of `calls` sync calls in sequential mode; the gaps (µs) between one body's return and the next
/// body's first line.
async fn sequential_gaps(store: Arc<dyn TranscriptStore>, calls: usize) -> Result<Vec<f64>, BenchError> {
    let log = CallLog::new();
    let toolbox = Toolbox::new()
        .with(BenchTool::new("step", false, Some(Arc::clone(&log))))
        .map_err(|error| BenchError::new(error.to_string()))?;
    let engine = Engine::builder(Arc::clone(&store))
        .toolbox(toolbox)
        // The chain is as long as the benchmark asks: the per-response cap (a safety default against a hostile
        // model, 128) is the benchmark's to set, not a limit it may trip over.
        .config(
            EngineConfig::default()
                .tool_execution(ExecutionMode::Sequential)
                .max_calls_per_response(None),
        )
        .build();
    let session = store.create_session(0).await?;
    let ids: Vec<String> = (0..calls.max(2)).map(|n| format!("step-{n}")).collect();
    let mut deltas = vec![DeltaEvent::Start {
        model: None,
        response_id: None,
    }];
    for (index, id) in ids.iter().enumerate() {
        deltas.push(DeltaEvent::ToolcallStart {
            index,
            id: id.clone(),
            name: "step".into(),
            early: false,
            provider_async: false,
        });
        deltas.push(DeltaEvent::ToolcallEnd { index, arguments: None });
    }
    deltas.push(DeltaEvent::Done {
        stop_reason: DoneReason::ToolUse,
        usage: Usage::default(),
    });
    let stream = futures::stream::iter(deltas.into_iter().map(Ok::<_, ModelError>));
    let mut events = engine.wrap(&session, 0, stream, CancellationToken::new());
    while events.next().await.is_some() {}
    ids.windows(2)
        .map(|pair| {
            let returned = log.end_of(&pair[0]);
            let next = log.start_of(&pair[1]);
            match (returned, next) {
                (Some(returned), Some(next)) => Ok(next.saturating_duration_since(returned).as_secs_f64() * 1e6),
                _ => Err(BenchError::new(format!("call {} or {} did not run", pair[0], pair[1]))),
            }
        })
        .collect()
}

/// What one run collects.
#[derive(Default)]
struct Samples {
    /// Call id → when the stream handed its `toolcall_end` to the engine.
    sealed: Mutex<HashMap<String, Instant>>,
    floor: Mutex<Vec<Duration>>,
    hops: Mutex<Vec<Duration>>,
}

impl Samples {
    fn sealed(&self, call_id: String) {
        if let Ok(mut sealed) = self.sealed.lock() {
            sealed.insert(call_id, Instant::now());
        }
    }

    fn hop(&self, sample: Duration) {
        if let Ok(mut hops) = self.hops.lock() {
            hops.push(sample);
        }
    }

    fn floor(&self, sample: Duration) {
        if let Ok(mut floor) = self.floor.lock() {
            floor.push(sample);
        }
    }

    /// (floor µs, admission µs).
    fn collect(&self, log: &CallLog) -> Result<(Vec<f64>, Vec<f64>), BenchError> {
        let poisoned = || BenchError::new("a sample list is poisoned");
        let floor = self.floor.lock().map_err(|_| poisoned())?;
        let sealed = self.sealed.lock().map_err(|_| poisoned())?;
        let mut admission = Vec::with_capacity(sealed.len());
        for (call_id, sealed_at) in sealed.iter() {
            let started = log
                .start_of(call_id)
                .ok_or_else(|| BenchError::new(format!("call {call_id} never started")))?;
            admission.push(started.saturating_duration_since(*sealed_at).as_secs_f64() * 1e6);
        }
        let floor = floor.iter().map(|sample| sample.as_secs_f64() * 1e6).collect();
        Ok((floor, admission))
    }
}

/// Streams one response of `calls` calls, measuring each admission (and one floor sample before each call when
/// `floor` is given).
async fn respond(
    engine: &Engine,
    store: &Arc<InstrumentedStore>,
    session: &headstart::SessionId,
    request: u32,
    calls: usize,
    floor: Option<&Arc<Floor>>,
    samples: &Arc<Samples>,
) -> Result<(), BenchError> {
    let floor_failure: Arc<Mutex<Option<BenchError>>> = Arc::default();
    let stream = {
        let store = Arc::clone(store);
        let floor = floor.cloned();
        let samples = Arc::clone(samples);
        let floor_failure = Arc::clone(&floor_failure);
        async_stream::stream! {
            yield Ok::<_, ModelError>(DeltaEvent::Start { model: Some("bench".to_owned()), response_id: None });
            for call in 0..calls {
                let text = 2 * call;
                let index = text + 1;
                store.layer().wait_idle().await;
                if let Some(floor) = &floor {
                    match floor.sample().await {
                        Ok(sample) => samples.floor(sample),
                        Err(error) => {
                            if let Ok(mut slot) = floor_failure.lock() {
                                slot.get_or_insert(error);
                            }
                        }
                    }
                    let started = Instant::now();
                    if tokio::task::spawn_blocking(Instant::now).await.is_ok() {
                        samples.hop(started.elapsed());
                    }
                    store.layer().wait_idle().await;
                }
                yield Ok(DeltaEvent::TextStart { index: text });
                for word in ["Reading ", "the ", "file."] {
                    yield Ok(DeltaEvent::TextDelta { index: text, delta: word.to_owned() });
                }
                yield Ok(DeltaEvent::TextEnd { index: text });
                let id = format!("r{request}-c{call}");
                yield Ok(DeltaEvent::ToolcallStart {
                    index,
                    id: id.clone(),
                    name: "probe".to_owned(),
                    early: false,
                    provider_async: false,
                });
                for piece in [r#"{"path": "#, r#""src/lib.rs", "#, r#""line": 42}"#] {
                    yield Ok(DeltaEvent::ToolcallDelta { index, delta: piece.to_owned() });
                }
                // Recorded in the very poll that hands the event to the engine.
                samples.sealed(id);
                yield Ok(DeltaEvent::ToolcallEnd { index, arguments: None });
            }
            store.layer().wait_idle().await;
            yield Ok(DeltaEvent::Done { stop_reason: DoneReason::ToolUse, usage: Usage::default() });
        }
    };
    let mut events = engine.wrap(session, request, stream, CancellationToken::new());
    let mut outcome = None;
    let mut failed = Vec::new();
    while let Some(event) = events.next().await {
        match event {
            AgentEvent::ResponseEnd { outcome: turn, .. } => outcome = Some(turn),
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                is_error: true,
                ..
            } => failed.push(tool_call_id),
            _ => {}
        }
    }
    if let Some(error) = floor_failure.lock().ok().and_then(|mut slot| slot.take()) {
        return Err(error);
    }
    match outcome {
        None => Err(BenchError::new("the response ended without turn_end")),
        Some(outcome) => match outcome.store_failure.or(outcome.error) {
            Some(failure) => Err(BenchError::new(format!("the response failed: {failure}"))),
            None if !failed.is_empty() => Err(BenchError::new(format!("calls failed: {failed:?}"))),
            None => Ok(()),
        },
    }
}
