//! `headstart bench sessions --store URL --workers N[,N…] [--model-ms MS] [--tool-ms MS] [--concurrency C]
//! [--sessions S] [--json]`: a fleet's throughput (docs/performance.md). For each load (CPU-only, then the simulated
//! model and tools' times given) and each worker count, S sessions run on that many `headstart worker` processes;
//! on PostgreSQL one worker on a fresh SQLite file is measured as well, for comparison.
//!
//! Each run submits to a queue of its own (`bench-<pid>-<µs>`), served by its own workers only: other workers on
//! the store never see its sessions, and its workers take nothing else. A session of the run that fails stops the
//! run at once, naming the session, its worker and the stored failure; a stall is reported as the store sees each
//! unfinished session (claimed by whom, in which state, or never claimed).
//!
//! Submission is closed-loop: the benchmark keeps `workers × concurrency` sessions submitted and unfinished,
//! submitting the next one when a worker logs a `finished` line, so that submit→claim is the time an idle slot
//! takes to pick a session up, not a backlog's wait. Submit→claim comes from the workers' logs, stamped as each
//! line arrives; seal→start and the statements from each worker's `/metrics` after the run. The scenario and the
//! report are `headstart_bench::fleet`'s.

#[cfg(feature = "restate")]
mod restate;
mod workers;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use headstart::store::{QueueName, SessionInfo, SessionQueue, SessionSettings};
use headstart::SessionId;
use headstart::{Clock, SystemClock, UserMessage};
use headstart_bench::fleet::{self, FleetLoad, FleetReport, FleetRun, Quantiles};
use headstart_bench::{percentile, prometheus};

use crate::store_url::{runtime, Access, StoreUrl};
use workers::{Line, Seen, Workers};

/// A run in which no session finishes for this long has stalled: it fails with a report of what is stuck rather
/// than hangs (a session of the benchmark takes about a second).
const STALL_AFTER: Duration = Duration::from_secs(120);

/// What `bench sessions --store` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetOptions {
    /// The store: a PostgreSQL URL (then the SQLite baseline runs too) or a SQLite file.
    pub url: String,
    /// `--workers` as given (see [`fleet::worker_counts`]).
    pub workers: Vec<usize>,
    /// Sessions per run.
    pub sessions: usize,
    /// Each worker's session limit.
    pub concurrency: usize,
    /// The I/O-bound load; the CPU-only one is measured beside it.
    pub load: FleetLoad,
    /// `--restate`: the `restate-server` binary; each count of `workers` is then also run as that many Restate
    /// deployments on the same store.
    pub restate: Option<std::path::PathBuf>,
}

/// Runs every measurement and reports them.
pub fn run(options: &FleetOptions) -> Result<FleetReport, String> {
    let counts = fleet::worker_counts(&options.workers)?;
    if options.sessions == 0 || options.concurrency == 0 {
        return Err("--sessions and --concurrency must be at least 1".to_owned());
    }
    let dir = tempfile::tempdir().map_err(|error| format!("cannot create a temporary folder: {error}"))?;
    let postgres = matches!(StoreUrl::parse(&options.url), StoreUrl::Postgres(_));
    let mut runs = Vec::new();
    for (index, load) in options.load.with_cpu_only().into_iter().enumerate() {
        let scenario = dir.path().join(format!("fleet-bench-{index}.json"));
        std::fs::write(&scenario, fleet::scenario(load).to_string()).map_err(|error| error.to_string())?;
        let run = |store, url: &str, workers| measure(store, url, &scenario, workers, load, options);
        if postgres {
            let sqlite = dir.path().join(format!("fleet-bench-{index}.db"));
            runs.push(run("sqlite", &sqlite.to_string_lossy(), 1)?);
        }
        for &workers in &counts {
            runs.push(run(
                if postgres { "postgres" } else { "sqlite" },
                &options.url,
                workers,
            )?);
        }
        if let Some(server) = &options.restate {
            for &deployments in &counts {
                runs.push(on_restate(server, &options.url, &scenario, deployments, load, options)?);
            }
        }
    }
    let mut report = FleetReport {
        concurrency: options.concurrency,
        sessions: options.sessions,
        runs,
    };
    report.compare_with_one_worker();
    Ok(report)
}

/// `deployments` Restate deployments running the sessions (`--restate`).
#[cfg(feature = "restate")]
fn on_restate(
    server: &Path,
    url: &str,
    scenario: &Path,
    deployments: usize,
    load: FleetLoad,
    options: &FleetOptions,
) -> Result<FleetRun, String> {
    restate::measure(server, url, scenario, deployments, load, options)
}

#[cfg(not(feature = "restate"))]
fn on_restate(
    _server: &Path,
    _url: &str,
    _scenario: &Path,
    _deployments: usize,
    _load: FleetLoad,
    _options: &FleetOptions,
) -> Result<FleetRun, String> {
    Err("--restate needs the `restate` feature of headstart-cli (on by default)".to_owned())
}

/// What one run saw as it went.
#[derive(Default)]
struct Progress {
    /// When each submitted session was submitted, until its first claim.
    unclaimed: HashMap<String, Instant>,
    /// This run's sessions.
    ours: HashSet<String>,
    /// Submit→claim of each session (ms).
    waits: Vec<f64>,
    finished: usize,
    /// This run's sessions that finished.
    done: HashSet<String>,
}

/// Runs `options.sessions` sessions on `workers` worker processes under `load`, closed-loop.
fn measure(
    store_name: &'static str,
    url: &str,
    scenario: &Path,
    workers: usize,
    load: FleetLoad,
    options: &FleetOptions,
) -> Result<FleetRun, String> {
    let runtime = runtime()?;
    let store = runtime.block_on(StoreUrl::parse(url).open(Access::Create))?;
    let queue = run_queue()?;
    let fleet = Workers::start(url, scenario, workers, options.concurrency, &queue)?;
    let endpoints = fleet.endpoints(Duration::from_secs(60))?;
    let sessions = options.sessions;
    let prompt = UserMessage::new("go");
    let settings = SessionSettings {
        queue: Some(queue),
        ..SessionSettings::default()
    };
    let mut progress = Progress::default();
    let submit = |progress: &mut Progress| -> Result<(), String> {
        let at = Instant::now();
        let id = runtime
            .block_on(store.submit_with(&prompt, &settings, SystemClock.now_us()))
            .map_err(|error| format!("submit: {error}"))?;
        progress.unclaimed.insert(id.0.clone(), at);
        progress.ours.insert(id.0);
        Ok(())
    };
    let started = Instant::now();
    for _ in 0..(workers * options.concurrency).min(sessions) {
        submit(&mut progress)?;
    }
    let mut last = started;
    while progress.finished < sessions {
        let line = fleet.next(last + STALL_AFTER);
        let Line { worker, seen, at } = match line {
            Ok(line) => line,
            Err(silence) => {
                let stuck = runtime.block_on(stuck(store.as_ref(), &progress));
                return Err(format!("{silence}: {stuck}"));
            }
        };
        match seen {
            Seen::Claimed(session) => {
                if let Some(submitted) = progress.unclaimed.remove(&session) {
                    let wait = at.saturating_duration_since(submitted);
                    progress.waits.push(wait.as_secs_f64() * 1000.0);
                }
            }
            Seen::Finished { session, .. } if !progress.ours.contains(&session) => {}
            Seen::Finished {
                completed: false,
                session,
                line,
            } => {
                let stored = runtime.block_on(store.session(&SessionId(session.clone())));
                let stored = match stored {
                    Ok(Some(info)) => describe(&info, SystemClock.now_us()),
                    Ok(None) => "a session the store does not have".to_owned(),
                    Err(error) => format!("unreadable: {error}"),
                };
                return Err(format!(
                    "session {session} did not complete on worker {worker} (bench-{worker}): the store says {stored}; \
                     its log: {line}"
                ));
            }
            Seen::Finished { session, .. } => {
                progress.done.insert(session.clone());
                progress.finished += 1;
                last = at;
                if progress.ours.len() < sessions {
                    submit(&mut progress)?;
                }
            }
            Seen::Exited => return Err(format!("worker {worker} exited during the run")),
            Seen::Metrics(_) => {}
        }
    }
    let seconds = last.saturating_duration_since(started).as_secs_f64();
    let pages = scrape(&endpoints)?;
    drop(fleet);
    let commits = runtime.block_on(commits(store.as_ref(), &progress.ours))?;
    let mut run = throughput(store_name, workers, load, sessions, seconds, commits, &progress.waits);
    run.seal_to_start_ms = seal_to_start(&pages);
    run.statements_per_session = per_session(&pages, headstart_postgres::metrics::STATEMENTS, sessions);
    Ok(run)
}

/// A run's figures that every kind of run measures alike: sessions and commits per second, and submit→claim from
/// `waits_ms`; the figures read from metrics are left `None` for the caller.
fn throughput(
    store: &'static str,
    workers: usize,
    load: FleetLoad,
    sessions: usize,
    seconds: f64,
    commits: u64,
    waits_ms: &[f64],
) -> FleetRun {
    FleetRun {
        store,
        workers,
        model_ms: load.model_ms,
        tool_ms: load.tool_ms,
        sessions,
        seconds,
        sessions_per_s: sessions as f64 / seconds,
        vs_one_worker: None,
        commits_per_s: commits as f64 / seconds,
        submit_to_claim_ms: Quantiles {
            p50: round2(percentile(waits_ms, 50.0)),
            p99: round2(percentile(waits_ms, 99.0)),
        },
        seal_to_start_ms: None,
        statements_per_session: None,
        journal_entries_per_session: None,
    }
}

/// Every process's metrics page, parsed.
fn scrape(endpoints: &[std::net::SocketAddr]) -> Result<Vec<prometheus::Exposition>, String> {
    endpoints
        .iter()
        .map(|addr| prometheus::fetch(*addr, Duration::from_secs(10)).and_then(|text| prometheus::parse(&text)))
        .collect()
}

/// Counter `metric` summed over every page, per session; `None` when no page has it.
fn per_session(pages: &[prometheus::Exposition], metric: &str, sessions: usize) -> Option<f64> {
    pages
        .iter()
        .filter_map(|page| page.sum(metric))
        .reduce(|a, b| a + b)
        .map(|total| round2(total / sessions as f64))
}

/// A queue of this run's own, so that no other worker on the store claims its sessions.
fn run_queue() -> Result<QueueName, String> {
    QueueName::new(format!("bench-{}-{}", std::process::id(), SystemClock.now_us())).map_err(|error| error.to_string())
}

/// What the store says of a session: state, owner, epoch, lease, messages, and its failure when it has one.
fn describe(info: &SessionInfo, now_us: i64) -> String {
    let mut text = format!(
        "{} (state {}, owner {}, epoch {}, lease {}, {} messages",
        info.id,
        info.state.as_str(),
        info.owner.as_deref().unwrap_or("none"),
        info.epoch,
        info.lease_expires_at_us.map_or_else(
            || "none".to_owned(),
            |at| format!("{:+.1} s", (at - now_us) as f64 / 1e6)
        ),
        info.messages
    );
    if let Some(failure) = &info.failure {
        let _ = write!(text, ", failure: {failure}");
    }
    text.push(')');
    text
}

/// What a stalled run left unfinished, as the store says: each unfinished session of the run grouped by the
/// worker that holds it or last held it (with its state), and the ones no worker ever claimed (epoch 0).
async fn stuck(store: &dyn SessionQueue, progress: &Progress) -> String {
    let now_us = SystemClock.now_us();
    let mut by_owner: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut never: Vec<String> = Vec::new();
    let mut unfinished: Vec<&String> = progress.ours.difference(&progress.done).collect();
    unfinished.sort();
    for session in unfinished {
        match store.session(&SessionId(session.clone())).await {
            Ok(Some(info)) if info.epoch == 0 => never.push(describe(&info, now_us)),
            Ok(Some(info)) => {
                let owner = info.owner.clone().unwrap_or_else(|| "no worker now".to_owned());
                by_owner.entry(owner).or_default().push(describe(&info, now_us));
            }
            Ok(None) => never.push(format!("{session} (a session the store does not have)")),
            Err(error) => never.push(format!("{session} (unreadable: {error})")),
        }
    }
    let mut report = format!(
        "no session finished for {} s ({} of this run's finished);",
        STALL_AFTER.as_secs(),
        progress.finished
    );
    for (owner, sessions) in &by_owner {
        let _ = write!(report, " claimed by {owner}: {};", sessions.join(", "));
    }
    let _ = write!(
        report,
        " never claimed: {}",
        if never.is_empty() {
            "none".to_owned()
        } else {
            never.join(", ")
        }
    );
    report
}

/// Seal→start of early calls over every worker's histogram.
fn seal_to_start(pages: &[prometheus::Exposition]) -> Option<Quantiles> {
    histogram_ms(pages, headstart::metrics::SEAL_TO_START, &[("when", "early")])
}

/// The median and 99th percentile of histogram `name` (seconds, series matching `labels`) over every page, in ms.
fn histogram_ms(pages: &[prometheus::Exposition], name: &str, labels: &[(&str, &str)]) -> Option<Quantiles> {
    let buckets: Vec<(f64, f64)> = pages.iter().flat_map(|page| page.buckets(name, labels)).collect();
    let ms = |q| prometheus::histogram_quantile(q, &buckets).map(|seconds| round2(seconds * 1000.0));
    Some(Quantiles {
        p50: ms(0.5)?,
        p99: ms(0.99)?,
    })
}

/// The transcript messages the workers wrote for `ours` (every message but each submitted prompt).
async fn commits(store: &dyn SessionQueue, ours: &HashSet<String>) -> Result<u64, String> {
    let infos = store.sessions().await.map_err(|error| error.to_string())?;
    Ok(infos
        .iter()
        .filter(|info| ours.contains(&info.id.0))
        .map(|info| info.messages.saturating_sub(1))
        .sum())
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}
