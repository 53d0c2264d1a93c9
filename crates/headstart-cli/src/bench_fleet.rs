//! `headstart bench sessions --store URL --workers N [--sessions S] [--json]`: a fleet's throughput. For each worker
//! count in 1, 2, 4, … up to N, S sessions are submitted to the store and N `headstart worker` processes run them
//! to completion; the same is measured with one worker on a fresh SQLite file, in the same run, for comparison
//! (docs/performance.md).
//!
//! Every session runs a small scenario on the wall clock: two early calls while the model streams, one sync call,
//! then a final answer (20 ms and 10 ms tools, ~40 ms of model per request), 7 transcript commits.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use headstart::{Clock, SystemClock, UserMessage};
use serde::Serialize;
use serde_json::json;

use crate::store_url::{runtime, Access, StoreUrl};

/// The worker processes' concurrency: enough that the store, not the limit, bounds throughput.
const CONCURRENCY: usize = 64;

/// One measurement.
#[derive(Debug, Clone, Serialize)]
pub struct FleetRun {
    /// `sqlite` or `postgres`.
    pub store: &'static str,
    /// Worker processes.
    pub workers: usize,
    /// Sessions run.
    pub sessions: usize,
    /// From starting the workers to the last session completed.
    pub seconds: f64,
    /// Sessions completed per second.
    pub sessions_per_s: f64,
    /// Transcript commits (messages written by the workers) per second.
    pub commits_per_s: f64,
}

/// The report of `bench sessions --store`.
#[derive(Debug, Clone, Serialize)]
pub struct FleetReport {
    /// Each worker process's session limit.
    pub concurrency: usize,
    /// The SQLite baseline (one worker), then PostgreSQL for each worker count.
    pub runs: Vec<FleetRun>,
}

impl FleetReport {
    /// A table for the terminal.
    pub fn table(&self) -> String {
        let mut out = format!(
            "fleet throughput ({} sessions per run, worker concurrency {})\n",
            self.runs.first().map_or(0, |run| run.sessions),
            self.concurrency
        );
        out.push_str("  store     workers   seconds   sessions/s   commits/s\n");
        for run in &self.runs {
            out.push_str(&format!(
                "  {:<9} {:>7} {:>9.2} {:>12.1} {:>11.1}\n",
                run.store, run.workers, run.seconds, run.sessions_per_s, run.commits_per_s
            ));
        }
        out
    }
}

/// Runs the fleet benchmark against `url` (a PostgreSQL URL) with up to `max_workers` workers.
pub fn run(url: &str, max_workers: usize, sessions: usize) -> Result<FleetReport, String> {
    if !matches!(StoreUrl::parse(url), StoreUrl::Postgres(_)) {
        return Err("bench sessions --store takes a PostgreSQL URL (the SQLite baseline runs by itself)".to_owned());
    }
    if max_workers == 0 || sessions == 0 {
        return Err("--workers and --sessions must be at least 1".to_owned());
    }
    let dir = tempfile::tempdir().map_err(|error| format!("cannot create a temporary folder: {error}"))?;
    let scenario = dir.path().join("fleet-bench.json");
    std::fs::write(&scenario, scenario_json().to_string()).map_err(|error| error.to_string())?;
    let sqlite = dir.path().join("fleet-bench.db");
    let mut runs = vec![measure("sqlite", &sqlite.to_string_lossy(), &scenario, 1, sessions)?];
    let mut workers = 1;
    loop {
        runs.push(measure("postgres", url, &scenario, workers, sessions)?);
        if workers >= max_workers {
            break;
        }
        workers = (workers * 2).min(max_workers);
    }
    Ok(FleetReport {
        concurrency: CONCURRENCY,
        runs,
    })
}

/// The benchmark's worker processes, killed and reaped when dropped: once the run is over, and as well when it
/// ends early (a worker that does not start, a panic), so that none outlives the benchmark.
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Submits `sessions` sessions, runs `workers` worker processes until all of them completed, and stops them.
fn measure(
    store_name: &'static str,
    url: &str,
    scenario: &Path,
    workers: usize,
    sessions: usize,
) -> Result<FleetRun, String> {
    let runtime = runtime()?;
    let store_url = StoreUrl::parse(url);
    let store = runtime.block_on(store_url.open(Access::Create))?;
    let prompt = UserMessage::new("go");
    let mut ids = std::collections::HashSet::new();
    for _ in 0..sessions {
        let id = runtime
            .block_on(store.submit(&prompt, SystemClock.now_us()))
            .map_err(|error| error.to_string())?;
        ids.insert(id);
    }
    let bin = std::env::current_exe().map_err(|error| format!("cannot find the headstart binary: {error}"))?;
    let started = Instant::now();
    let mut children = Workers(Vec::new());
    for index in 0..workers {
        let child = Command::new(&bin)
            .args([
                "worker",
                "--store",
                url,
                "--id",
                &format!("bench-{index}"),
                "--scenario",
            ])
            .arg(scenario)
            .args(["--concurrency", &CONCURRENCY.to_string(), "--poll-ms", "20"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot start a worker: {error}"))?;
        children.0.push(child);
    }
    let outcome = runtime.block_on(async {
        loop {
            let infos = store.sessions().await.map_err(|error| error.to_string())?;
            let mine: Vec<_> = infos.iter().filter(|info| ids.contains(&info.id)).collect();
            let done = mine
                .iter()
                .filter(|info| info.state == headstart::store::SessionState::Completed)
                .count();
            if let Some(failed) = mine
                .iter()
                .find(|info| info.state == headstart::store::SessionState::Failed)
            {
                return Err(format!("session {} failed: {:?}", failed.id, failed.failure));
            }
            if done == sessions {
                // Every message but the submitted prompt is a worker's commit.
                let commits: u64 = mine.iter().map(|info| info.messages.saturating_sub(1)).sum();
                return Ok((started.elapsed(), commits));
            }
            if started.elapsed() > Duration::from_secs(600) {
                return Err(format!("{done} of {sessions} sessions completed after 10 minutes"));
            }
            // Listing every session is a query over the whole table, which grows with every run: poll gently, so
            // the benchmark's own load stays small next to the fleet's (the figures' resolution is 100 ms).
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    // Every session is finished (or the run failed): nothing is lost by killing the workers.
    drop(children);
    let (elapsed, commits) = outcome?;
    let seconds = elapsed.as_secs_f64();
    Ok(FleetRun {
        store: store_name,
        workers,
        sessions,
        seconds,
        sessions_per_s: sessions as f64 / seconds,
        commits_per_s: commits as f64 / seconds,
    })
}

/// The benchmark's scenario (docs/scenario-format.md).
fn scenario_json() -> serde_json::Value {
    let call = |at: u64, index: usize, id: &str, name: &str| {
        vec![
            json!({"at_ms": at, "type": "toolcall_start", "index": index, "id": id, "name": name}),
            json!({"at_ms": at + 5, "type": "toolcall_delta", "index": index, "delta": "{}"}),
            json!({"at_ms": at + 10, "type": "toolcall_end", "index": index}),
        ]
    };
    let mut first = vec![json!({"at_ms": 0, "type": "start"})];
    first.extend(call(0, 0, "a1", "lookup"));
    first.extend(call(10, 1, "a2", "lookup"));
    first.extend(call(20, 2, "s1", "save"));
    first.push(json!({"at_ms": 40, "type": "done", "stop_reason": "tool_use"}));
    let last = vec![
        json!({"at_ms": 0, "type": "start"}),
        json!({"at_ms": 0, "type": "text_start", "index": 0}),
        json!({"at_ms": 20, "type": "text_delta", "index": 0, "delta": "done"}),
        json!({"at_ms": 40, "type": "text_end", "index": 0}),
        json!({"at_ms": 40, "type": "done", "stop_reason": "stop"}),
    ];
    json!({
        "name": "fleet-bench",
        "prompt": "go",
        "tools": [
            {"name": "lookup", "async": true, "behavior": {"delay_ms": 20, "result": {"text": "found"}}},
            {"name": "save", "behavior": {"delay_ms": 10, "result": {"text": "saved"}}},
        ],
        "turns": [{"events": first}, {"events": last}],
    })
}
