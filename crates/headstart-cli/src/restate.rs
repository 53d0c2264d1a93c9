//! `headstart restate serve --addr ADDR --store URL (--provider P --model M [model and tool flags] | --scenario FILE)
//! [--register ADMIN_URL] [--concurrency N] [--metrics ADDR] [--rerun-idempotent]`, `headstart restate register --admin ADMIN_URL
//! DEPLOYMENT_URL` and `headstart restate balance --addr ADDR --to URL…`: a deployment of headstart on Restate
//! (docs/restate.md), its registration with a Restate server, and one URL in front of several deployments.
//!
//! A deployment serves the `Session` Virtual Object and the `Tools` service; it runs the agent `worker` runs, with
//! the same flags, and writes every session to the store (`inspect --store`, `serve`, `timeline` read it). Prompts
//! reach it through the server: `headstart submit --restate INGRESS_URL "prompt"`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use headstart::RecoveryPolicy;
use headstart_restate::{Balancer, Deployment, RestateClient};

use crate::failure::{failed, Failure};
use crate::store_url::{Access, StoreUrl};
use crate::worker::{log_line, stop_on_signal, AgentChoice};

/// Arguments of `headstart restate`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Serve a deployment: the `Session` object and the `Tools` service, on HTTP/2 for a Restate server.
    Serve(Box<ServeArgs>),
    /// Register a deployment with a Restate server (its admin API), replacing an earlier registration of its URL.
    Register(RegisterArgs),
    /// Serve one deployment URL in front of several deployments, spreading invocations over them (HTTP/2).
    Balance(BalanceArgs),
}

/// Arguments of `headstart restate serve`.
#[derive(clap::Args)]
#[command(after_help = "Examples:
  headstart restate serve --addr 127.0.0.1:9080 --store agents.db --provider anthropic --model claude-sonnet-4-5 \\
      --register http://127.0.0.1:9070
  headstart restate serve --addr 127.0.0.1:9081 --store postgresql://agent@db/agents --scenario agent.json")]
struct ServeArgs {
    /// The address to serve on (the Restate server connects to it).
    #[arg(long, default_value = "127.0.0.1:9080")]
    addr: SocketAddr,
    /// The store every session is written to: a SQLite file (one deployment), or a PostgreSQL connection string (any
    /// number of deployments). Taken from HEADSTART_STORE when not given, which keeps a password off the command
    /// line.
    #[arg(long, env = "HEADSTART_STORE", hide_env_values = true)]
    store: String,
    #[command(flatten)]
    agent: AgentChoice,
    /// Once serving, register `http://ADDR` with the Restate server whose admin API is here, e.g.
    /// `--register http://127.0.0.1:9070`.
    #[arg(long, value_name = "ADMIN_URL")]
    register: Option<String>,
    /// The turns this process runs at once; more wait for a slot (Restate sends a deployment every invocation it
    /// has).
    #[arg(long, default_value_t = headstart_restate::DEFAULT_TURN_LIMIT)]
    concurrency: usize,
    /// Serve Prometheus metrics on http://ADDR/metrics (the engine's and the deployment's: journal entries,
    /// seal→body), e.g. `--metrics 127.0.0.1:9464`; port 0 picks a free one.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// After a crash, run the calls of idempotent tools that a lost attempt left without a journaled end again
    /// (once per recovery), instead of giving them the interrupted error as every other call gets.
    #[arg(long)]
    rerun_idempotent: bool,
}

/// Arguments of `headstart restate balance`.
#[derive(clap::Args)]
#[command(after_help = "Example (register the balancer's URL, not the deployments'):
  headstart restate balance --addr 127.0.0.1:9080 --to http://127.0.0.1:9081 --to http://127.0.0.1:9082 \
      --register http://127.0.0.1:9070")]
struct BalanceArgs {
    /// The address to serve on: the one deployment URL the Restate server is given.
    #[arg(long, default_value = "127.0.0.1:9080")]
    addr: SocketAddr,
    /// A deployment behind the balancer, `http://HOST:PORT`; repeat for each.
    #[arg(long = "to", value_name = "DEPLOYMENT_URL", required = true)]
    to: Vec<String>,
    /// Once serving, register `http://ADDR` with the Restate server whose admin API is here.
    #[arg(long, value_name = "ADMIN_URL")]
    register: Option<String>,
    /// Milliseconds a deployment may take to answer a request's headers (a live one answers at once) before the
    /// balancer answers 502 and sets it aside for `--set-aside-ms`, so Restate's retry goes elsewhere.
    #[arg(long, default_value_t = 5_000)]
    answer_within_ms: u64,
    /// Milliseconds a deployment that failed to answer is left out of the picks.
    #[arg(long, default_value_t = 10_000)]
    set_aside_ms: u64,
}

/// Arguments of `headstart restate register`.
#[derive(clap::Args)]
struct RegisterArgs {
    /// The server's admin API, e.g. `http://127.0.0.1:9070`.
    #[arg(long, default_value = "http://127.0.0.1:9070")]
    admin: String,
    /// The deployment's URL as the server reaches it, e.g. `http://127.0.0.1:9080`.
    deployment: String,
}

/// Runs the subcommand; exit status 2 on bad arguments, 1 when it cannot start or register.
pub fn run(args: &Args) -> u8 {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return failed(format!("cannot start a runtime: {error}")).report("restate"),
    };
    let done = match &args.command {
        Command::Serve(serve) => match serve.agent.load_scenario() {
            Ok(scenario) => runtime.block_on(serve_deployment(serve, scenario)),
            Err(failure) => Err(failure),
        },
        Command::Balance(balance) => runtime.block_on(serve_balancer(balance)),
        Command::Register(register) => runtime.block_on(async {
            RestateClient::register(&register.admin, &register.deployment)
                .await
                .map_err(|error| failed(error.to_string()))
        }),
    };
    match done {
        Ok(()) => 0,
        Err(failure) => failure.report("restate"),
    }
}

/// Serves until SIGINT or SIGTERM.
async fn serve_deployment(args: &ServeArgs, scenario: Option<headstart_sim::Scenario>) -> Result<(), Failure> {
    let store_url = StoreUrl::parse(&args.store);
    let setup = args
        .agent
        .session_setup(&store_url, scenario, &args.addr.to_string())
        .await?;
    // Bound first: once the metrics line or the `serving` line is out, the server accepts connections.
    let listener = bind(args.addr).await?;
    if let Some(addr) = args.metrics {
        let bound = crate::metrics_endpoint::serve(addr).await.map_err(Failure::Failed)?;
        headstart_restate::metrics::describe();
        log_line(&format!("metrics http://{bound}/metrics"));
        // A deployment that knows the admin API also exports which calls Restate keeps retrying, and why.
        if let Some(admin) = args.register.clone() {
            tokio::spawn(headstart_restate::watch_failing_calls(admin));
        }
    }
    let store = store_url.open(Access::Create).await.map_err(Failure::Failed)?;
    let recovery = if args.rerun_idempotent {
        RecoveryPolicy::ReExecuteIdempotent
    } else {
        RecoveryPolicy::FailAll
    };
    let deployment = Arc::new(
        Deployment::new(store, setup)
            .with_turn_limit(args.concurrency)
            .with_recovery(recovery),
    );
    let server = tokio::spawn(headstart_restate::serve(deployment, listener));
    serve_until_signal(server, args.addr, args.register.as_deref(), "deployment").await
}

/// Serves the balancer until SIGINT or SIGTERM.
async fn serve_balancer(args: &BalanceArgs) -> Result<(), Failure> {
    let balancer = Balancer::new(&args.to)
        .map_err(|error| failed(error.to_string()))?
        .answer_within(Duration::from_millis(args.answer_within_ms.max(1)))
        .set_aside_for(Duration::from_millis(args.set_aside_ms));
    let listener = bind(args.addr).await?;
    let server = tokio::spawn(balancer.serve(listener));
    serve_until_signal(server, args.addr, args.register.as_deref(), "balancer").await
}

async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, Failure> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| failed(format!("cannot listen on {addr}: {error}")))
}

/// Logs that `addr` serves, registers it when asked, then runs until a signal or until `server` ends.
async fn serve_until_signal(
    server: tokio::task::JoinHandle<()>,
    addr: SocketAddr,
    register: Option<&str>,
    what: &str,
) -> Result<(), Failure> {
    log_line(&format!("serving http://{addr}"));
    if let Some(admin) = register {
        register_when_up(admin, &format!("http://{addr}"))
            .await
            .map_err(failed)?;
        log_line(&format!("registered http://{addr} with {admin}"));
    }
    let shutdown = headstart::CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    tokio::select! {
        () = shutdown.cancelled() => Ok(()),
        ended = server => Err(failed(format!("the {what}'s server stopped: {ended:?}"))),
    }
}

/// Registers `deployment` once its server answers: the first attempts may reach it before it listens.
pub(crate) async fn register_when_up(admin: &str, deployment: &str) -> Result<(), String> {
    let mut last = None;
    for _ in 0..50 {
        match RestateClient::register(admin, deployment).await {
            Ok(()) => return Ok(()),
            Err(error) => last = Some(error),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!(
        "cannot register {deployment} with {admin}: {}",
        last.map_or_else(String::new, |error| error.to_string())
    ))
}
