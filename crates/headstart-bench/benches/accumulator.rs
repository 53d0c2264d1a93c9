//! Criterion micro-benchmarks of the accumulator (contract §2): applying delta events one by one must cost
//! O(delta length), whatever the size of the message so far.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use headstart::core::{Accumulator, DeltaEvent, DoneReason, Usage};

fn start() -> DeltaEvent {
    DeltaEvent::Start {
        model: None,
        response_id: Some("r".to_owned()),
    }
}

fn done(stop_reason: DoneReason) -> DeltaEvent {
    DeltaEvent::Done {
        stop_reason,
        usage: Usage::default(),
    }
}

/// One text block of `n` deltas.
fn text_response(n: usize) -> Vec<DeltaEvent> {
    let mut events = vec![start(), DeltaEvent::TextStart { index: 0 }];
    events.extend((0..n).map(|i| DeltaEvent::TextDelta {
        index: 0,
        delta: if i % 2 == 0 {
            "word ".to_owned()
        } else {
            "other ".to_owned()
        },
    }));
    events.push(DeltaEvent::TextEnd { index: 0 });
    events.push(done(DoneReason::Stop));
    events
}

/// `calls` tool calls of `per_call` argument deltas each.
fn call_response(calls: usize, per_call: usize) -> Vec<DeltaEvent> {
    let mut events = vec![start()];
    for index in 0..calls {
        events.push(DeltaEvent::ToolcallStart {
            index,
            id: format!("call-{index}"),
            name: "lookup".to_owned(),
            early: false,
            provider_async: false,
        });
        events.push(DeltaEvent::ToolcallDelta {
            index,
            delta: r#"{"data":""#.to_owned(),
        });
        for _ in 2..per_call {
            events.push(DeltaEvent::ToolcallDelta {
                index,
                delta: "abcd".to_owned(),
            });
        }
        events.push(DeltaEvent::ToolcallDelta {
            index,
            delta: r#""}"#.to_owned(),
        });
        events.push(DeltaEvent::ToolcallEnd { index, arguments: None });
    }
    events.push(done(DoneReason::ToolUse));
    events
}

fn apply_all(events: Vec<DeltaEvent>) -> Accumulator {
    let mut accumulator = Accumulator::new();
    for event in events {
        accumulator.apply(event).expect("a valid response");
    }
    accumulator
}

fn text_deltas(c: &mut Criterion) {
    let mut group = c.benchmark_group("accumulator/text_deltas");
    for n in [1_000, 100_000] {
        let events = text_response(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &events, |b, events| {
            b.iter_batched(|| events.clone(), apply_all, BatchSize::LargeInput);
        });
    }
    group.finish();
}

fn call_deltas(c: &mut Criterion) {
    let mut group = c.benchmark_group("accumulator/toolcall_args");
    for calls in [10, 1_000] {
        let events = call_response(calls, 100);
        group.throughput(Throughput::Elements((calls * 100) as u64));
        group.bench_with_input(BenchmarkId::new("calls_x100", calls), &events, |b, events| {
            b.iter_batched(|| events.clone(), apply_all, BatchSize::LargeInput);
        });
    }
    group.finish();
}

fn seal_and_read(c: &mut Criterion) {
    let accumulator = apply_all(call_response(100, 100));
    c.bench_function("accumulator/tool_call_read", |b| {
        b.iter(|| accumulator.tool_call(std::hint::black_box(50)));
    });
    c.bench_function("accumulator/snapshot_100_calls", |b| b.iter(|| accumulator.snapshot()));
}

criterion_group!(benches, text_deltas, call_deltas, seal_and_read);
criterion_main!(benches);
