//! Each mode of `headstart bench`: its options, and how it measures and prints.

use std::path::PathBuf;
use std::sync::Arc;

use clap::ValueEnum;
use headstart::store::Durability;
use headstart::TranscriptStore;
use headstart_bench::admission::{self, AdmissionOptions};
use headstart_bench::deltas::{self, DeltaVariant, DeltasOptions};
use headstart_bench::fleet::FleetLoad;
use headstart_bench::headroom::{self, HeadroomOptions};
use headstart_bench::history::{self, HistoryOptions, HistoryStore};
use headstart_bench::overlap::{self, OverlapOptions};
use headstart_bench::provider_async::{self, ProviderAsyncOptions};
use headstart_bench::scheduler::{self, SchedulerOptions};
use headstart_bench::sessions::{self, SessionsOptions};
use headstart_bench::BenchError;
use headstart_providers::WireFormat;

use super::fleet::{self, FleetOptions};
use super::Output;
use crate::durability::DurabilityArg;
use crate::store_url::{Access, StoreUrl};

/// Where and how the modes that run on a SQLite file keep it.
#[derive(clap::Args)]
pub(super) struct SqliteArgs {
    /// Durability of the SQLite store (and, for admission, of the floor's database).
    #[arg(long, value_enum, default_value_t = DurabilityArg::Normal)]
    durability: DurabilityArg,
    /// Where the temporary SQLite files go (default: the system's temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Run the store without group commit (every write its own transaction), to compare.
    #[arg(long)]
    no_group_commit: bool,
}

impl SqliteArgs {
    fn durability(&self) -> Durability {
        self.durability.into()
    }
}

/// `headstart bench overlap`.
#[derive(clap::Args)]
pub(super) struct OverlapArgs {
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    sqlite: SqliteArgs,
    /// Runs per contender (figures are medians).
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

impl OverlapArgs {
    pub(super) fn run(&self) -> Result<(), BenchError> {
        let report = overlap::run(&OverlapOptions {
            runs: self.runs,
            durability: self.sqlite.durability(),
            dir: self.sqlite.dir.clone(),
            group_commit: !self.sqlite.no_group_commit,
            ..OverlapOptions::default()
        })?;
        self.output.print(&report, report.table())
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum VariantArg {
    Text,
    Args,
}

/// `headstart bench deltas`.
#[derive(clap::Args)]
pub(super) struct DeltasArgs {
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    sqlite: SqliteArgs,
    /// Runs per contender (figures are medians).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Deltas in the measured response.
    #[arg(long, default_value_t = 100_000)]
    n: usize,
    /// Deltas in the small response `growth` compares against.
    #[arg(long, default_value_t = 1_000)]
    n_small: usize,
    /// Text deltas, or tool-call argument deltas across many calls.
    #[arg(long, value_enum, default_value_t = VariantArg::Text)]
    variant: VariantArg,
    /// (args variant) argument deltas per call.
    #[arg(long, default_value_t = 100)]
    deltas_per_call: usize,
}

impl DeltasArgs {
    pub(super) fn run(&self) -> Result<(), BenchError> {
        let report = deltas::run(&DeltasOptions {
            n: self.n,
            n_small: self.n_small,
            runs: self.runs,
            variant: match self.variant {
                VariantArg::Text => DeltaVariant::Text,
                VariantArg::Args => DeltaVariant::Args,
            },
            deltas_per_call: self.deltas_per_call,
            durability: self.sqlite.durability(),
            dir: self.sqlite.dir.clone(),
            group_commit: !self.sqlite.no_group_commit,
        })?;
        self.output.print(&report, report.table())
    }
}

/// `headstart bench admission`.
#[derive(clap::Args)]
pub(super) struct AdmissionArgs {
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    sqlite: SqliteArgs,
    /// Admissions measured (and floor samples).
    #[arg(long, default_value_t = 200)]
    calls: usize,
}

impl AdmissionArgs {
    pub(super) fn run(&self) -> Result<(), BenchError> {
        let report = admission::run(&AdmissionOptions {
            calls: self.calls,
            durability: self.sqlite.durability(),
            dir: self.sqlite.dir.clone(),
            group_commit: !self.sqlite.no_group_commit,
            ..AdmissionOptions::default()
        })?;
        self.output.print(&report, report.table())
    }
}

/// `headstart bench sessions`.
#[derive(clap::Args)]
pub(crate) struct SessionsArgs {
    #[command(flatten)]
    output: Output,
    #[command(flatten)]
    sqlite: SqliteArgs,
    /// Number of concurrent sessions (default 10000; with --store, sessions per run, default 500).
    #[arg(long)]
    sessions: Option<usize>,
    /// Measure a fleet instead: worker processes on this store (a PostgreSQL URL, next to one worker on a SQLite
    /// file; or a SQLite file), for each count of `--workers`, CPU-only and under `--model-ms`/`--tool-ms`.
    #[arg(long)]
    store: Option<String>,
    /// Milliseconds between two deltas.
    #[arg(long, default_value_t = 10)]
    token_ms: u64,
    /// Milliseconds each tool call takes (default 20; with --store, 100).
    #[arg(long)]
    tool_ms: Option<u64>,
    /// With --store: milliseconds each simulated model response streams (default 200).
    #[arg(long)]
    model_ms: Option<u64>,
    /// With --store: the sessions each worker process runs at once (default 16).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Runtime worker threads (default: one per core); with --store, worker process counts: a list (`1,2,4`), or
    /// one count N for 1, 2, 4, … up to N (default 4).
    #[arg(long, value_delimiter = ',')]
    workers: Vec<usize>,
    /// With --store: run each count of `--workers` as that many `headstart restate serve` deployments too, behind a
    /// Restate server the benchmark starts on loopback (its binary from RESTATE_SERVER, else target/restate).
    #[arg(long, requires = "store")]
    restate: bool,
}

impl SessionsArgs {
    pub(super) fn run(&self) -> Result<(), BenchError> {
        if let Some(options) = self.fleet_options()? {
            let report = fleet::run(&options).map_err(BenchError::new)?;
            return self.output.print(&report, report.table());
        }
        let workers = match self.workers.as_slice() {
            [] => None,
            [threads] => Some(*threads),
            _ => return Err(BenchError::new("--workers takes one count without --store")),
        };
        let report = sessions::run(&SessionsOptions {
            sessions: self.sessions.unwrap_or(10_000),
            token_ms: self.token_ms,
            tool_ms: self.tool_ms.unwrap_or(20),
            durability: self.sqlite.durability(),
            dir: self.sqlite.dir.clone(),
            group_commit: !self.sqlite.no_group_commit,
            workers,
        })?;
        self.output.print(&report, report.table())
    }

    /// The fleet measurement `--store` asks for; `None` without it.
    pub(crate) fn fleet_options(&self) -> Result<Option<FleetOptions>, BenchError> {
        let Some(url) = self.store.clone() else {
            return Ok(None);
        };
        let restate = if self.restate { Some(restate_server()?) } else { None };
        Ok(Some(FleetOptions {
            url,
            workers: if self.workers.is_empty() {
                vec![4]
            } else {
                self.workers.clone()
            },
            sessions: self.sessions.unwrap_or(500),
            concurrency: self.concurrency.unwrap_or(16),
            load: FleetLoad {
                model_ms: self.model_ms.unwrap_or(200),
                tool_ms: self.tool_ms.unwrap_or(100),
            },
            restate,
        }))
    }
}

/// The `restate-server` binary of `bench sessions --restate`.
#[cfg(feature = "restate")]
fn restate_server() -> Result<std::path::PathBuf, BenchError> {
    let here = std::env::current_dir().map_err(|error| BenchError::new(error.to_string()))?;
    headstart_restate::local::find_server(&here).map_err(BenchError::new)
}

#[cfg(not(feature = "restate"))]
fn restate_server() -> Result<std::path::PathBuf, BenchError> {
    Err(BenchError::new(
        "--restate needs the `restate` feature of headstart-cli (on by default)",
    ))
}

/// `headstart bench scheduler`.
#[derive(clap::Args)]
pub(super) struct SchedulerArgs {
    #[command(flatten)]
    output: Output,
    /// Calls in the response.
    #[arg(long, default_value_t = 100_000)]
    calls: usize,
    /// Distinct conflict keys.
    #[arg(long, default_value_t = 8)]
    keys: usize,
}

impl SchedulerArgs {
    pub(super) fn run(&self) -> Result<(), BenchError> {
        let report = scheduler::run(&SchedulerOptions {
            calls: self.calls,
            keys: self.keys,
            ..SchedulerOptions::default()
        });
        self.output.print(&report, report.table())
    }
}

/// `headstart bench headroom`.
#[derive(clap::Args)]
pub(super) struct HeadroomArgs {
    #[command(flatten)]
    output: Output,
    /// The recordings (`run --record` files, raw SSE bodies or YAML cassettes), e.g. `headstart bench headroom
    /// run.sse`.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// The wire format of files that do not name theirs (default: told from the events), e.g.
    /// `--format openai-chat`.
    #[arg(long, value_parser = parse_format)]
    format: Option<WireFormat>,
}

impl HeadroomArgs {
    pub(super) fn run(&self) -> Result<(), BenchError> {
        let report = headroom::run(&HeadroomOptions {
            files: self.files.clone(),
            format: self.format,
        })?;
        self.output.print(&report, report.table())
    }
}

fn parse_format(name: &str) -> Result<WireFormat, String> {
    name.parse()
        .map_err(|error: headstart_providers::ProviderError| error.to_string())
}

/// `headstart bench history`.
#[derive(clap::Args)]
pub(super) struct HistoryArgs {
    #[command(flatten)]
    output: Output,
    /// Where the temporary SQLite files go (default: the system's temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Requests in the session.
    #[arg(long, default_value_t = 1_000)]
    rounds: usize,
    /// Text bytes of each response.
    #[arg(long, default_value_t = 2_500)]
    bytes: usize,
    /// Bytes of each call's result.
    #[arg(long, default_value_t = 600)]
    result_bytes: usize,
    /// Steps at each end of the session whose gaps are compared.
    #[arg(long, default_value_t = 50)]
    window: usize,
    /// Compare every request's context with a fresh read of the whole log, and fail on a difference (a check: its
    /// timings include the reads).
    #[arg(long)]
    verify: bool,
    /// One more store to run the session on, next to the two SQLite files (one session is left in it), e.g. a
    /// PostgreSQL URL.
    #[arg(long)]
    store: Option<String>,
    /// Also build each request's body in this wire format, from the items kept from the request before (as
    /// `--provider` models do) and whole, and print both times, e.g. `--wire openai-chat`.
    #[arg(long, value_parser = parse_format)]
    wire: Option<WireFormat>,
}

impl HistoryArgs {
    pub(super) fn run(&self) -> Result<(), BenchError> {
        let report = history::run(
            &HistoryOptions {
                rounds: self.rounds,
                bytes: self.bytes,
                result_bytes: self.result_bytes,
                window: self.window,
                verify: self.verify,
                wire: self.wire,
                dir: self.dir.clone(),
            },
            self.store.as_deref().map(history_store).into_iter().collect(),
        )?;
        self.output.print(&report, report.table())
    }
}

/// `bench history --store URL`: the store the session also runs on.
fn history_store(url: &str) -> HistoryStore {
    let store = StoreUrl::parse(url);
    let name = match store {
        StoreUrl::Postgres(_) => "postgresql",
        StoreUrl::Sqlite(_) => "sqlite (--store)",
    };
    HistoryStore {
        name: name.to_owned(),
        open: Box::new(move || {
            Box::pin(async move {
                let queue = store.open(Access::Create).await.map_err(BenchError::new)?;
                Ok(queue as Arc<dyn TranscriptStore>)
            })
        }),
    }
}

/// `headstart bench provider-async`.
#[derive(clap::Args)]
pub(super) struct ProviderAsyncArgs {
    #[command(flatten)]
    output: Output,
    /// Runs per contender (figures are medians and 95th percentiles).
    #[arg(long, default_value_t = ProviderAsyncOptions::default().runs)]
    runs: usize,
    /// The replay server's pause before each SSE event, in milliseconds.
    #[arg(long, default_value_t = ProviderAsyncOptions::default().pace_ms)]
    pace_ms: u64,
    /// Commentary deltas after the calls, and in the second response.
    #[arg(long, default_value_t = ProviderAsyncOptions::default().commentary)]
    commentary: usize,
    /// How long the slow call (`research`) works, in milliseconds.
    #[arg(long, default_value_t = ProviderAsyncOptions::default().slow_ms)]
    slow_ms: u64,
    /// How long the quick call (`lookup`) works, in milliseconds.
    #[arg(long, default_value_t = ProviderAsyncOptions::default().quick_ms)]
    quick_ms: u64,
}

impl ProviderAsyncArgs {
    pub(super) fn run(&self) -> Result<(), BenchError> {
        let report = provider_async::run(&ProviderAsyncOptions {
            runs: self.runs,
            pace_ms: self.pace_ms,
            commentary: self.commentary,
            slow_ms: self.slow_ms,
            quick_ms: self.quick_ms,
        })?;
        self.output.print(&report, report.table())
    }
}
