//! `headstart bench scheduler`: the pure scheduler's cost per call on one hostile response — many calls, a few
//! conflict keys — driven through prepare → start → finish the way the engine drives it. Also the driver of the
//! criterion micro-benchmarks (`benches/scheduler.rs`).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::time::Instant;

use headstart::bench_internals::{Action, Prepared, Scheduler};
use headstart::ExecutionMode;
use serde::Serialize;

/// Admits `calls` calls in batches of `batch`, then drives them to the end the way the engine does: every
/// preparation succeeds at once (with the key `key(call)`), and running calls finish oldest first. Returns the
/// number of calls started.
pub fn drive(mode: ExecutionMode, calls: usize, batch: usize, key: impl Fn(usize) -> Option<String>) -> usize {
    let mut scheduler = Scheduler::new(mode, None);
    let mut running = VecDeque::new();
    let mut started = 0;
    let mut admitted = 0;
    while admitted < calls || !scheduler.is_idle() {
        if admitted < calls {
            let len = batch.min(calls - admitted);
            scheduler.admit(len, false);
            admitted += len;
        }
        while let Some(action) = scheduler.next_action() {
            match action {
                Action::Prepare(call) => scheduler.prepared(call, Prepared::Runnable(key(call))),
                Action::Start(call) => {
                    running.push_back(call);
                    started += 1;
                }
            }
        }
        if let Some(call) = running.pop_front() {
            scheduler.finished(call);
        }
    }
    started
}

/// Options of the scheduler benchmark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerOptions {
    /// Calls in the response.
    pub calls: usize,
    /// Distinct conflict keys, assigned round-robin (0: no keys).
    pub keys: usize,
    /// Calls per admitted batch.
    pub batch: usize,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            calls: 100_000,
            keys: 8,
            batch: 4,
        }
    }
}

/// The figures of the scheduler benchmark; serializes to exactly `calls`, `keys`, `total_ms`, `ns_per_call`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchedulerReport {
    /// Calls driven.
    pub calls: usize,
    /// Distinct conflict keys.
    pub keys: usize,
    /// Wall time for the whole response, ms.
    pub total_ms: f64,
    /// Wall time per call, ns.
    pub ns_per_call: f64,
}

impl SchedulerReport {
    /// The human table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "scheduler: {} calls, {} conflict keys: {:.1} ms in all, {:.0} ns per call",
            self.calls, self.keys, self.total_ms, self.ns_per_call
        );
        out
    }
}

/// Runs the benchmark (parallel mode, every call keyed when `keys > 0`).
pub fn run(options: &SchedulerOptions) -> SchedulerReport {
    let keys = options.keys;
    let names: Vec<String> = (0..keys).map(|key| format!("key-{key}")).collect();
    let began = Instant::now();
    let started = drive(ExecutionMode::Parallel, options.calls, options.batch.max(1), |call| {
        names.get(call % keys.max(1)).cloned()
    });
    let elapsed = began.elapsed();
    let per_call = elapsed.as_secs_f64() * 1e9 / started.max(1) as f64;
    SchedulerReport {
        calls: started,
        keys,
        total_ms: crate::round3(elapsed.as_secs_f64() * 1e3),
        ns_per_call: crate::round3(per_call),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_is_started_once_with_and_without_keys() {
        for keys in [0, 1, 8] {
            let report = run(&SchedulerOptions {
                calls: 1_000,
                keys,
                batch: 4,
            });
            assert_eq!(report.calls, 1_000, "keys {keys}");
            assert!(report.ns_per_call.is_finite());
        }
        assert_eq!(drive(ExecutionMode::Sequential, 10, 1, |_| None), 10);
    }
}
