//! `headstart worker --store URL --id NAME --scenario FILE [--concurrency N] [--lease-ms N] [--poll-ms N]
//! [--touch-dir DIR] [--metrics ADDR]`: a worker of a fleet (contract §7.5, docs/fleet.md) running the simulated model and tools of
//! a scenario on the wall clock, as `replay --clock wall` does.
//!
//! It logs one line per event to standard error (`claimed`, `recovered`, `finished`, `lost`, `fenced-write`, each
//! followed by the session id; `queue-error` and `store-unreachable`, followed by what failed) and, when it stops
//! (SIGINT or SIGTERM: its sessions are released), prints its totals as one JSON object on standard output. While
//! its store cannot be reached it waits before trying again, 100 ms doubling up to 30 s, and logs one
//! `store-unreachable … retrying in N s` line per wait. With `--metrics ADDR` it serves its metrics as Prometheus
//! text on `http://ADDR/metrics` and logs `metrics http://ADDR/metrics` with the address bound (port 0: a free
//! one) before it claims anything.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use headstart::core::model::Message;
use headstart::layer::{Around, ToolMiddleware};
use headstart::{
    Arguments, DeltaStream, Engine, EngineBuilder, Hooks, Model, ModelError, ModelRequest, SessionId, Tool,
    ToolContext, ToolError, ToolResult, Toolbox, TranscriptStore,
};
use headstart_fleet::{SessionSetup, Worker, WorkerConfig, WorkerEvent, WorkerStats};
use headstart_sim::sim_model::SimModel;
use headstart_sim::sim_tools::{SimHooks, SimTool};
use headstart_sim::Scenario;
use serde_json::Value;

use crate::store_url::{Access, StoreUrl};

/// Arguments of `headstart worker`.
#[derive(clap::Args)]
pub struct Args {
    /// The store: a PostgreSQL connection string (postgresql://… or host=… dbname=…), or a SQLite file shared by
    /// the workers of one machine.
    #[arg(long)]
    store: String,
    /// The worker's name in the queue (unique within the fleet).
    #[arg(long)]
    id: String,
    /// The scenario whose simulated model and tools run every session (required: a real application plugs its
    /// own model and tools into the `headstart-fleet` library).
    #[arg(long)]
    scenario: PathBuf,
    /// The most sessions run at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// The lease, in milliseconds (renewed every third of it).
    #[arg(long, default_value_t = 10_000)]
    lease_ms: u64,
    /// How often to look for work, in milliseconds.
    #[arg(long, default_value_t = 250)]
    poll_ms: u64,
    /// Each call's body appends one line to DIR/<session id>/<call id> when it begins.
    #[arg(long)]
    touch_dir: Option<PathBuf>,
    /// Serve Prometheus metrics on http://ADDR/metrics, e.g. `--metrics 127.0.0.1:9464` (port 0: any free port;
    /// the address bound is logged).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
}

/// Runs the worker until SIGINT or SIGTERM; exit status 1 when it cannot start, 2 on bad arguments.
pub fn run(args: &Args) -> u8 {
    let scenario = match Scenario::load(&args.scenario) {
        Ok(scenario) => scenario,
        Err(error) => {
            eprintln!("headstart worker: {error}");
            return 2;
        }
    };
    let config = WorkerConfig {
        concurrency: args.concurrency,
        lease: Duration::from_millis(args.lease_ms),
        poll_interval: Duration::from_millis(args.poll_ms),
        ..WorkerConfig::new(args.id.clone())
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("headstart worker: cannot start a runtime: {error}");
            return 1;
        }
    };
    let stats = runtime.block_on(async {
        let queue = StoreUrl::parse(&args.store).open(Access::Create).await?;
        if let Some(addr) = args.metrics {
            let bound = crate::metrics_endpoint::serve(addr).await?;
            log_line(&format!("metrics http://{bound}/metrics"));
        }
        let setup = ScenarioSetup {
            model: Arc::new(ScenarioModel(SimModel::new(scenario.turns.clone()))),
            scenario,
            touch: args.touch_dir.clone().map(|dir| (dir, args.id.clone())),
        };
        let worker = Worker::new(queue, Arc::new(setup), config)
            .map_err(|error| error.to_string())?
            .observe(log_event);
        let shutdown = headstart::CancellationToken::new();
        tokio::spawn(stop_on_signal(shutdown.clone()));
        Ok::<WorkerStats, String>(worker.run(shutdown).await)
    });
    match stats {
        Ok(stats) => {
            println!("{}", stats_json(&stats));
            0
        }
        Err(error) => {
            eprintln!("headstart worker: {error}");
            1
        }
    }
}

/// Cancels `shutdown` on SIGINT or SIGTERM.
async fn stop_on_signal(shutdown: headstart::CancellationToken) {
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

fn log_line(line: &str) {
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
    })
}

/// A scenario's tools, hooks and configuration for every session; its model for every request.
struct ScenarioSetup {
    scenario: Scenario,
    model: Arc<dyn Model>,
    /// The touch directory and this worker's name (the line each touch appends).
    touch: Option<(PathBuf, String)>,
}

impl SessionSetup for ScenarioSetup {
    fn engine(&self, session: &SessionId, store: Arc<dyn TranscriptStore>) -> EngineBuilder {
        let mut toolbox = Toolbox::new();
        for spec in &self.scenario.tools {
            let tool = SimTool::new(spec.clone(), None);
            let registered = match &self.touch {
                Some((dir, worker)) => toolbox.register(Around::new(
                    Arc::new(tool),
                    Touch {
                        dir: dir.join(&session.0),
                        line: format!("{worker}\n"),
                    },
                )),
                None => toolbox.register(tool),
            };
            // Scenario loading already refused duplicate tool names, the only way registering fails.
            if let Err(error) = registered {
                eprintln!("headstart worker: {error}");
            }
        }
        Engine::builder(store)
            .toolbox(toolbox)
            .hooks(Hooks::new().with(SimHooks::new(self.scenario.hooks.clone())))
            .config(self.scenario.config.engine_config())
    }

    fn model(&self, _session: &SessionId) -> Arc<dyn Model> {
        Arc::clone(&self.model)
    }
}

/// The scenario's model, answering from the stored context: the response after the `n`th stored assistant
/// message is the scenario's turn `n`, so a session resumed after a takeover goes on where it stopped (a response
/// cut short by a crash counts as given).
struct ScenarioModel(SimModel);

#[async_trait]
impl Model for ScenarioModel {
    async fn stream(&self, mut request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let answered = request
            .context
            .iter()
            .filter(|message| matches!(message, Message::Assistant(_)))
            .count();
        request.request = u32::try_from(answered).unwrap_or(u32::MAX);
        self.0.stream(request).await
    }
}

/// Appends a line to `dir/<call id>` before the tool's body runs, so every execution of a call is visible (a
/// middleware of `headstart::layer`, so the tool keeps its name, schema and flags).
struct Touch {
    dir: PathBuf,
    line: String,
}

impl Touch {
    fn touch(&self, call_id: &str) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(call_id))?;
        file.write_all(self.line.as_bytes())
    }
}

#[async_trait]
impl ToolMiddleware for Touch {
    async fn execute(&self, next: &dyn Tool, arguments: Arguments, context: ToolContext) -> ToolResult {
        self.touch(&context.call_id)
            .map_err(|error| ToolError::new(format!("touch failed: {error}")))?;
        next.execute(arguments, context).await
    }
}
