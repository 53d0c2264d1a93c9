//! Criterion micro-benchmarks of the pure scheduler (`headstart::bench_internals::Scheduler`, contract §4): admitting batches and
//! driving every call through prepare → start → finish.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use headstart::ExecutionMode;
use headstart_bench::scheduler::drive;

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
