//! contract §2: applying a delta costs O(delta length), not O(message length).
//!
//! Measured deterministically, without clocks: a counting global allocator records the allocations made on the
//! measuring thread while the accumulator applies pre-built delta events (the events' own strings are allocated
//! before counting starts, so only the accumulator's work is counted). Rebuilding or cloning the message per delta
//! would allocate O(n²) bytes for n deltas; appending in place allocates O(n) in total.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use headstart_core::{Accumulator, ContentBlock, DeltaEvent, DoneReason, ToolArguments, Usage};

struct CountingAllocator;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    static BYTES: Cell<usize> = const { Cell::new(0) };
}

fn record(bytes: usize) {
    // `try_with`: the allocator may run while thread-locals are being torn down.
    let counting = COUNTING.try_with(Cell::get).unwrap_or(false);
    if counting {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        let _ = BYTES.try_with(|n| n.set(n.get() + bytes));
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting only touches const-initialized
// thread-locals without destructors, which never allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Counted as a fresh allocation of the new size: an upper bound on the bytes a growth can copy.
        record(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Allocations made on this thread while `f` runs.
#[derive(Debug, Clone, Copy)]
struct Cost {
    allocations: usize,
    bytes: usize,
}

fn measure(f: impl FnOnce()) -> Cost {
    ALLOCATIONS.with(|n| n.set(0));
    BYTES.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    Cost {
        allocations: ALLOCATIONS.with(Cell::get),
        bytes: BYTES.with(Cell::get),
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Text,
    Thinking,
    ToolCall,
}

const OPEN: &str = "{\"k\":\"";
const CLOSE: &str = "\"}";

/// Streams `n` one-char deltas into one block of `kind` (plus, for a tool call, the two deltas that make the text a
/// JSON object), returns the cost of applying the deltas and of the block's end, and checks the result.
fn stream(kind: Kind, n: usize) -> (Cost, Cost) {
    let mut acc = Accumulator::new();
    acc.apply(DeltaEvent::Start {
        model: None,
        response_id: None,
    })
    .unwrap();
    let (opener, end) = match kind {
        Kind::Text => (DeltaEvent::TextStart { index: 0 }, DeltaEvent::TextEnd { index: 0 }),
        Kind::Thinking => (
            DeltaEvent::ThinkingStart { index: 0 },
            DeltaEvent::ThinkingEnd {
                index: 0,
                signature: None,
            },
        ),
        Kind::ToolCall => (
            DeltaEvent::ToolcallStart {
                index: 0,
                id: "c".into(),
                name: "t".into(),
                early: false,
                provider_async: false,
            },
            DeltaEvent::ToolcallEnd {
                index: 0,
                arguments: None,
            },
        ),
    };
    acc.apply(opener).unwrap();

    let delta = |text: &str| match kind {
        Kind::Text => DeltaEvent::TextDelta {
            index: 0,
            delta: text.to_owned(),
        },
        Kind::Thinking => DeltaEvent::ThinkingDelta {
            index: 0,
            delta: text.to_owned(),
        },
        Kind::ToolCall => DeltaEvent::ToolcallDelta {
            index: 0,
            delta: text.to_owned(),
        },
    };
    let mut deltas: Vec<DeltaEvent> = Vec::with_capacity(n + 2);
    if let Kind::ToolCall = kind {
        deltas.push(delta(OPEN));
    }
    deltas.extend((0..n).map(|_| delta("a")));
    if let Kind::ToolCall = kind {
        deltas.push(delta(CLOSE));
    }

    let deltas_cost = measure(|| {
        for event in deltas {
            acc.apply(event).unwrap();
        }
    });
    let end_cost = measure(|| {
        acc.apply(end).unwrap();
    });
    acc.apply(DeltaEvent::Done {
        stop_reason: DoneReason::Stop,
        usage: Usage::default(),
    })
    .unwrap();

    let expected_text = "a".repeat(n);
    match (kind, &acc.snapshot().content[..]) {
        (Kind::Text, [ContentBlock::Text { text }]) => assert_eq!(text, &expected_text),
        (Kind::Thinking, [ContentBlock::Thinking { thinking, .. }]) => assert_eq!(thinking, &expected_text),
        (Kind::ToolCall, [ContentBlock::ToolCall(call)]) => {
            let ToolArguments::Valid(map) = &call.arguments else {
                panic!("arguments should be valid: {:?}", call.arguments)
            };
            assert_eq!(map["k"].as_str(), Some(expected_text.as_str()));
        }
        (kind, content) => panic!("unexpected content for {kind:?}: {content:?}"),
    }
    (deltas_cost, end_cost)
}

/// Bytes allocated stay within a constant factor of the text length, and the per-delta cost does not grow with the
/// number of deltas.
fn assert_linear(kind: Kind) {
    const SMALL: usize = 10_000;
    const LARGE: usize = 100_000;
    const SLACK: usize = 4096;
    let (small, small_end) = stream(kind, SMALL);
    let (large, large_end) = stream(kind, LARGE);
    let text_len = |n: usize| match kind {
        Kind::ToolCall => n + OPEN.len() + CLOSE.len(),
        Kind::Text | Kind::Thinking => n,
    };

    for (n, cost) in [(SMALL, small), (LARGE, large)] {
        assert!(
            cost.bytes < 8 * text_len(n) + SLACK,
            "{kind:?}: {n} deltas allocated {} bytes, not O(n): {cost:?}",
            cost.bytes
        );
    }
    let per_delta = |cost: Cost, n: usize| cost.bytes as f64 / n as f64;
    assert!(
        per_delta(large, LARGE) <= 2.0 * per_delta(small, SMALL),
        "{kind:?}: per-delta bytes grew from {:.3} ({SMALL} deltas) to {:.3} ({LARGE} deltas)",
        per_delta(small, SMALL),
        per_delta(large, LARGE)
    );
    let allocations_per_delta = |cost: Cost, n: usize| cost.allocations as f64 / n as f64;
    assert!(
        allocations_per_delta(large, LARGE) <= 2.0 * allocations_per_delta(small, SMALL) + 0.01,
        "{kind:?}: per-delta allocations grew: {small:?} for {SMALL}, {large:?} for {LARGE}"
    );

    // Sealing the block is O(message) once, not per delta.
    for (n, cost) in [(SMALL, small_end), (LARGE, large_end)] {
        assert!(
            cost.bytes < 8 * text_len(n) + SLACK,
            "{kind:?}: ending a block of {n} deltas allocated {} bytes: {cost:?}",
            cost.bytes
        );
    }
}

#[test]
fn text_deltas_are_accumulated_in_linear_time() {
    assert_linear(Kind::Text);
}

#[test]
fn thinking_deltas_are_accumulated_in_linear_time() {
    assert_linear(Kind::Thinking);
}

#[test]
fn tool_call_argument_deltas_are_accumulated_in_linear_time() {
    assert_linear(Kind::ToolCall);
}

/// The measurement itself can fail: cloning the accumulated text on every delta, as a quadratic implementation
/// would, blows the bound.
#[test]
fn the_bound_rejects_a_quadratic_accumulation() {
    const N: usize = 10_000;
    let deltas: Vec<String> = (0..N).map(|_| "a".to_owned()).collect();
    let mut snapshots = 0usize;
    let cost = measure(|| {
        let mut text = String::new();
        for delta in deltas {
            text.push_str(&delta);
            snapshots += text.clone().len();
        }
    });
    assert!(snapshots > 0);
    assert!(cost.bytes >= 8 * N + 4096, "{cost:?}");
}
