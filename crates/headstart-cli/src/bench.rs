//! `headstart bench <overlap|deltas|admission|sessions|scheduler|headroom|history> [--json] [options]`: the measurements of issue 6
//! (docs/performance.md explains each figure). The measuring code lives in the `headstart-bench` crate.

use std::path::PathBuf;
use std::sync::Arc;

use clap::ValueEnum;
use headstart::TranscriptStore;
use headstart_bench::admission::{self, AdmissionOptions};
use headstart_bench::deltas::{self, DeltaVariant, DeltasOptions};
use headstart_bench::fleet::FleetLoad;
use headstart_bench::headroom::{self, HeadroomOptions};
use headstart_bench::history::{self, HistoryOptions, HistoryStore};
use headstart_bench::overlap::{self, OverlapOptions};
use headstart_bench::scheduler::{self, SchedulerOptions};
use headstart_bench::sessions::{self, SessionsOptions};
use headstart_bench::BenchError;
use headstart_providers::WireFormat;
use serde::Serialize;

use crate::bench_fleet::{self, FleetOptions};
use crate::durability::DurabilityArg;
use crate::store_url::{Access, StoreUrl};

/// Arguments of `headstart bench`.
#[derive(clap::Args)]
pub struct Args {
    /// What to measure: overlap (early execution vs end-of-stream batching vs the lower bound, wall clock),
    /// deltas (per-delta cost of the adapter vs a bare loop), admission (sealed toolcall_end -> execute, vs a bare
    /// SQLite commit, and the sequential gap), sessions (many concurrent sessions: throughput and peak memory),
    /// scheduler (the pure scheduler's cost per call on one response of many keyed calls), headroom (recordings
    /// replayed through each Chat Completions sealing rule: when each call is sealed and how long before the
    /// stream's end it could start), history (one long session: the step from a response's last write to the next
    /// request, at the session's start and at its end).
    #[arg(value_enum)]
    what: What,
    /// headroom: the recordings (`run --record` files, raw SSE bodies or YAML cassettes), e.g.
    /// `headstart bench headroom run.sse`.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// headroom: the wire format of files that do not name theirs (default: told from the events), e.g.
    /// `--format openai-chat`.
    #[arg(long, value_parser = parse_format)]
    format: Option<WireFormat>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// overlap, deltas: runs per contender (figures are medians).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// sessions: number of concurrent sessions (default 10000; with --store, sessions per run, default 500).
    #[arg(long)]
    sessions: Option<usize>,
    /// sessions: measure a fleet instead: worker processes on this store (a PostgreSQL URL, next to one worker on
    /// a SQLite file; or a SQLite file), for each count of `--workers`, CPU-only and under `--model-ms`/`--tool-ms`.
    /// history: one more store to run the session on (one session is left in it), e.g. a PostgreSQL URL.
    #[arg(long)]
    store: Option<String>,
    /// Durability of the SQLite store (and, for admission, of the floor's database).
    #[arg(long, value_enum, default_value_t = DurabilityArg::Normal)]
    durability: DurabilityArg,
    /// Where the temporary SQLite files go (default: the system's temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Run the store without group commit (every write its own transaction), to compare.
    #[arg(long)]
    no_group_commit: bool,
    /// deltas: deltas in the measured response.
    #[arg(long, default_value_t = 100_000)]
    n: usize,
    /// deltas: deltas in the small response `growth` compares against.
    #[arg(long, default_value_t = 1_000)]
    n_small: usize,
    /// deltas: text deltas, or tool-call argument deltas across many calls.
    #[arg(long, value_enum, default_value_t = VariantArg::Text)]
    variant: VariantArg,
    /// deltas (args variant): argument deltas per call.
    #[arg(long, default_value_t = 100)]
    deltas_per_call: usize,
    /// admission: number of admissions measured (and of floor samples); scheduler: calls in the response
    /// (default 100000).
    #[arg(long)]
    calls: Option<usize>,
    /// scheduler: distinct conflict keys.
    #[arg(long, default_value_t = 8)]
    keys: usize,
    /// sessions: milliseconds between two deltas.
    #[arg(long, default_value_t = 10)]
    token_ms: u64,
    /// sessions: milliseconds each tool call takes (default 20; with --store, 100).
    #[arg(long)]
    tool_ms: Option<u64>,
    /// sessions with --store: milliseconds each simulated model response streams (default 200).
    #[arg(long)]
    model_ms: Option<u64>,
    /// sessions with --store: the sessions each worker process runs at once (default 16).
    #[arg(long)]
    concurrency: Option<usize>,
    /// sessions: runtime worker threads (default: one per core); with --store, worker process counts: a list
    /// (`1,2,4`), or one count N for 1, 2, 4, … up to N (default 4).
    #[arg(long, value_delimiter = ',')]
    workers: Vec<usize>,
    /// history: requests in the session.
    #[arg(long, default_value_t = 1_000)]
    rounds: usize,
    /// history: text bytes of each response.
    #[arg(long, default_value_t = 2_500)]
    bytes: usize,
    /// history: bytes of each call's result.
    #[arg(long, default_value_t = 600)]
    result_bytes: usize,
    /// history: steps at each end of the session whose gaps are compared.
    #[arg(long, default_value_t = 50)]
    window: usize,
    /// history: compare every request's context with a fresh read of the whole log, and fail on a difference
    /// (a check: its timings include the reads).
    #[arg(long)]
    verify: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum What {
    Overlap,
    Deltas,
    Admission,
    Sessions,
    Scheduler,
    Headroom,
    History,
}

#[derive(Clone, Copy, ValueEnum)]
enum VariantArg {
    Text,
    Args,
}

/// Runs the benchmark; exit status 0 when it ran, 2 when it could not run.
pub fn run(args: &Args) -> u8 {
    let durability = args.durability.into();
    let printed = match args.what {
        What::Overlap => overlap::run(&OverlapOptions {
            runs: args.runs,
            durability,
            dir: args.dir.clone(),
            group_commit: !args.no_group_commit,
            ..OverlapOptions::default()
        })
        .and_then(|report| print(args.json, &report, report.table())),
        What::Deltas => deltas::run(&DeltasOptions {
            n: args.n,
            n_small: args.n_small,
            runs: args.runs,
            variant: match args.variant {
                VariantArg::Text => DeltaVariant::Text,
                VariantArg::Args => DeltaVariant::Args,
            },
            deltas_per_call: args.deltas_per_call,
            durability,
            dir: args.dir.clone(),
            group_commit: !args.no_group_commit,
        })
        .and_then(|report| print(args.json, &report, report.table())),
        What::Admission => admission::run(&AdmissionOptions {
            calls: args.calls.unwrap_or(200),
            durability,
            dir: args.dir.clone(),
            group_commit: !args.no_group_commit,
            ..AdmissionOptions::default()
        })
        .and_then(|report| print(args.json, &report, report.table())),
        What::Sessions => match fleet_options(args) {
            Some(options) => bench_fleet::run(&options)
                .map_err(BenchError::new)
                .and_then(|report| print(args.json, &report, report.table())),
            None => in_process_workers(&args.workers).and_then(|workers| {
                sessions::run(&SessionsOptions {
                    sessions: args.sessions.unwrap_or(10_000),
                    token_ms: args.token_ms,
                    tool_ms: args.tool_ms.unwrap_or(20),
                    durability,
                    dir: args.dir.clone(),
                    group_commit: !args.no_group_commit,
                    workers,
                })
                .and_then(|report| print(args.json, &report, report.table()))
            }),
        },
        What::Scheduler => {
            let report = scheduler::run(&SchedulerOptions {
                calls: args.calls.unwrap_or(100_000),
                keys: args.keys,
                ..SchedulerOptions::default()
            });
            print(args.json, &report, report.table())
        }
        What::History => history::run(
            &HistoryOptions {
                rounds: args.rounds,
                bytes: args.bytes,
                result_bytes: args.result_bytes,
                window: args.window,
                verify: args.verify,
                dir: args.dir.clone(),
            },
            history_stores(args.store.as_deref()),
        )
        .and_then(|report| print(args.json, &report, report.table())),
        What::Headroom => headroom::run(&HeadroomOptions {
            files: args.files.clone(),
            format: args.format,
        })
        .and_then(|report| print(args.json, &report, report.table())),
    };
    match printed {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("headstart bench: {error}");
            2
        }
    }
}

/// The fleet measurement `bench sessions --store` asks for; `None` without `--store`.
pub(crate) fn fleet_options(args: &Args) -> Option<FleetOptions> {
    let url = args.store.clone()?;
    Some(FleetOptions {
        url,
        workers: if args.workers.is_empty() {
            vec![4]
        } else {
            args.workers.clone()
        },
        sessions: args.sessions.unwrap_or(500),
        concurrency: args.concurrency.unwrap_or(16),
        load: FleetLoad {
            model_ms: args.model_ms.unwrap_or(200),
            tool_ms: args.tool_ms.unwrap_or(100),
        },
    })
}

/// `bench history --store URL`: the store the session also runs on, next to the two SQLite rows.
fn history_stores(url: Option<&str>) -> Vec<HistoryStore> {
    let Some(url) = url else {
        return Vec::new();
    };
    let store = StoreUrl::parse(url);
    let name = match store {
        StoreUrl::Postgres(_) => "postgresql",
        StoreUrl::Sqlite(_) => "sqlite (--store)",
    };
    vec![HistoryStore {
        name: name.to_owned(),
        open: Box::new(move || {
            Box::pin(async move {
                let queue = store.open(Access::Create).await.map_err(BenchError::new)?;
                Ok(queue as Arc<dyn TranscriptStore>)
            })
        }),
    }]
}

/// The in-process mode's `--workers`: one count of runtime threads at most.
fn in_process_workers(workers: &[usize]) -> Result<Option<usize>, BenchError> {
    match workers {
        [] => Ok(None),
        [threads] => Ok(Some(*threads)),
        _ => Err(BenchError::new("--workers takes one count without --store")),
    }
}

fn print(json: bool, report: &impl Serialize, table: String) -> Result<(), BenchError> {
    if json {
        let text = serde_json::to_string(report).map_err(|error| BenchError::new(error.to_string()))?;
        println!("{text}");
    } else {
        print!("{table}");
    }
    Ok(())
}

fn parse_format(name: &str) -> Result<WireFormat, String> {
    name.parse()
        .map_err(|error: headstart_providers::ProviderError| error.to_string())
}
