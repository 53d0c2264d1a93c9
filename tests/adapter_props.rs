//! Property test of the whole stream adapter (`Engine::wrap`): arbitrary event sequences — well-formed responses
//! with random interleavings and mutations, and plain garbage — with model errors mid-stream, external
//! cancellation, and scripted tools that succeed, fail, panic, hang until cancelled or time out.
//!
//! Each case runs on a paused clock against an in-memory SQLite store, and `adapter_harness::run` checks the
//! invariants listed there: no panic, `turn_end` last, every admitted call and every stored call has exactly one
//! result, no call executes before its owner is stored, no call executes twice.

mod adapter_harness;

use adapter_harness::{decode, quiet_scripted_panics, run, Script, Step, Summary, ARG_PIECES, CALL_IDS, TOOL_NAMES};
use headstart::core::{DoneReason, ErrorReason, Usage};
use headstart::{DeltaEvent, ModelError};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::json;

// ---------------------------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------------------------

fn call_id() -> impl Strategy<Value = String> {
    prop::sample::select(&CALL_IDS[..]).prop_map(str::to_owned)
}

fn tool_name() -> impl Strategy<Value = String> {
    prop::sample::select(&TOOL_NAMES[..]).prop_map(str::to_owned)
}

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(&ARG_PIECES[..]).prop_map(str::to_owned),
        1 => any::<String>(),
    ]
}

/// A call's argument deltas: mostly a valid object split at a random point, sometimes random pieces.
fn argument_deltas() -> impl Strategy<Value = Vec<String>> {
    let valid = prop::sample::select(&ARG_PIECES[..4]);
    prop_oneof![
        3 => (valid, any::<Index>()).prop_map(|(text, at)| {
            let at = at.index(text.len() + 1);
            vec![text[..at].to_owned(), text[at..].to_owned()]
        }),
        1 => prop::collection::vec(piece(), 0..4),
    ]
}

fn arguments_override() -> impl Strategy<Value = Option<serde_json::Value>> {
    prop_oneof![
        6 => Just(None),
        1 => Just(Some(json!({"x": 7, "k": "b"}))),
        1 => Just(Some(json!("not an object"))),
    ]
}

/// One content block's own events, in order (open, deltas, close).
fn block(index: usize) -> impl Strategy<Value = Vec<DeltaEvent>> {
    let deltas = || prop::collection::vec(piece(), 0..4);
    prop_oneof![
        1 => deltas().prop_map(move |deltas| {
            let mut events = vec![DeltaEvent::TextStart { index }];
            events.extend(deltas.into_iter().map(|delta| DeltaEvent::TextDelta { index, delta }));
            events.push(DeltaEvent::TextEnd { index });
            events
        }),
        1 => (deltas(), proptest::option::of("[a-z]{0,4}")).prop_map(move |(deltas, signature)| {
            let mut events = vec![DeltaEvent::ThinkingStart { index }];
            events.extend(deltas.into_iter().map(|delta| DeltaEvent::ThinkingDelta { index, delta }));
            events.push(DeltaEvent::ThinkingEnd { index, signature });
            events
        }),
        3 => (call_id(), tool_name(), any::<bool>(), argument_deltas(), arguments_override()).prop_map(
            move |(id, name, early, deltas, arguments)| {
                let mut events = vec![DeltaEvent::ToolcallStart { index, id, name, early, provider_async: false }];
                events.extend(deltas.into_iter().map(|delta| DeltaEvent::ToolcallDelta { index, delta }));
                events.push(DeltaEvent::ToolcallEnd { index, arguments });
                events
            }
        ),
    ]
}

fn usage() -> impl Strategy<Value = Usage> {
    (0u64..1000, 0u64..1000).prop_map(|(input, output)| Usage {
        input,
        output,
        ..Usage::default()
    })
}

fn done_reason() -> impl Strategy<Value = DoneReason> {
    prop_oneof![
        3 => Just(DoneReason::ToolUse),
        1 => Just(DoneReason::Stop),
        1 => Just(DoneReason::Length),
    ]
}

fn error_reason() -> impl Strategy<Value = ErrorReason> {
    prop_oneof![Just(ErrorReason::Error), Just(ErrorReason::Aborted)]
}

/// How a stream ends: `done`, an `error` event, a model error, or nothing at all.
fn ending() -> impl Strategy<Value = Vec<Result<DeltaEvent, ModelError>>> {
    prop_oneof![
        6 => (done_reason(), usage()).prop_map(|(stop_reason, usage)| vec![Ok(DeltaEvent::Done { stop_reason, usage })]),
        1 => error_reason().prop_map(|stop_reason| vec![Ok(DeltaEvent::Error {
            stop_reason,
            message: "the provider failed".into(),
            usage: None,
            kind: None,
        })]),
        1 => any::<bool>().prop_map(|aborted| {
            let reset = "connection reset";
            vec![Err(if aborted { ModelError::aborted(reset) } else { ModelError::transport(reset) })]
        }),
        1 => Just(Vec::new()),
    ]
}

/// Any single event, addressed anywhere near the real blocks.
fn any_event() -> impl Strategy<Value = DeltaEvent> {
    let index = || 0usize..6;
    prop_oneof![
        1 => Just(DeltaEvent::Start { model: None, response_id: None }),
        1 => index().prop_map(|index| DeltaEvent::TextStart { index }),
        1 => (index(), piece()).prop_map(|(index, delta)| DeltaEvent::TextDelta { index, delta }),
        1 => index().prop_map(|index| DeltaEvent::TextEnd { index }),
        1 => index().prop_map(|index| DeltaEvent::ThinkingStart { index }),
        1 => (index(), piece()).prop_map(|(index, delta)| DeltaEvent::ThinkingDelta { index, delta }),
        1 => index().prop_map(|index| DeltaEvent::ThinkingEnd { index, signature: None }),
        2 => (index(), call_id(), tool_name(), any::<bool>())
            .prop_map(|(index, id, name, early)| DeltaEvent::ToolcallStart { index, id, name, early, provider_async: false }),
        2 => (index(), piece()).prop_map(|(index, delta)| DeltaEvent::ToolcallDelta { index, delta }),
        2 => (index(), arguments_override()).prop_map(|(index, arguments)| DeltaEvent::ToolcallEnd { index, arguments }),
        1 => (done_reason(), usage()).prop_map(|(stop_reason, usage)| DeltaEvent::Done { stop_reason, usage }),
        1 => error_reason().prop_map(|stop_reason| DeltaEvent::Error {
            stop_reason,
            message: "late error".into(),
            usage: None,
            kind: None,
        }),
    ]
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete,
    Duplicate,
    SwapWithNext,
    Insert(DeltaEvent),
    InsertModelError,
    Reindex(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => Just(Mutation::Delete),
        1 => Just(Mutation::Duplicate),
        1 => Just(Mutation::SwapWithNext),
        2 => any_event().prop_map(Mutation::Insert),
        1 => Just(Mutation::InsertModelError),
        1 => (0usize..6).prop_map(Mutation::Reindex),
    ]
}

fn apply(items: &mut Vec<Result<DeltaEvent, ModelError>>, at: Index, mutation: Mutation) {
    if items.is_empty() {
        return;
    }
    let i = at.index(items.len());
    match mutation {
        Mutation::Delete => {
            let _ = items.remove(i);
        }
        Mutation::Duplicate => items.insert(i, items[i].clone()),
        Mutation::SwapWithNext if i + 1 < items.len() => items.swap(i, i + 1),
        Mutation::SwapWithNext => {}
        Mutation::Insert(event) => items.insert(i, Ok(event)),
        Mutation::InsertModelError => items.insert(i, Err(ModelError::new("mid-stream failure"))),
        Mutation::Reindex(index) => {
            if let Ok(event) = &items[i] {
                items[i] = Ok(event.clone().with_index(index));
            }
        }
    }
}

/// Interleaves the blocks' own event lists: each step continues one already-open block or opens the next one, so
/// blocks still start in index order (as contract §2 requires) while their deltas and ends interleave freely.
fn interleave(blocks: Vec<Vec<DeltaEvent>>, choices: &[usize]) -> Vec<DeltaEvent> {
    let mut cursors = vec![0usize; blocks.len()];
    let mut opened = 0usize;
    let mut out = Vec::new();
    for step in 0.. {
        let candidates: Vec<usize> = (0..blocks.len())
            .filter(|&b| (b < opened && cursors[b] < blocks[b].len()) || b == opened)
            .collect();
        if candidates.is_empty() {
            break;
        }
        let pick = candidates[choices.get(step).copied().unwrap_or(0) % candidates.len()];
        if pick == opened {
            opened += 1;
        }
        out.push(blocks[pick][cursors[pick]].clone());
        cursors[pick] += 1;
    }
    out
}

/// A plausible response: `start`, interleaved blocks, an ending; then up to three mutations.
fn well_formed_ish() -> impl Strategy<Value = Vec<Result<DeltaEvent, ModelError>>> {
    (0usize..6)
        .prop_flat_map(|blocks| {
            (
                (0..blocks).map(block).collect::<Vec<_>>(),
                prop::collection::vec(0usize..4, 0..40),
                ending(),
                prop_oneof![
                    3 => Just(Vec::new()),
                    2 => prop::collection::vec((any::<Index>(), mutation()), 1..4),
                ],
            )
        })
        .prop_map(|(blocks, choices, ending, mutations)| {
            let mut items = vec![Ok(DeltaEvent::Start {
                model: None,
                response_id: None,
            })];
            items.extend(interleave(blocks, &choices).into_iter().map(Ok));
            items.extend(ending);
            for (at, mutation) in mutations {
                apply(&mut items, at, mutation);
            }
            items
        })
}

/// Garbage: any events in any order, with the odd model error.
fn garbage() -> impl Strategy<Value = Vec<Result<DeltaEvent, ModelError>>> {
    prop::collection::vec(
        prop_oneof![
            12 => any_event().prop_map(Ok),
            1 => Just(Err(ModelError::aborted("garbage abort"))),
        ],
        0..16,
    )
}

fn script() -> impl Strategy<Value = Script> {
    (
        prop_oneof![4 => well_formed_ish(), 1 => garbage()],
        prop::collection::vec(prop_oneof![2 => Just(0u64), 3 => 1u64..30], 1..16),
        prop_oneof![3 => Just(None), 1 => (0u64..400).prop_map(Some)],
        prop::bool::weighted(0.25),
        prop_oneof![3 => Just(None), 1 => (1usize..3).prop_map(Some)],
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(items, gaps, cancel_at_ms, sequential, max_in_flight, no_early_execution)| Script {
                steps: items
                    .into_iter()
                    .zip(gaps.iter().cycle())
                    .map(|(item, gap_ms)| Step { gap_ms: *gap_ms, item })
                    .collect(),
                cancel_at_ms,
                sequential,
                max_in_flight,
                no_early_execution,
            },
        )
}

// ---------------------------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_event_sequences_keep_the_adapter_invariants(script in script()) {
        quiet_scripted_panics();
        if let Err(failures) = run(&script) {
            prop_assert!(false, "invariants broken: {failures:#?}");
        }
    }

    /// The fuzz target's byte decoder, run here so it stays compiled and sound in the normal suite.
    #[test]
    fn decoded_byte_scripts_keep_the_adapter_invariants(data in prop::collection::vec(any::<u8>(), 0..96)) {
        quiet_scripted_panics();
        if let Err(failures) = run(&decode(&data)) {
            prop_assert!(false, "invariants broken: {failures:#?}");
        }
    }
}

/// The generator is not degenerate: over a fixed sample, calls execute (early and at the end), responses commit
/// several fragments, and some responses fail.
#[test]
fn the_generator_reaches_executions_commits_and_failures() {
    quiet_scripted_panics();
    let mut runner = TestRunner::deterministic();
    let strategy = script();
    let mut total = Summary::default();
    let (mut multi_fragment, mut failed, mut clean) = (0, 0, 0);
    for _ in 0..96 {
        let script = strategy.new_tree(&mut runner).expect("a script").current();
        let summary = run(&script).unwrap_or_else(|failures| panic!("{failures:#?}\n{script:#?}"));
        total.executed += summary.executed;
        total.admitted += summary.admitted;
        multi_fragment += usize::from(summary.fragments > 1);
        failed += usize::from(summary.failed);
        clean += usize::from(!summary.failed);
    }
    println!("over 96 scripts: {total:?}, {multi_fragment} multi-fragment, {failed} failed, {clean} clean");
    assert!(total.executed >= 20, "{total:?}");
    assert!(
        total.admitted > total.executed,
        "some calls end without executing: {total:?}"
    );
    assert!(
        multi_fragment >= 5,
        "{multi_fragment} responses committed several fragments"
    );
    assert!(failed >= 10 && clean >= 10, "{failed} failed, {clean} clean");
}
