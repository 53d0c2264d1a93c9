//! Unit tests of the pure scheduler (contract §4): one hand-written test per rule, then an exhaustive model check over
//! every small configuration and every interleaving of the environment's choices.

use std::collections::HashMap;
use std::time::Instant;

use super::Action::{Prepare, Start};
use super::*;
use crate::config::ExecutionMode::{Parallel, Sequential};

/// Runs `next_action` until it returns `None`, as the engine does after every change.
fn drain(scheduler: &mut Scheduler) -> Vec<Action> {
    let mut actions = Vec::new();
    while let Some(action) = scheduler.next_action() {
        actions.push(action);
        assert!(actions.len() <= 1_000, "next_action never returns None: {actions:?}");
    }
    actions
}

fn runnable() -> Prepared {
    Prepared::Runnable(None)
}

fn keyed(key: &str) -> Prepared {
    Prepared::Runnable(Some(key.to_string()))
}

// ---------------------------------------------------------------------------------------------------------------
// Hand-written tests, one per rule.
// ---------------------------------------------------------------------------------------------------------------

/// §4.1: preparation runs one call at a time, in source order.
#[test]
fn s4_1_preparation_runs_one_call_at_a_time_in_source_order() {
    let mut s = Scheduler::new(Parallel, None);
    assert_eq!(s.admit(3, false), 0..3);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    // Nothing else happens while call 0 is being prepared.
    assert_eq!(drain(&mut s), []);
    s.prepared(0, runnable());
    assert_eq!(drain(&mut s), [Start(0), Prepare(1)]);
    s.prepared(1, runnable());
    assert_eq!(drain(&mut s), [Start(1), Prepare(2)]);
    s.prepared(2, runnable());
    assert_eq!(drain(&mut s), [Start(2)]);
    for call in 0..3 {
        assert!(!s.is_idle());
        s.finished(call);
        assert_eq!(drain(&mut s), []);
    }
    assert!(s.is_idle());
}

/// §4.1: the one-at-a-time source-order preparation spans batches: a batch admitted while an earlier call is being
/// prepared waits for it, and its calls are numbered after the earlier batches' calls.
#[test]
fn s4_1_preparation_in_source_order_across_batches() {
    let mut s = Scheduler::new(Parallel, None);
    assert_eq!(s.admit(2, false), 0..2);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    assert_eq!(s.admit(2, false), 2..4);
    assert_eq!(drain(&mut s), []);
    s.prepared(0, runnable());
    assert_eq!(drain(&mut s), [Start(0), Prepare(1)]);
    s.prepared(1, Prepared::Settled);
    assert_eq!(drain(&mut s), [Prepare(2)]);
    s.prepared(2, runnable());
    assert_eq!(drain(&mut s), [Start(2), Prepare(3)]);
    s.prepared(3, runnable());
    assert_eq!(drain(&mut s), [Start(3)]);
    assert_eq!(s.batches().collect::<Vec<_>>(), [0..2, 2..4]);
    assert_eq!(s.len(), 4);
}

/// §4.1/§4.2: in parallel mode a call is prepared as soon as every earlier call is prepared, without waiting for
/// an execution slot.
#[test]
fn s4_1_parallel_preparation_does_not_wait_for_a_slot() {
    let mut s = Scheduler::new(Parallel, Some(1));
    s.admit(3, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, runnable());
    assert_eq!(drain(&mut s), [Start(0), Prepare(1)]);
    s.prepared(1, runnable());
    // The only slot is taken by call 0: call 1 waits to start, but call 2 is prepared anyway.
    assert_eq!(drain(&mut s), [Prepare(2)]);
    s.prepared(2, runnable());
    assert_eq!(drain(&mut s), []);
    s.finished(0);
    assert_eq!(drain(&mut s), [Start(1)]);
    s.finished(1);
    assert_eq!(drain(&mut s), [Start(2)]);
    s.finished(2);
    assert!(s.is_idle());
}

/// §4.2: in parallel mode a prepared call starts at once, and bodies overlap across batches.
#[test]
fn s4_2_parallel_starts_prepared_calls_at_once_across_batches() {
    let mut s = Scheduler::new(Parallel, None);
    s.admit(1, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, runnable());
    assert_eq!(drain(&mut s), [Start(0)]);
    // Call 0 still runs when the next batch arrives; its calls are prepared and started right away.
    assert_eq!(s.admit(2, false), 1..3);
    assert_eq!(drain(&mut s), [Prepare(1)]);
    s.prepared(1, runnable());
    assert_eq!(drain(&mut s), [Start(1), Prepare(2)]);
    s.prepared(2, runnable());
    assert_eq!(drain(&mut s), [Start(2)]);
    // Bodies end in any order.
    s.finished(2);
    s.finished(0);
    assert!(!s.is_idle());
    s.finished(1);
    assert_eq!(drain(&mut s), []);
    assert!(s.is_idle());
}

/// §4.3: sequential mode prepares a call only after every earlier call settled, and runs one call at a time.
#[test]
fn s4_3_sequential_one_call_at_a_time_in_source_order() {
    let mut s = Scheduler::new(Sequential, None);
    s.admit(3, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, runnable());
    // Call 1 is not prepared while call 0 runs.
    assert_eq!(drain(&mut s), [Start(0)]);
    assert_eq!(drain(&mut s), []);
    s.finished(0);
    assert_eq!(drain(&mut s), [Prepare(1)]);
    // An immediate outcome settles the call: the next one is prepared at once.
    s.prepared(1, Prepared::Settled);
    assert_eq!(drain(&mut s), [Prepare(2)]);
    s.prepared(2, runnable());
    assert_eq!(drain(&mut s), [Start(2)]);
    s.finished(2);
    assert_eq!(drain(&mut s), []);
    assert!(s.is_idle());
}

/// §4.3: sequential mode holds across batches: a later batch waits until the earlier batches' calls settled.
#[test]
fn s4_3_sequential_across_batches() {
    let mut s = Scheduler::new(Sequential, None);
    s.admit(1, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, runnable());
    assert_eq!(drain(&mut s), [Start(0)]);
    s.admit(2, false);
    assert_eq!(drain(&mut s), []);
    s.finished(0);
    assert_eq!(drain(&mut s), [Prepare(1)]);
    s.prepared(1, runnable());
    assert_eq!(drain(&mut s), [Start(1)]);
    s.finished(1);
    assert_eq!(drain(&mut s), [Prepare(2)]);
    s.prepared(2, runnable());
    assert_eq!(drain(&mut s), [Start(2)]);
    s.finished(2);
    assert!(s.is_idle());
}

/// §4.3: sequential mode ignores conflict keys and `max_in_flight`: it is one at a time anyway.
#[test]
fn s4_3_sequential_with_different_keys_still_one_at_a_time() {
    let mut s = Scheduler::new(Sequential, Some(4));
    s.admit(2, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, keyed("a"));
    assert_eq!(drain(&mut s), [Start(0)]);
    assert_eq!(drain(&mut s), []);
    s.finished(0);
    assert_eq!(drain(&mut s), [Prepare(1)]);
    s.prepared(1, keyed("b"));
    assert_eq!(drain(&mut s), [Start(1)]);
}

/// §4.4: a fenced batch waits until every earlier batch settled before its first call is even prepared.
#[test]
fn s4_4_fence_waits_until_earlier_batches_settled() {
    let mut s = Scheduler::new(Parallel, None);
    s.admit(2, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, runnable());
    assert_eq!(drain(&mut s), [Start(0), Prepare(1)]);
    assert_eq!(s.admit(1, true), 2..3);
    s.prepared(1, runnable());
    assert_eq!(drain(&mut s), [Start(1)]);
    s.finished(1);
    assert_eq!(drain(&mut s), []);
    s.finished(0);
    assert_eq!(drain(&mut s), [Prepare(2)]);
    s.prepared(2, runnable());
    assert_eq!(drain(&mut s), [Start(2)]);
}

/// §4.4: a fenced batch runs its calls one at a time, each prepared after the previous one settled.
#[test]
fn s4_4_fence_runs_its_calls_one_at_a_time() {
    let mut s = Scheduler::new(Parallel, None);
    s.admit(3, true);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, runnable());
    assert_eq!(drain(&mut s), [Start(0)]);
    assert_eq!(drain(&mut s), []);
    s.finished(0);
    assert_eq!(drain(&mut s), [Prepare(1)]);
    s.prepared(1, Prepared::Settled);
    assert_eq!(drain(&mut s), [Prepare(2)]);
    // Different (or no) keys do not allow overlap inside a fence.
    s.prepared(2, keyed("x"));
    assert_eq!(drain(&mut s), [Start(2)]);
    s.finished(2);
    assert!(s.is_idle());
}

/// §4.4: batches after a fence are not even prepared until the fence has settled; then parallel mode resumes.
#[test]
fn s4_4_later_batches_not_prepared_until_fence_settled() {
    let mut s = Scheduler::new(Parallel, None);
    s.admit(2, true);
    s.admit(2, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, runnable());
    assert_eq!(drain(&mut s), [Start(0)]);
    s.finished(0);
    assert_eq!(drain(&mut s), [Prepare(1)]);
    s.prepared(1, runnable());
    assert_eq!(drain(&mut s), [Start(1)]);
    // A batch admitted while the fence runs waits too.
    assert_eq!(s.admit(1, false), 4..5);
    assert_eq!(drain(&mut s), []);
    s.finished(1);
    assert_eq!(drain(&mut s), [Prepare(2)]);
    s.prepared(2, runnable());
    assert_eq!(drain(&mut s), [Start(2), Prepare(3)]);
    s.prepared(3, runnable());
    assert_eq!(drain(&mut s), [Start(3), Prepare(4)]);
    s.prepared(4, runnable());
    assert_eq!(drain(&mut s), [Start(4)]);
}

/// §4.4: a fence whose only call settles in preparation releases the later batches at once.
#[test]
fn s4_4_fence_settled_in_preparation_releases_later_batches() {
    let mut s = Scheduler::new(Parallel, None);
    s.admit(1, true);
    s.admit(1, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, Prepared::Settled);
    assert_eq!(drain(&mut s), [Prepare(1)]);
}

/// §4.4: two consecutive fences: the second waits for the first, and both run one call at a time.
#[test]
fn s4_4_consecutive_fences() {
    let mut s = Scheduler::new(Parallel, None);
    s.admit(1, true);
    s.admit(1, true);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, runnable());
    assert_eq!(drain(&mut s), [Start(0)]);
    assert_eq!(drain(&mut s), []);
    s.finished(0);
    assert_eq!(drain(&mut s), [Prepare(1)]);
    s.prepared(1, runnable());
    assert_eq!(drain(&mut s), [Start(1)]);
}

/// §4.5: calls with equal keys run in source order, one after the other.
#[test]
fn s4_5_equal_keys_run_in_source_order() {
    let mut s = Scheduler::new(Parallel, None);
    s.admit(3, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, keyed("a"));
    assert_eq!(drain(&mut s), [Start(0), Prepare(1)]);
    s.prepared(1, keyed("a"));
    assert_eq!(drain(&mut s), [Prepare(2)]);
    s.prepared(2, keyed("a"));
    assert_eq!(drain(&mut s), []);
    s.finished(0);
    assert_eq!(drain(&mut s), [Start(1)]);
    s.finished(1);
    assert_eq!(drain(&mut s), [Start(2)]);
}

/// §4.5: calls with different keys run in parallel.
#[test]
fn s4_5_different_keys_run_in_parallel() {
    let mut s = Scheduler::new(Parallel, None);
    s.admit(2, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, keyed("a"));
    assert_eq!(drain(&mut s), [Start(0), Prepare(1)]);
    s.prepared(1, keyed("b"));
    assert_eq!(drain(&mut s), [Start(1)]);
}

/// §4.5: a call without a key conflicts with nothing (neither with keyed calls nor with other unkeyed ones).
#[test]
fn s4_5_call_without_key_conflicts_with_nothing() {
    let mut s = Scheduler::new(Parallel, None);
    s.admit(3, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, keyed("a"));
    assert_eq!(drain(&mut s), [Start(0), Prepare(1)]);
    s.prepared(1, runnable());
    assert_eq!(drain(&mut s), [Start(1), Prepare(2)]);
    s.prepared(2, runnable());
    assert_eq!(drain(&mut s), [Start(2)]);
}

/// §4.5: a later call overtakes an earlier one that is blocked on its key.
#[test]
fn s4_5_later_call_overtakes_one_blocked_on_a_key() {
    let mut s = Scheduler::new(Parallel, None);
    s.admit(4, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, keyed("a"));
    assert_eq!(drain(&mut s), [Start(0), Prepare(1)]);
    s.prepared(1, keyed("a"));
    assert_eq!(drain(&mut s), [Prepare(2)]);
    s.prepared(2, keyed("b"));
    assert_eq!(drain(&mut s), [Start(2), Prepare(3)]);
    s.prepared(3, runnable());
    assert_eq!(drain(&mut s), [Start(3)]);
    s.finished(0);
    assert_eq!(drain(&mut s), [Start(1)]);
}

/// §4.5: keys are compared across batches (and across tools: the scheduler only sees the key).
#[test]
fn s4_5_keys_compared_across_batches() {
    let mut s = Scheduler::new(Parallel, None);
    s.admit(1, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, keyed("a"));
    assert_eq!(drain(&mut s), [Start(0)]);
    s.admit(1, false);
    assert_eq!(drain(&mut s), [Prepare(1)]);
    s.prepared(1, keyed("a"));
    assert_eq!(drain(&mut s), []);
    s.finished(0);
    assert_eq!(drain(&mut s), [Start(1)]);
}

/// §4.5: a call waiting on its key does not hold back a same-key call that settled in preparation, nor is it
/// blocked by one: an immediate outcome never executes, so it holds no key.
#[test]
fn s4_5_settled_call_holds_no_key() {
    let mut s = Scheduler::new(Parallel, None);
    s.admit(2, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, Prepared::Settled);
    assert_eq!(drain(&mut s), [Prepare(1)]);
    s.prepared(1, keyed("a"));
    assert_eq!(drain(&mut s), [Start(1)]);
}

/// §4.6: `max_in_flight` bounds the running calls; waiting calls start in source order as slots free up.
#[test]
fn s4_6_max_in_flight_bounds_running_calls() {
    let mut s = Scheduler::new(Parallel, Some(2));
    s.admit(4, false);
    let mut actions = Vec::new();
    for call in 0..4 {
        actions.extend(drain(&mut s));
        s.prepared(call, runnable());
    }
    actions.extend(drain(&mut s));
    assert_eq!(
        actions,
        [Prepare(0), Start(0), Prepare(1), Start(1), Prepare(2), Prepare(3)]
    );
    s.finished(1);
    assert_eq!(drain(&mut s), [Start(2)]);
    s.finished(0);
    assert_eq!(drain(&mut s), [Start(3)]);
    s.finished(2);
    s.finished(3);
    assert_eq!(drain(&mut s), []);
    assert!(s.is_idle());
}

/// §4.6 with §4.5: a slot freed while the next waiting call is blocked on its key goes to a later call.
#[test]
fn s4_6_free_slot_goes_to_first_call_not_blocked_on_a_key() {
    let mut s = Scheduler::new(Parallel, Some(2));
    s.admit(4, false);
    let outcomes = [keyed("a"), runnable(), keyed("a"), keyed("b")];
    let mut actions = Vec::new();
    for (call, outcome) in outcomes.into_iter().enumerate() {
        actions.extend(drain(&mut s));
        s.prepared(call, outcome);
    }
    actions.extend(drain(&mut s));
    assert_eq!(
        actions,
        [Prepare(0), Start(0), Prepare(1), Start(1), Prepare(2), Prepare(3)]
    );
    s.finished(1);
    // Call 2 waits for call 0 (key "a"); call 3 takes the slot.
    assert_eq!(drain(&mut s), [Start(3)]);
    s.finished(0);
    assert_eq!(drain(&mut s), [Start(2)]);
}

/// §4.1/§4.6: an immediate outcome is recorded at preparation and occupies no slot.
#[test]
fn s4_6_immediate_outcome_occupies_no_slot() {
    let mut s = Scheduler::new(Parallel, Some(1));
    s.admit(3, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, Prepared::Settled);
    assert_eq!(drain(&mut s), [Prepare(1)]);
    s.prepared(1, runnable());
    assert_eq!(drain(&mut s), [Start(1), Prepare(2)]);
    // The slot is full, yet call 2 is prepared and settles without one.
    s.prepared(2, Prepared::Settled);
    assert_eq!(drain(&mut s), []);
    s.finished(1);
    assert!(s.is_idle());
}

/// §4.6: a bound of 0 is treated as 1 (otherwise nothing could ever run).
#[test]
fn s4_6_max_in_flight_zero_is_treated_as_one() {
    let mut s = Scheduler::new(Parallel, Some(0));
    s.admit(2, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, runnable());
    assert_eq!(drain(&mut s), [Start(0), Prepare(1)]);
    s.prepared(1, runnable());
    assert_eq!(drain(&mut s), []);
    s.finished(0);
    assert_eq!(drain(&mut s), [Start(1)]);
}

/// §3.5: a batch with no calls is ignored everywhere: not listed, numbers nothing, and does not fence.
#[test]
fn s3_5_empty_batch_is_ignored() {
    let mut s = Scheduler::new(Parallel, None);
    assert!(s.is_empty());
    assert_eq!(s.admit(0, true), 0..0);
    assert!(s.is_empty());
    assert!(s.is_idle());
    assert_eq!(s.batches().count(), 0);
    assert_eq!(drain(&mut s), []);
    assert_eq!(s.admit(1, false), 0..1);
    assert_eq!(s.admit(0, true), 1..1);
    assert_eq!(s.admit(1, false), 1..2);
    assert_eq!(s.batches().collect::<Vec<_>>(), [0..1, 1..2]);
    // The empty "fenced" batch between the two does not make call 1 wait for call 0.
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, runnable());
    assert_eq!(drain(&mut s), [Start(0), Prepare(1)]);
    s.prepared(1, runnable());
    assert_eq!(drain(&mut s), [Start(1)]);
    assert!(!s.is_empty());
    assert_eq!(s.len(), 2);
}

/// §3.5/§5.5: abort returns exactly the calls that never started (queued, preparing, ready), in source order;
/// running calls keep running until they finish, and nothing more is ever scheduled.
#[test]
fn abort_returns_exactly_the_not_started_calls_in_source_order() {
    let mut s = Scheduler::new(Parallel, Some(1));
    s.admit(3, false);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    s.prepared(0, runnable());
    assert_eq!(drain(&mut s), [Start(0), Prepare(1)]);
    s.prepared(1, Prepared::Settled);
    assert_eq!(drain(&mut s), [Prepare(2)]);
    s.prepared(2, runnable()); // ready, waiting for the slot
    s.admit(2, false);
    assert_eq!(drain(&mut s), [Prepare(3)]); // 3 preparing, 4 queued
    assert_eq!(s.abort(), [2, 3, 4]);
    assert_eq!(drain(&mut s), []);
    assert!(!s.is_idle(), "call 0 still runs");
    // A late preparation report changes nothing.
    s.prepared(3, runnable());
    assert_eq!(drain(&mut s), []);
    s.finished(0);
    assert_eq!(drain(&mut s), []);
    assert!(s.is_idle());
    assert_eq!(s.abort(), Vec::<usize>::new());
    assert_eq!(drain(&mut s), []);
}

/// Abort before anything was scheduled returns every admitted call.
#[test]
fn abort_before_any_action_returns_every_call() {
    let mut s = Scheduler::new(Sequential, None);
    s.admit(2, false);
    s.admit(1, true);
    assert_eq!(s.abort(), [0, 1, 2]);
    assert_eq!(drain(&mut s), []);
    assert!(s.is_idle());
}

/// Reports that do not match the call's state are ignored: `finished` for a call that is not running, `prepared`
/// for a call that is not being prepared, and any report for an unknown call.
#[test]
fn reports_on_a_wrong_state_are_ignored() {
    let mut s = Scheduler::new(Parallel, Some(1));
    s.admit(3, false);
    // Unknown calls.
    s.prepared(7, runnable());
    s.finished(7);
    // Queued call 1: neither prepared nor finished.
    s.prepared(1, runnable());
    s.finished(1);
    assert_eq!(drain(&mut s), [Prepare(0)]);
    // Preparing call 0: `finished` is ignored.
    s.finished(0);
    assert_eq!(drain(&mut s), []);
    s.prepared(0, runnable());
    assert_eq!(drain(&mut s), [Start(0), Prepare(1)]);
    // Running call 0: a second `prepared` is ignored (it neither settles nor re-queues it).
    s.prepared(0, Prepared::Settled);
    s.prepared(1, runnable());
    assert_eq!(drain(&mut s), [Prepare(2)]);
    // Ready call 1 (waiting for the slot): `finished` is ignored and frees no slot.
    s.finished(1);
    assert_eq!(drain(&mut s), []);
    s.prepared(2, Prepared::Settled);
    // Settled call 2: reports are ignored.
    s.prepared(2, runnable());
    s.finished(2);
    assert_eq!(drain(&mut s), []);
    s.finished(0);
    assert_eq!(drain(&mut s), [Start(1)]);
    // Finished call 0: a second `finished` does not free another slot.
    s.finished(0);
    assert!(!s.is_idle());
    s.finished(1);
    assert!(s.is_idle());
    assert_eq!(drain(&mut s), []);
}

// ---------------------------------------------------------------------------------------------------------------
// Exhaustive model check.
// ---------------------------------------------------------------------------------------------------------------

/// How a call's preparation ends in a generated case; keys are small numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Settled,
    Runnable(Option<u8>),
}

impl Outcome {
    fn prepared(self) -> Prepared {
        match self {
            Outcome::Settled => Prepared::Settled,
            Outcome::Runnable(key) => Prepared::Runnable(key.map(|k| ((b'a' + k) as char).to_string())),
        }
    }

    fn key(self) -> Option<u8> {
        match self {
            Outcome::Runnable(key) => key,
            Outcome::Settled => None,
        }
    }
}

/// One configuration: mode, bound, batches (length, fenced), and each call's preparation outcome.
#[derive(Debug, Clone)]
struct Case {
    mode: ExecutionMode,
    max_in_flight: Option<usize>,
    batches: Vec<(usize, bool)>,
    outcomes: Vec<Outcome>,
}

/// The model's view of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Model {
    Queued,
    Preparing,
    Ready,
    Running,
    /// Settled; `ran` when its body executed.
    Done {
        ran: bool,
    },
}

#[derive(Clone)]
struct World {
    scheduler: Scheduler,
    /// One entry per admitted call.
    calls: Vec<Model>,
    /// Number of batches admitted.
    admitted: usize,
}

struct Checker<'a> {
    case: &'a Case,
    batch_of: Vec<usize>,
    ranges: Vec<Range<usize>>,
    /// Every state reached, with the number of complete interleavings from it.
    visited: HashMap<(Vec<Model>, Vec<u8>), u64>,
}

impl<'a> Checker<'a> {
    fn new(case: &'a Case) -> Self {
        let mut batch_of = Vec::new();
        let mut ranges = Vec::new();
        for (batch, &(len, _)) in case.batches.iter().enumerate() {
            ranges.push(batch_of.len()..batch_of.len() + len);
            batch_of.extend(std::iter::repeat_n(batch, len));
        }
        Checker {
            case,
            batch_of,
            ranges,
            visited: HashMap::new(),
        }
    }

    fn fenced(&self, batch: usize) -> bool {
        self.case.batches[batch].1
    }

    fn one_at_a_time(&self, call: usize) -> bool {
        self.case.mode == Sequential || self.fenced(self.batch_of[call])
    }

    fn running(world: &World) -> usize {
        world.calls.iter().filter(|&&c| c == Model::Running).count()
    }

    fn all_done(calls: &[Model]) -> bool {
        calls.iter().all(|c| matches!(c, Model::Done { .. }))
    }

    /// Every fenced batch before `batch` has settled.
    fn earlier_fences_settled(&self, world: &World, batch: usize) -> bool {
        (0..batch)
            .filter(|&b| self.fenced(b))
            .all(|b| Self::all_done(&world.calls[self.ranges[b].clone()]))
    }

    /// Checks one action against the rules and applies it to the model.
    fn apply(&self, world: &mut World, action: Action) {
        let case = self.case;
        match action {
            Prepare(call) => {
                assert!(call < world.calls.len(), "prepared call {call} that was not admitted");
                assert_eq!(world.calls[call], Model::Queued, "call {call} prepared twice");
                // §4.1: one at a time, in source order.
                assert!(
                    world.calls[..call]
                        .iter()
                        .all(|c| !matches!(c, Model::Queued | Model::Preparing)),
                    "call {call} prepared before an earlier call was prepared: {:?}",
                    world.calls
                );
                assert!(
                    world.calls[call + 1..].iter().all(|&c| c == Model::Queued),
                    "a later call was prepared before call {call}"
                );
                // §4.3/§4.4: in sequential mode and in a fence, prepared after every earlier call settled (this
                // includes: a fenced batch only after all earlier batches settled).
                if self.one_at_a_time(call) {
                    assert!(
                        Self::all_done(&world.calls[..call]),
                        "call {call} prepared one-at-a-time before the earlier calls settled: {:?}",
                        world.calls
                    );
                }
                // §4.4: no call after a fence is prepared before the fence settled.
                assert!(
                    self.earlier_fences_settled(world, self.batch_of[call]),
                    "call {call} prepared before an earlier fence settled: {:?}",
                    world.calls
                );
                world.calls[call] = Model::Preparing;
            }
            Start(call) => {
                assert!(call < world.calls.len(), "started call {call} that was not admitted");
                assert_eq!(
                    world.calls[call],
                    Model::Ready,
                    "call {call} started but not prepared runnable, or twice"
                );
                let running = Self::running(world);
                // §4.6.
                if let Some(max) = case.max_in_flight {
                    assert!(running < max, "call {call} started with {running} running, max {max}");
                }
                // §4.3: one at a time in source order.
                if case.mode == Sequential {
                    assert_eq!(running, 0, "sequential: call {call} started while another runs");
                    assert!(
                        Self::all_done(&world.calls[..call]),
                        "sequential: call {call} started out of order"
                    );
                }
                // §4.4: while a fenced call runs nothing else runs, and a fenced call runs alone.
                let batch = self.batch_of[call];
                if self.fenced(batch) {
                    assert_eq!(running, 0, "fenced call {call} started while {running} calls run");
                }
                for (other, state) in world.calls.iter().enumerate() {
                    if *state == Model::Running {
                        assert!(
                            !self.fenced(self.batch_of[other]),
                            "call {call} started while fenced call {other} runs"
                        );
                    }
                }
                // §4.5: no two running calls share a key; equal keys start in source order.
                if let Some(key) = case.outcomes[call].key() {
                    for (other, state) in world.calls.iter().enumerate() {
                        if case.outcomes[other].key() != Some(key) {
                            continue;
                        }
                        assert_ne!(
                            *state,
                            Model::Running,
                            "call {call} started while call {other} with its key runs"
                        );
                        if other < call {
                            assert_eq!(
                                *state,
                                Model::Done { ran: true },
                                "call {call} overtook earlier call {other} with the same key"
                            );
                        }
                    }
                }
                world.calls[call] = Model::Running;
            }
        }
    }

    /// Lets the scheduler act until it has nothing to do, checking each action, then checks that it is not lazy.
    fn settle(&self, world: &mut World) {
        let mut steps = 0;
        while let Some(action) = world.scheduler.next_action() {
            self.apply(world, action);
            steps += 1;
            assert!(steps <= 2 * world.calls.len(), "too many actions");
        }
        self.check_eager(world);
    }

    /// With nothing left to do for the scheduler, no rule may hold back a call that could be prepared or started.
    fn check_eager(&self, world: &World) {
        let case = self.case;
        // Preparation: the first queued call must be blocked by an outstanding preparation or by a rule.
        let preparing = world.calls.contains(&Model::Preparing);
        if let Some(call) = world.calls.iter().position(|&c| c == Model::Queued) {
            if !preparing {
                let blocked = if self.one_at_a_time(call) {
                    !Self::all_done(&world.calls[..call])
                } else {
                    !self.earlier_fences_settled(world, self.batch_of[call])
                };
                assert!(blocked, "call {call} could be prepared but was not: {:?}", world.calls);
            }
        }
        // Start: every ready call must be blocked by the bound or by an earlier call with its key.
        let running = Self::running(world);
        for (call, _) in world.calls.iter().enumerate().filter(|(_, &c)| c == Model::Ready) {
            let full = case.max_in_flight.is_some_and(|max| running >= max);
            let key_blocked = case.outcomes[call].key().is_some_and(|key| {
                (0..call).any(|other| {
                    case.outcomes[other].key() == Some(key)
                        && matches!(world.calls[other], Model::Ready | Model::Running)
                })
            });
            assert!(
                full || key_blocked,
                "call {call} is ready and could start but was not: {:?}",
                world.calls
            );
        }
    }

    /// Checks the abort of this state: exactly the not-started calls, in order; nothing is scheduled afterwards.
    fn check_abort(&self, world: &World) {
        let mut world = world.clone();
        let expected: Vec<usize> = (0..world.calls.len())
            .filter(|&call| matches!(world.calls[call], Model::Queued | Model::Preparing | Model::Ready))
            .collect();
        assert_eq!(world.scheduler.abort(), expected, "abort in state {:?}", world.calls);
        assert_eq!(world.scheduler.next_action(), None);
        if let Some(call) = world.calls.iter().position(|&c| c == Model::Preparing) {
            world.scheduler.prepared(call, self.case.outcomes[call].prepared());
            assert_eq!(world.scheduler.next_action(), None);
        }
        for call in 0..world.calls.len() {
            if world.calls[call] == Model::Running {
                assert!(!world.scheduler.is_idle());
                world.scheduler.finished(call);
                assert_eq!(world.scheduler.next_action(), None);
            }
        }
        assert!(world.scheduler.is_idle());
        assert_eq!(world.scheduler.abort(), Vec::<usize>::new());
    }

    /// The scheduler's whole state as bytes (the case's constants aside), so that states reached along different
    /// interleavings are explored once — including any hidden state that would make the scheduler behave
    /// differently.
    fn fingerprint(scheduler: &Scheduler) -> Vec<u8> {
        let key_byte = |key: &Option<String>| key.as_ref().map_or(0, |k| k.as_bytes()[0]);
        let mut bytes: Vec<u8> = scheduler
            .calls
            .iter()
            .flat_map(|state| match state {
                CallState::Queued => [0, 0],
                CallState::Preparing => [1, 0],
                CallState::Ready(key) => [2, key_byte(key)],
                CallState::Running(key) => [3, key_byte(key)],
                CallState::Done => [4, 0],
            })
            .collect();
        for n in [scheduler.batches.len(), scheduler.next_to_prepare, scheduler.in_flight] {
            bytes.push(u8::try_from(n).expect("small"));
        }
        bytes.push(u8::from(scheduler.aborted));
        bytes
    }

    /// Explores every environment choice from this (settled) state; returns the number of complete interleavings
    /// from it.
    fn explore(&mut self, mut world: World) -> u64 {
        assert_eq!(world.scheduler.len(), world.calls.len());
        assert_eq!(world.scheduler.is_idle(), Self::all_done(&world.calls));
        let state = (world.calls.clone(), Self::fingerprint(&world.scheduler));
        if let Some(&paths) = self.visited.get(&state) {
            return paths;
        }
        self.check_abort(&world);
        let mut paths = 0;
        // The next batch arrives.
        if world.admitted < self.case.batches.len() {
            let mut next = world.clone();
            let (len, fenced) = self.case.batches[next.admitted];
            let range = next.scheduler.admit(len, fenced);
            assert_eq!(range, self.ranges[next.admitted]);
            next.calls.extend(std::iter::repeat_n(Model::Queued, len));
            next.admitted += 1;
            self.settle(&mut next);
            paths += self.explore(next);
        }
        // The outstanding preparation ends.
        if let Some(call) = world.calls.iter().position(|&c| c == Model::Preparing) {
            let mut next = world.clone();
            let outcome = self.case.outcomes[call];
            next.scheduler.prepared(call, outcome.prepared());
            next.calls[call] = match outcome {
                Outcome::Settled => Model::Done { ran: false },
                Outcome::Runnable(_) => Model::Ready,
            };
            self.settle(&mut next);
            paths += self.explore(next);
        }
        // Any running call finishes.
        for call in 0..world.calls.len() {
            if world.calls[call] == Model::Running {
                let mut next = world.clone();
                next.scheduler.finished(call);
                next.calls[call] = Model::Done { ran: true };
                self.settle(&mut next);
                paths += self.explore(next);
            }
        }
        if paths == 0 {
            // Liveness: nothing left for the environment to do, so every call must be settled (no deadlock).
            assert_eq!(world.admitted, self.case.batches.len());
            assert!(Self::all_done(&world.calls), "deadlock: {:?}", world.calls);
            assert!(
                world.scheduler.is_idle(),
                "deadlock in the scheduler: {:?}",
                world.scheduler
            );
            assert_eq!(world.scheduler.next_action(), None);
            assert_eq!(world.scheduler.batches().collect::<Vec<_>>(), self.ranges);
            paths = 1;
        }
        self.visited.insert(state, paths);
        paths
    }

    /// Checks the case; returns (distinct states, complete interleavings).
    fn run(&mut self) -> (usize, u64) {
        let world = World {
            scheduler: Scheduler::new(self.case.mode, self.case.max_in_flight),
            calls: Vec::new(),
            admitted: 0,
        };
        let paths = self.explore(world);
        (self.visited.len(), paths)
    }
}

/// Every way to split `n` calls into 1..=`max_batches` non-empty batches.
fn compositions(n: usize, max_batches: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    if max_batches == 0 {
        return out;
    }
    for first in 1..=n {
        for mut rest in compositions(n - first, max_batches - 1) {
            rest.insert(0, first);
            out.push(rest);
        }
    }
    out
}

/// Every outcome sequence of `n` calls, over {settled, no key, key a, key b}, up to renaming the keys (key b
/// never appears before key a).
fn outcome_sequences(n: usize) -> Vec<Vec<Outcome>> {
    let all = [
        Outcome::Settled,
        Outcome::Runnable(None),
        Outcome::Runnable(Some(0)),
        Outcome::Runnable(Some(1)),
    ];
    let mut out = vec![Vec::new()];
    for _ in 0..n {
        out = out
            .into_iter()
            .flat_map(|seq: Vec<Outcome>| {
                all.iter().map(move |&o| {
                    let mut seq = seq.clone();
                    seq.push(o);
                    seq
                })
            })
            .collect();
    }
    out.retain(|seq| {
        let first_b = seq.iter().position(|o| o.key() == Some(1));
        let first_a = seq.iter().position(|o| o.key() == Some(0));
        match (first_a, first_b) {
            (_, None) => true,
            (Some(a), Some(b)) => a < b,
            (None, Some(_)) => false,
        }
    });
    out
}

/// Sizes of the exhaustive check: up to `MAX_CALLS` calls in total, in up to `MAX_BATCHES` non-empty batches.
const MAX_CALLS: usize = 4;
const MAX_BATCHES: usize = 3;

/// Exhaustive model check of one mode: every configuration of up to [`MAX_CALLS`] calls in up to [`MAX_BATCHES`]
/// batches (each batch fenced or not; each call settled in preparation, or runnable with no key, key a or key b),
/// `max_in_flight` None/1/2, and every interleaving of the environment's choices (the next batch arrives, the
/// outstanding preparation ends, any running body ends). The fence is a property of a batch (any per-tool
/// sequential call fences its batch, and the scheduler only sees the batch's flag), so it is enumerated per batch.
/// States reached along different interleavings are explored once; every invariant is a property of a state or of
/// one transition, so this covers every interleaving.
fn model_check(mode: ExecutionMode) {
    let started = Instant::now();
    let (mut cases, mut states, mut interleavings) = (0usize, 0usize, 0u64);
    for n in 1..=MAX_CALLS {
        let sequences = outcome_sequences(n);
        for lengths in compositions(n, MAX_BATCHES) {
            for fences in 0..1u32 << lengths.len() {
                let batches: Vec<(usize, bool)> = lengths
                    .iter()
                    .enumerate()
                    .map(|(i, &len)| (len, fences & (1 << i) != 0))
                    .collect();
                for max_in_flight in [None, Some(1), Some(2)] {
                    for outcomes in &sequences {
                        let case = Case {
                            mode,
                            max_in_flight,
                            batches: batches.clone(),
                            outcomes: outcomes.clone(),
                        };
                        let (case_states, case_interleavings) = Checker::new(&case).run();
                        cases += 1;
                        states += case_states;
                        interleavings += case_interleavings;
                    }
                }
            }
        }
    }
    eprintln!(
        "scheduler model check ({mode:?}, up to {MAX_CALLS} calls in up to {MAX_BATCHES} batches): {cases} cases, \
         {states} distinct states, {interleavings} complete interleavings, {:?}",
        started.elapsed()
    );
    assert!(interleavings >= cases as u64);
}

#[test]
fn exhaustive_model_check_parallel_mode() {
    model_check(Parallel);
}

#[test]
fn exhaustive_model_check_sequential_mode() {
    model_check(Sequential);
}
