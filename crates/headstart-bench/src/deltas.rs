//! `headstart bench deltas`: the pure event-processing cost of the adapter, per delta.
//!
//! A response of N deltas is fed as fast as possible, from the same source, through
//! - **raw**: a bare loop that polls the stream and counts its events;
//! - **engine**: the full adapter ([`Engine::wrap`]) with a no-op consumer (it drops every agent event) and a
//!   real SQLite store in a temporary file;
//! - **floor** (table only): what any adapter that keeps the response and hands its consumer one owned event per
//!   delta pays, without an engine or a store: each delta is accumulated into a string and moved, as an
//!   [`AgentEvent`], through a queue to a loop that drops it, in batches, on one task. The engine's distance from
//!   this floor is its own cost; the floor's distance from the raw loop is the cost of the event contract.
//!
//! Two variants: `text` (one text block of N text deltas, `done(stop)`), and `args` (N tool-call argument deltas
//! spread over calls of `deltas_per_call` deltas each to an async no-op tool, `done(tool_use)`: every call is
//! committed at its `toolcall_end`, executed and its result written, so those per-call costs are amortized over
//! `deltas_per_call` deltas).
//!
//! The source creates each event when it is polled (each delta owns a freshly allocated token string, as a
//! provider parser's output does), so both contenders pay the same allocation, and the difference is what wrapping
//! costs. Each contender's time per delta is the median over `runs` runs; the response's fixed costs (the terminal
//! commit) are included, which is why `growth` (cost per delta at N = `n` over N = `n_small`) slightly below 1.0 is
//! expected.
//!
//! Runtime: current-thread, both contenders on the same runtime.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use futures::{Stream, StreamExt};
use headstart::core::{DoneReason, Usage};
use headstart::store::{SqliteOptions, SqliteStore};
use headstart::{AgentEvent, CancellationToken, DeltaEvent, Engine, ModelError, Toolbox, TranscriptStore};
use serde::Serialize;

use crate::overlap::WORDS;
use crate::tools::BenchTool;
use crate::{bench_dir, current_thread_runtime, durability_name, median, round3, BenchError, Durability};

/// Which deltas the response is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaVariant {
    /// N text deltas in one text block.
    Text,
    /// N tool-call argument deltas across calls of `deltas_per_call` deltas.
    Args,
}

impl DeltaVariant {
    /// The variant's name (`text`, `args`).
    pub fn name(self) -> &'static str {
        match self {
            DeltaVariant::Text => "text",
            DeltaVariant::Args => "args",
        }
    }
}

/// Options of the deltas benchmark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltasOptions {
    /// The number of deltas of the measured response.
    pub n: usize,
    /// The small response `growth` compares against.
    pub n_small: usize,
    /// Runs per contender at `n` (the small response runs ten times as often).
    pub runs: usize,
    /// Text or tool-call argument deltas.
    pub variant: DeltaVariant,
    /// Argument deltas per call (`args` variant).
    pub deltas_per_call: usize,
    /// Durability of the SQLite store.
    pub durability: Durability,
    /// Parent directory of the temporary database (default: the system's temporary directory).
    pub dir: Option<PathBuf>,
    /// The store's group commit ([`SqliteOptions::group_commit`]).
    pub group_commit: bool,
}

impl Default for DeltasOptions {
    fn default() -> Self {
        DeltasOptions {
            n: 100_000,
            n_small: 1_000,
            runs: 5,
            variant: DeltaVariant::Text,
            deltas_per_call: 100,
            durability: Durability::Normal,
            dir: None,
            group_commit: true,
        }
    }
}

/// The figures of the deltas benchmark; serializes to exactly `n`, `raw_ns_per_delta`, `engine_ns_per_delta`,
/// `ratio`, `growth`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeltasReport {
    /// Deltas in the measured response.
    pub n: usize,
    /// Bare loop: ns per delta at `n`.
    pub raw_ns_per_delta: f64,
    /// Full adapter: ns per delta at `n`.
    pub engine_ns_per_delta: f64,
    /// `engine_ns_per_delta / raw_ns_per_delta`.
    pub ratio: f64,
    /// Engine ns per delta at `n` divided by that at `n_small`.
    pub growth: f64,
    /// The small response.
    #[serde(skip)]
    pub n_small: usize,
    /// Bare loop at `n_small`.
    #[serde(skip)]
    pub raw_small_ns_per_delta: f64,
    /// Full adapter at `n_small`.
    #[serde(skip)]
    pub engine_small_ns_per_delta: f64,
    /// Floor (accumulate and move one owned event per delta, no engine, no store): ns per delta at `n`.
    #[serde(skip)]
    pub floor_ns_per_delta: f64,
    /// Floor at `n_small`.
    #[serde(skip)]
    pub floor_small_ns_per_delta: f64,
    /// The variant.
    #[serde(skip)]
    pub variant: DeltaVariant,
    /// Runs at `n`.
    #[serde(skip)]
    pub runs: usize,
    /// The store's durability.
    #[serde(skip)]
    pub durability: Durability,
}

impl DeltasReport {
    /// The human table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "deltas: {} deltas, no-op consumer, SQLite durability {}, median of {} runs",
            self.variant.name(),
            durability_name(self.durability),
            self.runs
        );
        let _ = writeln!(
            out,
            "  {:<12} {:>14} {:>16} {:>10} {:>15} {:>12}",
            "N", "raw ns/delta", "engine ns/delta", "ratio", "floor ns/delta", "floor ratio"
        );
        for (n, raw, engine, floor) in [
            (
                self.n_small,
                self.raw_small_ns_per_delta,
                self.engine_small_ns_per_delta,
                self.floor_small_ns_per_delta,
            ),
            (
                self.n,
                self.raw_ns_per_delta,
                self.engine_ns_per_delta,
                self.floor_ns_per_delta,
            ),
        ] {
            let over_raw = |ns: f64| if raw > 0.0 { ns / raw } else { 0.0 };
            let (ratio, floor_ratio) = (over_raw(engine), over_raw(floor));
            let _ = writeln!(
                out,
                "  {n:<12} {raw:>14.1} {engine:>16.1} {ratio:>10.2} {floor:>15.1} {floor_ratio:>12.2}"
            );
        }
        let _ = writeln!(
            out,
            "  growth (engine ns/delta at {} / at {}): {:.3}",
            self.n, self.n_small, self.growth
        );
        out
    }
}

/// The response's delta events, created one by one as the stream is polled.
fn source(
    variant: DeltaVariant,
    n: usize,
    deltas_per_call: usize,
) -> impl Stream<Item = Result<DeltaEvent, ModelError>> + Send + 'static {
    let start = DeltaEvent::Start {
        model: Some("bench".to_owned()),
        response_id: None,
    };
    let events: Box<dyn Iterator<Item = DeltaEvent> + Send> = match variant {
        DeltaVariant::Text => Box::new(
            std::iter::once(start)
                .chain(std::iter::once(DeltaEvent::TextStart { index: 0 }))
                .chain((0..n).map(|token| DeltaEvent::TextDelta {
                    index: 0,
                    delta: WORDS[token % WORDS.len()].to_owned(),
                }))
                .chain(std::iter::once(DeltaEvent::TextEnd { index: 0 }))
                .chain(std::iter::once(DeltaEvent::Done {
                    stop_reason: DoneReason::Stop,
                    usage: Usage::default(),
                })),
        ),
        DeltaVariant::Args => {
            let per_call = deltas_per_call.max(1);
            let calls = n.div_ceil(per_call);
            Box::new(
                std::iter::once(start)
                    .chain((0..calls).flat_map(move |index| {
                        let count = per_call.min(n - index * per_call);
                        std::iter::once(DeltaEvent::ToolcallStart {
                            index,
                            id: format!("call-{index}"),
                            name: "noop".to_owned(),
                            early: false,
                            provider_async: false,
                        })
                        .chain((0..count).map(move |piece| DeltaEvent::ToolcallDelta {
                            index,
                            delta: argument_piece(piece, count),
                        }))
                        .chain(std::iter::once(DeltaEvent::ToolcallEnd { index, arguments: None }))
                    }))
                    .chain(std::iter::once(DeltaEvent::Done {
                        stop_reason: DoneReason::ToolUse,
                        usage: Usage::default(),
                    })),
            )
        }
    };
    futures::stream::iter(events.map(Ok))
}

/// Piece `piece` of `count` of the argument text `{"data":"abcd…abcd"}`.
fn argument_piece(piece: usize, count: usize) -> String {
    match (piece, count) {
        (_, 1) => r#"{"data":"abcd"}"#.to_owned(),
        (0, _) => r#"{"data":""#.to_owned(),
        (last, _) if last + 1 == count => r#""}"#.to_owned(),
        _ => "abcd".to_owned(),
    }
}

/// The bare loop: polls the stream and counts its events.
async fn raw_once(variant: DeltaVariant, n: usize, deltas_per_call: usize) -> f64 {
    let started = Instant::now();
    let mut stream = std::pin::pin!(source(variant, n, deltas_per_call));
    let mut count = 0u64;
    while let Some(item) = stream.next().await {
        if item.is_ok() {
            count += 1;
        }
    }
    black_box(count);
    started.elapsed().as_secs_f64() * 1e9 / n.max(1) as f64
}

/// The full adapter with a no-op consumer, on a fresh session.
async fn engine_once(
    engine: &Engine,
    variant: DeltaVariant,
    n: usize,
    deltas_per_call: usize,
) -> Result<f64, BenchError> {
    let session = engine.store().create_session(0).await?;
    let started = Instant::now();
    let mut events = engine.wrap(
        &session,
        0,
        source(variant, n, deltas_per_call),
        CancellationToken::new(),
    );
    // The no-op consumer: looks at each event only to find the response's outcome, and drops it.
    let mut outcome = None;
    while let Some(event) = events.next().await {
        if let headstart::AgentEvent::ResponseEnd { outcome: ending, .. } = event {
            outcome = Some(ending);
        }
    }
    let elapsed = started.elapsed();
    let Some(outcome) = outcome else {
        return Err(BenchError::new("the response ended without turn_end"));
    };
    if let Some(failure) = outcome.store_failure.or(outcome.error) {
        return Err(BenchError::new(format!("the response failed: {failure}")));
    }
    Ok(elapsed.as_secs_f64() * 1e9 / n.max(1) as f64)
}

/// The floor: each delta accumulated and moved as an owned agent event through a queue, in batches, to a loop
/// that drops it; no engine, no store (see the module docs).
async fn floor_once(variant: DeltaVariant, n: usize, deltas_per_call: usize) -> f64 {
    /// Events handed over at once, as the engine does after a burst.
    const BATCH: usize = 64;
    let started = Instant::now();
    let mut stream = std::pin::pin!(source(variant, n, deltas_per_call));
    let mut kept = String::new();
    let mut outbox: VecDeque<AgentEvent> = VecDeque::new();
    let mut taken: VecDeque<AgentEvent> = VecDeque::new();
    let mut count = 0u64;
    while let Some(item) = stream.next().await {
        let Ok(event) = item else { continue };
        if let DeltaEvent::TextDelta { delta, .. } | DeltaEvent::ToolcallDelta { delta, .. } = &event {
            kept.push_str(delta);
        }
        outbox.push_back(AgentEvent::MessageUpdate {
            index: event.index().unwrap_or(0),
            delta: event,
        });
        if outbox.len() == BATCH {
            std::mem::swap(&mut outbox, &mut taken);
            while let Some(event) = taken.pop_front() {
                if matches!(event, AgentEvent::ResponseEnd { .. }) {
                    count += 1;
                }
            }
        }
    }
    black_box((kept.len(), outbox.len(), count));
    started.elapsed().as_secs_f64() * 1e9 / n.max(1) as f64
}

/// Medians of (raw, floor, engine) ns per delta over `runs` alternating runs.
async fn measure(
    engine: &Engine,
    options: &DeltasOptions,
    n: usize,
    runs: usize,
) -> Result<(f64, f64, f64), BenchError> {
    let (variant, per_call) = (options.variant, options.deltas_per_call);
    let mut raw = Vec::with_capacity(runs);
    let mut floor = Vec::with_capacity(runs);
    let mut wrapped = Vec::with_capacity(runs);
    for _ in 0..runs {
        raw.push(raw_once(variant, n, per_call).await);
        floor.push(floor_once(variant, n, per_call).await);
        wrapped.push(engine_once(engine, variant, n, per_call).await?);
    }
    Ok((median(&raw), median(&floor), median(&wrapped)))
}

/// Runs the benchmark.
pub fn run(options: &DeltasOptions) -> Result<DeltasReport, BenchError> {
    let dir = bench_dir(options.dir.as_deref())?;
    let runtime = current_thread_runtime()?;
    let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open(
        dir.path().join("deltas.db"),
        SqliteOptions {
            durability: options.durability,
            group_commit: options.group_commit,
            ..SqliteOptions::default()
        },
    )?);
    let toolbox = Toolbox::new()
        .with(BenchTool::new("noop", true, None))
        .map_err(|error| BenchError::new(error.to_string()))?;
    let engine = Engine::builder(store).toolbox(toolbox).build();
    let runs = options.runs.max(1);
    let n = options.n.max(1);
    let n_small = options.n_small.max(1);
    let ((raw_small, floor_small, engine_small), (raw, floor, engine_ns)) = runtime.block_on(async {
        // Warm-up: the first response pays for page allocation, prepared caches and the allocator's growth.
        measure(&engine, options, n_small, 2).await?;
        let small = measure(&engine, options, n_small, runs * 10).await?;
        let large = measure(&engine, options, n, runs).await?;
        Ok::<_, BenchError>((small, large))
    })?;
    Ok(DeltasReport {
        n,
        raw_ns_per_delta: round3(raw),
        engine_ns_per_delta: round3(engine_ns),
        ratio: round3(if raw > 0.0 { engine_ns / raw } else { 0.0 }),
        growth: round3(if engine_small > 0.0 {
            engine_ns / engine_small
        } else {
            0.0
        }),
        n_small,
        raw_small_ns_per_delta: round3(raw_small),
        engine_small_ns_per_delta: round3(engine_small),
        floor_ns_per_delta: round3(floor),
        floor_small_ns_per_delta: round3(floor_small),
        variant: options.variant,
        runs,
        durability: options.durability,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_pieces_join_into_a_json_object() {
        for count in [1, 2, 3, 10] {
            let text: String = (0..count).map(|piece| argument_piece(piece, count)).collect();
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert!(value.is_object(), "{text}");
        }
    }

    #[test]
    fn the_source_holds_n_deltas() {
        let count = |variant| {
            futures::executor::block_on(
                source(variant, 250, 100)
                    .filter(|event| {
                        let is_delta = matches!(
                            event,
                            Ok(DeltaEvent::TextDelta { .. } | DeltaEvent::ToolcallDelta { .. })
                        );
                        async move { is_delta }
                    })
                    .count(),
            )
        };
        assert_eq!(count(DeltaVariant::Text), 250);
        assert_eq!(count(DeltaVariant::Args), 250);
    }
}
