//! Criterion micro-benchmarks of the pure scheduler (`headstart::scheduler`, SPEC §4): admitting batches and
//! driving every call through prepare → start → finish.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use headstart::scheduler::{Action, Prepared, Scheduler};
use headstart::ExecutionMode;

/// Admits `calls` calls in batches of `batch`, then drives them to the end the way the engine does: every
/// preparation succeeds at once (with the key `key(call)`), and running calls finish oldest first.
fn drive(mode: ExecutionMode, calls: usize, batch: usize, key: impl Fn(usize) -> Option<String>) -> usize {
    let mut scheduler = Scheduler::new(mode, None);
    let mut running = std::collections::VecDeque::new();
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

fn parallel(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduler/parallel");
    for calls in [10, 100, 1_000] {
        group.throughput(Throughput::Elements(calls as u64));
        group.bench_with_input(BenchmarkId::from_parameter(calls), &calls, |b, &calls| {
            b.iter(|| drive(ExecutionMode::Parallel, calls, 1, |_| None));
        });
    }
    group.finish();
}

fn sequential(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduler/sequential");
    for calls in [10, 100, 1_000] {
        group.throughput(Throughput::Elements(calls as u64));
        group.bench_with_input(BenchmarkId::from_parameter(calls), &calls, |b, &calls| {
            b.iter(|| drive(ExecutionMode::Sequential, calls, 1, |_| None));
        });
    }
    group.finish();
}

fn conflict_keys(c: &mut Criterion) {
    let mut group = c.benchmark_group("scheduler/conflict_keys_8");
    for calls in [10, 100, 1_000] {
        group.throughput(Throughput::Elements(calls as u64));
        group.bench_with_input(BenchmarkId::from_parameter(calls), &calls, |b, &calls| {
            b.iter(|| {
                drive(ExecutionMode::Parallel, calls, 4, |call| {
                    Some(format!("key-{}", call % 8))
                })
            });
        });
    }
    group.finish();
}

criterion_group!(benches, parallel, sequential, conflict_keys);
criterion_main!(benches);
