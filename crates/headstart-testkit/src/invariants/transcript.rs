//! The invariants of what is stored: sequence numbers, ownership, results, run records, turn ids and usage.

use std::collections::{BTreeMap, BTreeSet};

use super::calls::{answered, holders, results, CallKey};
use super::views::{Logged, LoggedKind, Run};
use super::violation::InvariantViolation;

/// Everything but the event order: sequence numbers, ownership, results, run records, turn ids and usage.
pub(super) fn check_transcript(log: &[Logged<'_>], runs: &[Run<'_>]) -> Vec<InvariantViolation> {
    let mut violations = Vec::new();
    for (position, logged) in log.iter().enumerate() {
        if logged.seq != position as u64 + 1 {
            violations.push(InvariantViolation::SequenceGap {
                position,
                seq: logged.seq,
            });
        }
    }

    let holders = holders(log);
    let results = results(log);
    let mut stored_so_far: BTreeSet<CallKey<'_>> = BTreeSet::new();
    let mut fragments: BTreeMap<Option<u32>, Vec<(&Logged<'_>, &str, u64)>> = BTreeMap::new();
    for (logged, answers) in log.iter().zip(answered(log)) {
        match &logged.kind {
            LoggedKind::Fragment {
                request,
                turn_id,
                usage_total,
                calls,
            } => {
                for call in calls {
                    if !stored_so_far.insert((*request, *call)) {
                        violations.push(InvariantViolation::CallStoredTwice {
                            call_id: (*call).to_owned(),
                        });
                    }
                }
                fragments
                    .entry(*request)
                    .or_default()
                    .push((logged, turn_id, *usage_total));
            }
            LoggedKind::Result { call_id, .. } => {
                if !answers.is_some_and(|call| stored_so_far.contains(&call)) {
                    violations.push(InvariantViolation::ResultWithoutCall {
                        call_id: (*call_id).to_owned(),
                    });
                }
            }
            LoggedKind::User => {}
        }
    }
    for call @ (_, call_id) in holders.keys() {
        let count = results.get(call).map_or(0, Vec::len);
        if count != 1 {
            violations.push(InvariantViolation::ResultCount {
                call_id: (*call_id).to_owned(),
                results: count,
            });
        }
    }

    let mut admitted: BTreeSet<CallKey<'_>> = BTreeSet::new();
    for run in runs {
        let call_id = || run.call_id.to_owned();
        let call = (Some(run.request), run.call_id);
        if !admitted.insert(call) {
            violations.push(InvariantViolation::AdmittedTwice { call_id: call_id() });
        }
        match (holders.get(&call), run.started_ms) {
            (None, Some(_)) => violations.push(InvariantViolation::StartedWithoutOwner { call_id: call_id() }),
            (None, None) => violations.push(InvariantViolation::AdmittedWithoutOwner { call_id: call_id() }),
            (Some(&(holder, owner_ms)), started) => {
                if let Some(recorded) = run.owner_seq.filter(|recorded| *recorded != holder) {
                    violations.push(InvariantViolation::WrongOwner {
                        call_id: call_id(),
                        recorded,
                        holder,
                    });
                }
                if let Some(started_ms) = started.filter(|started| *started < owner_ms) {
                    violations.push(InvariantViolation::StartedBeforeOwner {
                        call_id: call_id(),
                        started_ms,
                        owner_ms,
                    });
                }
            }
        }
        if !run.settled {
            violations.push(InvariantViolation::Unsettled { call_id: call_id() });
        }
        if let (Some(recorded), Some([stored])) = (run.result_seq, results.get(&call).map(Vec::as_slice)) {
            if recorded != Some(*stored) {
                violations.push(InvariantViolation::RunResultMismatch {
                    call_id: call_id(),
                    recorded,
                    stored: *stored,
                });
            }
        }
    }

    for (request, fragments) in &fragments {
        let turn_ids: BTreeSet<&str> = fragments.iter().map(|(_, turn_id, _)| *turn_id).collect();
        if turn_ids.len() != 1 {
            violations.push(InvariantViolation::TurnIds {
                request: *request,
                turn_ids: turn_ids.into_iter().map(str::to_owned).collect(),
            });
        }
        for (fragment, _, total) in &fragments[..fragments.len().saturating_sub(1)] {
            if *total != 0 {
                violations.push(InvariantViolation::PrefixUsage {
                    request: *request,
                    seq: fragment.seq,
                    total: *total,
                });
            }
        }
    }
    violations
}
