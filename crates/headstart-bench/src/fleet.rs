//! What `headstart bench sessions --store URL --workers N` measures and reports (the command, which starts the
//! worker processes, is in headstart-cli): the scenario every session runs, the worker counts, and the report.
//!
//! Each session is one scenario ([`scenario`]) on the wall clock: a first response that streams for `model_ms`,
//! sealing two calls to an early tool (`lookup`) at a quarter and at half of it and a call to a sync tool (`save`)
//! at three quarters, each tool taking `tool_ms`; then a second response, text only, that also streams for
//! `model_ms`. Alone, a session takes about 2 × `model_ms` + `tool_ms` plus its commits. With both at 0 it is
//! CPU-only: what the workers, the database and the machine can do, with nothing to wait for.

use serde::Serialize;
use serde_json::{json, Value};

/// The simulated model's and tools' times of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FleetLoad {
    /// How long each model response streams, in milliseconds.
    pub model_ms: u64,
    /// How long each tool call takes, in milliseconds.
    pub tool_ms: u64,
}

impl FleetLoad {
    /// Nothing to wait for: the CPU-only figure.
    pub const CPU_ONLY: FleetLoad = FleetLoad {
        model_ms: 0,
        tool_ms: 0,
    };

    /// The loads a run measures: the CPU-only one, then `self` when it waits on something.
    pub fn with_cpu_only(self) -> Vec<FleetLoad> {
        if self == FleetLoad::CPU_ONLY {
            vec![self]
        } else {
            vec![FleetLoad::CPU_ONLY, self]
        }
    }
}

/// The scenario (docs/scenario-format.md) every session of a run under `load` runs.
pub fn scenario(load: FleetLoad) -> Value {
    let at = |quarters: u64| load.model_ms * quarters / 4;
    let call = |from: u64, to: u64, index: usize, id: &str, name: &str| {
        vec![
            json!({"at_ms": from, "type": "toolcall_start", "index": index, "id": id, "name": name}),
            json!({"at_ms": (from + to) / 2, "type": "toolcall_delta", "index": index, "delta": "{}"}),
            json!({"at_ms": to, "type": "toolcall_end", "index": index}),
        ]
    };
    let mut first = vec![json!({"at_ms": 0, "type": "start"})];
    first.extend(call(0, at(1), 0, "a1", "lookup"));
    first.extend(call(at(1), at(2), 1, "a2", "lookup"));
    first.extend(call(at(2), at(3), 2, "s1", "save"));
    first.push(json!({"at_ms": at(4), "type": "done", "stop_reason": "tool_use"}));
    let last = vec![
        json!({"at_ms": 0, "type": "start"}),
        json!({"at_ms": 0, "type": "text_start", "index": 0}),
        json!({"at_ms": at(2), "type": "text_delta", "index": 0, "delta": "done"}),
        json!({"at_ms": at(4), "type": "text_end", "index": 0}),
        json!({"at_ms": at(4), "type": "done", "stop_reason": "stop"}),
    ];
    json!({
        "name": "fleet-bench",
        "prompt": "go",
        "tools": [
            {"name": "lookup", "async": true, "behavior": {"delay_ms": load.tool_ms, "result": {"text": "found"}}},
            {"name": "save", "behavior": {"delay_ms": load.tool_ms, "result": {"text": "saved"}}},
        ],
        "turns": [{"events": first}, {"events": last}],
    })
}

/// The worker counts `--workers` asks for: a list as given; a single count N as 1, 2, 4, … up to N.
pub fn worker_counts(asked: &[usize]) -> Result<Vec<usize>, String> {
    if asked.is_empty() || asked.contains(&0) {
        return Err("--workers takes counts of at least 1".to_owned());
    }
    if let [max] = asked {
        let mut counts = vec![1];
        while let Some(&last) = counts.last().filter(|&&last| last < *max) {
            counts.push((last * 2).min(*max));
        }
        return Ok(counts);
    }
    Ok(asked.to_vec())
}

/// The 50th and 99th percentiles of a latency, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Quantiles {
    /// The median.
    pub p50: f64,
    /// The 99th percentile.
    pub p99: f64,
}

/// One measurement: `workers` processes on one store under one load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetRun {
    /// `sqlite` or `postgres` (worker processes claiming from that store), or `restate` (deployments behind a
    /// Restate server, writing to the PostgreSQL store).
    pub store: &'static str,
    /// Worker processes, or Restate deployments.
    pub workers: usize,
    /// The simulated model's time per response (ms).
    pub model_ms: u64,
    /// Each tool call's time (ms).
    pub tool_ms: u64,
    /// Sessions run.
    pub sessions: usize,
    /// From the first submit to the last session finished.
    pub seconds: f64,
    /// Sessions completed per second.
    pub sessions_per_s: f64,
    /// `sessions_per_s` over that of one worker on the same store under the same load, when measured.
    pub vs_one_worker: Option<f64>,
    /// Transcript commits (messages written by the workers) per second.
    pub commits_per_s: f64,
    /// From calling `submit` to the worker's `claimed` line (exact, every session); on Restate, to the turn's
    /// `begin` (the session's creation in the store, on the same wall clock).
    pub submit_to_claim_ms: Quantiles,
    /// From `toolcall_end` to the body starting, of early calls, estimated from the workers' histograms
    /// (`headstart_seal_to_start_seconds`, interpolated within buckets); on Restate, from the seal to the body
    /// starting in `Tools` (`headstart_restate_seal_to_body_seconds`, every call). `None` without calls.
    pub seal_to_start_ms: Option<Quantiles>,
    /// SQL statements the workers sent per session (`headstart_store_statements_total`, idle claims and renewals
    /// included); `None` on SQLite, which does not count them.
    pub statements_per_session: Option<f64>,
    /// On Restate: the journal entries the deployments wrote per session (`headstart_restate_journal_entries_total`;
    /// Restate's own input and output entries not counted). `None` for a fleet of workers.
    pub journal_entries_per_session: Option<f64>,
}

/// The report of `bench sessions --store`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetReport {
    /// Each worker process's session limit.
    pub concurrency: usize,
    /// Sessions per run.
    pub sessions: usize,
    /// For each load, CPU-only first: the SQLite baseline (when the store is PostgreSQL), then each worker count.
    pub runs: Vec<FleetRun>,
}

impl FleetReport {
    /// Fills in [`FleetRun::vs_one_worker`] from the one-worker runs of the same store and load.
    pub fn compare_with_one_worker(&mut self) {
        let ones: Vec<(&'static str, u64, u64, f64)> = self
            .runs
            .iter()
            .filter(|run| run.workers == 1)
            .map(|run| (run.store, run.model_ms, run.tool_ms, run.sessions_per_s))
            .collect();
        for run in &mut self.runs {
            run.vs_one_worker = ones
                .iter()
                .find(|one| (one.0, one.1, one.2) == (run.store, run.model_ms, run.tool_ms))
                .filter(|one| one.3 > 0.0)
                .map(|one| crate::round3(run.sessions_per_s / one.3));
        }
    }

    /// A table for the terminal.
    pub fn table(&self) -> String {
        let mut out = format!(
            "fleet throughput ({} sessions per run, worker concurrency {})\n",
            self.sessions, self.concurrency
        );
        out.push_str(
            "  store     workers  model/tool ms  seconds  sessions/s  x1 worker  commits/s  submit>claim p50/p99 ms  \
             seal>start p50/p99 ms  stmts/session  journal/session\n",
        );
        let pair = |q: Option<Quantiles>| q.map_or_else(|| "-".to_owned(), |q| format!("{:.1} / {:.1}", q.p50, q.p99));
        for run in &self.runs {
            out.push_str(&format!(
                "  {:<9} {:>7} {:>14} {:>8.2} {:>11.1} {:>10} {:>10.1} {:>24} {:>22} {:>14} {:>16}\n",
                run.store,
                run.workers,
                format!("{}/{}", run.model_ms, run.tool_ms),
                run.seconds,
                run.sessions_per_s,
                run.vs_one_worker.map_or_else(|| "-".to_owned(), |x| format!("{x:.2}")),
                run.commits_per_s,
                pair(Some(run.submit_to_claim_ms)),
                pair(run.seal_to_start_ms),
                run.statements_per_session
                    .map_or_else(|| "-".to_owned(), |n| format!("{n:.1}")),
                run.journal_entries_per_session
                    .map_or_else(|| "-".to_owned(), |n| format!("{n:.1}")),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_counts_double_up_to_one_count_or_follow_a_list() {
        assert_eq!(worker_counts(&[4]), Ok(vec![1, 2, 4]));
        assert_eq!(worker_counts(&[3]), Ok(vec![1, 2, 3]));
        assert_eq!(worker_counts(&[1]), Ok(vec![1]));
        assert_eq!(worker_counts(&[1, 2, 4]), Ok(vec![1, 2, 4]));
        assert_eq!(worker_counts(&[2, 1]), Ok(vec![2, 1]));
        assert!(worker_counts(&[]).is_err());
        assert!(worker_counts(&[1, 0]).is_err());
    }

    #[test]
    fn the_scenario_spreads_the_response_over_the_model_time() {
        let load = FleetLoad {
            model_ms: 200,
            tool_ms: 100,
        };
        let scenario = scenario(load);
        let first = scenario["turns"][0]["events"].as_array().expect("events");
        let ends: Vec<u64> = first
            .iter()
            .filter(|event| event["type"] == "toolcall_end" || event["type"] == "done")
            .filter_map(|event| event["at_ms"].as_u64())
            .collect();
        assert_eq!(ends, [50, 100, 150, 200]);
        assert_eq!(scenario["tools"][0]["behavior"]["delay_ms"], 100);
        assert_eq!(load.with_cpu_only(), [FleetLoad::CPU_ONLY, load]);
        assert_eq!(FleetLoad::CPU_ONLY.with_cpu_only(), [FleetLoad::CPU_ONLY]);
    }
}
