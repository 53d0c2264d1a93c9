//! `headstart worker --store URL --id NAME (--provider P --model M [model and tool flags] | --scenario FILE)
//! [--queue NAME]… [--concurrency N] [--lease-ms N] [--poll-ms N] [--max-attempts N] [--retry-ms N] [--breaker N]
//! [--breaker-ms N] [--metrics ADDR]`: a worker of a fleet (contract §7.5, docs/fleet.md), claiming sessions of its
//! queues (default: `default`).
//!
//! When a session's model request fails on the provider's side (connection refused or reset, 5xx, 429 after the
//! retries, overloaded) it releases the session to its queue with a backoff (`retrying …` in its log) instead of
//! failing it, until `--max-attempts`; after `--breaker` such sessions in a row it stops claiming for a cool-down
//! (`breaker-open …`; the `headstart_worker_claiming` gauge is 0), then probes with one claim.
//!
//! With `--provider` it runs the agent `headstart run` runs, with the same flags and the same defaults
//! (`crate::agent`): the model, the built-in tools, the MCP servers, started once and shared by all its sessions
//! (`agent`). A session submitted with its own model or system prompt is asked with them. With `--scenario` it
//! runs a scenario's simulated model and tools on the wall clock, for tests and demos (`scenario`).
//!
//! It logs one line per event to standard error (`claimed`, `recovered`, `finished`, `lost`, `fenced-write`, each
//! followed by the session id; `queue-error` and `store-unreachable`, followed by what failed; `wake-ups-lost` and
//! `wake-ups-restored` when the queue's listener drops and comes back) and, when it stops
//! (SIGINT or SIGTERM: its sessions are released), prints its totals as one JSON object on standard output. While
//! its store cannot be reached it waits before trying again, 100 ms doubling up to 30 s, and logs one
//! `store-unreachable … retrying in N s` line per wait. With `--metrics ADDR` it serves its metrics as Prometheus
//! text on `http://ADDR/metrics` and logs `metrics http://ADDR/metrics` with the address bound (port 0: a free
//! one) before it claims anything.

mod agent;
mod scenario;

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::ArgGroup;
use headstart::store::QueueName;
use headstart_fleet::{Backoff, BreakerConfig, SessionSetup, Worker, WorkerConfig, WorkerEvent, WorkerStats};
use headstart_sim::crash_at::CrashAt;
use headstart_sim::Scenario;
use serde_json::Value;

use crate::agent::ModelArgs;
use crate::failure::{failed, Failure};
use crate::store_url::{Access, StoreUrl};
use scenario::ScenarioSetup;

/// The agent a worker or a Restate deployment runs: exactly one of `--provider` (with `--model` and `run`'s model
/// and tool flags) and `--scenario`.
#[derive(clap::Args)]
#[command(
    group(ArgGroup::new("agent").required(true).args(["provider", "scenario"])),
    mut_arg("provider", |arg| arg.required(false).requires("model")),
    mut_arg("model", |arg| arg.required(false).requires("provider")),
)]
pub(crate) struct AgentChoice {
    /// Run every session on this scenario's simulated model and tools, for tests and demos, instead of a real model
    /// (`--provider`); none of the model and tool flags apply then, e.g. `--scenario agent.json`.
    #[arg(long, value_name = "FILE", conflicts_with = "ModelArgs")]
    scenario: Option<PathBuf>,
    #[command(flatten)]
    model: ModelArgs,
    /// With --scenario: each call's body appends one line (the worker's name; a deployment's address) to
    /// DIR/<session id>/<call id> when it begins.
    // Not `requires = "scenario"`: clap waives a requirement that conflicts with an argument given, as --scenario
    // does with every model flag.
    #[arg(long, conflicts_with = "ModelArgs")]
    touch_dir: Option<PathBuf>,
}

impl AgentChoice {
    /// The scenario of `--scenario FILE`, loaded; without one, the model flags' endpoint checked (its key read). Done
    /// before the runtime, the store and the MCP servers start, so bad flags are refused at once.
    pub(crate) fn load_scenario(&self) -> Result<Option<Scenario>, Failure> {
        match &self.scenario {
            Some(path) => Scenario::load(path)
                .map(Some)
                .map_err(|error| Failure::Usage(error.to_string())),
            None => self.model.endpoint().map(|_| None),
        }
    }

    /// Each session's engine and model: the scenario's simulated ones (with `--touch-dir`, every body appending
    /// `touch_line` to its call's file), or the model flags' agent, its MCP servers started once.
    pub(crate) async fn session_setup(
        &self,
        store: &StoreUrl,
        scenario: Option<Scenario>,
        touch_line: &str,
    ) -> Result<Arc<dyn SessionSetup>, Failure> {
        Ok(match scenario {
            Some(scenario) => Arc::new(ScenarioSetup::new(
                scenario,
                self.touch_dir.clone().map(|dir| (dir, touch_line.to_owned())),
                CrashAt::from_env().map_err(|error| Failure::Usage(error.to_string()))?,
            )),
            None => {
                // The file tools must not read a SQLite store's file (PostgreSQL keeps none where they could look).
                let transcript = match store {
                    StoreUrl::Sqlite(path) => Some(path.as_path()),
                    StoreUrl::Postgres(_) => None,
                };
                Arc::new(self.model.parts(transcript, None).await?)
            }
        })
    }
}

/// Arguments of `headstart worker`.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  headstart worker --store postgresql://agent@db/agents --id w1 --provider anthropic --model claude-sonnet-4-5
  headstart worker --store fleet.db --id w1 --provider openai-compatible --base-url http://127.0.0.1:8000/v1 \\
      --model qwen3 --workdir /srv/docs --mcp \"search=search-server --stdio\" --concurrency 16
  headstart worker --store fleet.db --id w1 --scenario agent.json")]
pub struct Args {
    /// The store: a PostgreSQL connection string (postgresql://… or host=… dbname=…), or a SQLite file shared by
    /// the workers of one machine. Taken from HEADSTART_STORE when not given, which keeps a password off the
    /// command line (any local user can read a process's arguments; prefer PGPASSWORD or ~/.pgpass), e.g.
    /// `--store postgresql://agent@db/agents`.
    #[arg(long, env = "HEADSTART_STORE", hide_env_values = true)]
    store: String,
    /// The worker's name in the queue (unique within the fleet).
    #[arg(long)]
    id: String,
    #[command(flatten)]
    agent: AgentChoice,
    /// The most sessions run at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// The lease, in milliseconds (renewed every third of it).
    #[arg(long, default_value_t = 10_000)]
    lease_ms: u64,
    /// How often to look for work, in milliseconds.
    #[arg(long, default_value_t = 250)]
    poll_ms: u64,
    /// A queue to claim sessions from (`submit --queue NAME`); give it once per queue, e.g. `--queue gpu --queue
    /// default`. At most 64 bytes of printable characters, no whitespace.
    #[arg(long = "queue", value_name = "NAME", default_value = QueueName::DEFAULT)]
    queues: Vec<QueueName>,
    /// How many times a session may stop on a provider outage before it fails (released with a backoff each time
    /// before); 1 fails it at the first.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    max_attempts: u32,
    /// The backoff of a session released for a provider outage, in milliseconds: this after its first outage,
    /// doubled after each further one, up to 60 s.
    #[arg(long, default_value_t = 2_000)]
    retry_ms: u64,
    /// Stop claiming after this many sessions in a row stopped on a provider outage (0: never).
    #[arg(long, default_value_t = 3)]
    breaker: u32,
    /// The first cool-down after the breaker opens, in milliseconds; doubled after each failed probe, up to 5 min.
    #[arg(long, default_value_t = 5_000)]
    breaker_ms: u64,
    /// Serve Prometheus metrics on http://ADDR/metrics, e.g. `--metrics 127.0.0.1:9464` (port 0: any free port;
    /// the address bound is logged).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
}

/// Runs the worker until SIGINT or SIGTERM; exit status 2 on bad arguments or a missing key (refused before
/// anything starts), 1 when it cannot start otherwise.
pub fn run(args: &Args) -> u8 {
    // Checked before the runtime, the store and the MCP servers: a worker that could answer nothing never claims.
    let scenario = match args.agent.load_scenario() {
        Ok(scenario) => scenario,
        Err(failure) => return failure.report("worker"),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return failed(format!("cannot start a runtime: {error}")).report("worker"),
    };
    match runtime.block_on(work(args, scenario)) {
        Ok(stats) => {
            println!("{}", stats_json(&stats));
            0
        }
        Err(failure) => failure.report("worker"),
    }
}

/// Sets the worker up (its agent first: a bad MCP flag is refused before the store is touched) and runs it.
async fn work(args: &Args, scenario: Option<Scenario>) -> Result<WorkerStats, Failure> {
    let store = StoreUrl::parse(&args.store);
    let setup = args.agent.session_setup(&store, scenario, &args.id).await?;
    let defaults = WorkerConfig::new(args.id.clone());
    let config = WorkerConfig {
        concurrency: args.concurrency,
        lease: Duration::from_millis(args.lease_ms),
        poll_interval: Duration::from_millis(args.poll_ms),
        queues: args.queues.clone(),
        max_attempts: args.max_attempts,
        session_backoff: Backoff {
            first: Duration::from_millis(args.retry_ms),
            ..defaults.session_backoff
        },
        breaker: BreakerConfig {
            threshold: args.breaker,
            cool_down: Backoff {
                first: Duration::from_millis(args.breaker_ms),
                ..defaults.breaker.cool_down
            },
        },
        ..defaults
    };
    let queue = store.open(Access::Create).await.map_err(Failure::Failed)?;
    if let Some(addr) = args.metrics {
        let bound = crate::metrics_endpoint::serve(addr).await.map_err(Failure::Failed)?;
        log_line(&format!("metrics http://{bound}/metrics"));
    }
    let worker = Worker::new(queue, setup, config)
        .map_err(|error| Failure::Usage(error.to_string()))?
        .observe(log_event);
    let shutdown = headstart::CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    Ok(worker.run(shutdown).await)
}

/// Cancels `shutdown` on SIGINT or SIGTERM.
pub(crate) async fn stop_on_signal(shutdown: headstart::CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    shutdown.cancel();
}

fn log_event(event: &WorkerEvent) {
    log_line(&event.to_string());
}

pub(crate) fn log_line(line: &str) {
    // One write per line, so lines of concurrent sessions never interleave.
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

fn stats_json(stats: &WorkerStats) -> Value {
    serde_json::json!({
        "claimed": stats.claimed,
        "taken_over": stats.taken_over,
        "recovered_calls": stats.recovered_calls,
        "completed": stats.completed,
        "failed": stats.failed,
        "released": stats.released,
        "lost": stats.lost,
        "fenced_writes": stats.fenced_writes,
        "retried": stats.retried,
        "breaker_opened": stats.breaker_opened,
    })
}
