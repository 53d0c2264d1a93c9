//! The invariants of the event order (§5.7, §6), where events were observed.

use std::collections::{BTreeMap, BTreeSet};

use super::calls::results;
use super::views::{Logged, Observed, Run};
use super::violation::InvariantViolation;

/// What an event stream covers.
#[derive(Clone, Copy)]
pub(super) enum Scope {
    /// A whole agent run: `agent_end` once, last.
    Run,
    /// One response wrapped by `Engine::wrap`: `turn_start` once, first; `turn_end` once, last.
    Turn,
}

/// The event order of §5.7 and §6 over `events`; `log` and `runs` say which calls have results and which executed.
pub(super) fn check_events(
    events: &[Observed<'_>],
    scope: Scope,
    log: &[Logged<'_>],
    runs: &[Run<'_>],
) -> Vec<InvariantViolation> {
    let mut violations = Vec::new();
    let kind_at = |i: usize| events.get(i).map(|event| event.kind.to_owned());
    let count = |kind: &str| events.iter().filter(|event| event.kind == kind).count();
    let (first, last) = match scope {
        Scope::Run => (None, "agent_end"),
        Scope::Turn => (Some("turn_start"), "turn_end"),
    };
    if let Some(first) = first {
        if count(first) != 1 {
            violations.push(InvariantViolation::EventCount {
                event: first,
                count: count(first),
            });
        }
        if events.first().map(|event| event.kind) != Some(first) {
            violations.push(InvariantViolation::EventNotFirst {
                event: first,
                first: kind_at(0),
            });
        }
    }
    if count(last) != 1 {
        violations.push(InvariantViolation::EventCount {
            event: last,
            count: count(last),
        });
    }
    if events.last().map(|event| event.kind) != Some(last) {
        violations.push(InvariantViolation::EventNotLast {
            event: last,
            last: events.len().checked_sub(1).and_then(kind_at),
        });
    }

    let executed: BTreeSet<&str> = runs
        .iter()
        .filter(|run| run.started_ms.is_some())
        .map(|run| run.call_id)
        .collect();
    let mut positions: BTreeMap<&str, (Vec<usize>, Vec<usize>)> = results(log)
        .into_keys()
        .map(|(_, id)| (id, (Vec::new(), Vec::new())))
        .collect();
    // Only events that carry their message say when a fragment ended (a report's do not).
    let knows_fragments = events.iter().any(|event| event.holds.is_some());
    let mut fragment_ended: BTreeSet<&str> = BTreeSet::new();
    for (i, event) in events.iter().enumerate() {
        if let Some(holds) = &event.holds {
            fragment_ended.extend(holds.iter().copied());
        }
        let Some(call_id) = event.call_id else { continue };
        match event.kind {
            "tool_execution_start" => {
                positions.entry(call_id).or_default().0.push(i);
                if knows_fragments && executed.contains(call_id) && !fragment_ended.contains(call_id) {
                    violations.push(InvariantViolation::StartedBeforeMessageEnd {
                        call_id: call_id.to_owned(),
                    });
                }
            }
            "tool_execution_end" => positions.entry(call_id).or_default().1.push(i),
            _ => {}
        }
    }
    let is_result_event = |i: usize, kind: &str| {
        events
            .get(i)
            .is_some_and(|event| event.kind == kind && event.role == Some("tool_result"))
    };
    for (call_id, (starts, ends)) in positions {
        let ([start], [end]) = (starts.as_slice(), ends.as_slice()) else {
            violations.push(InvariantViolation::ToolEventCount {
                call_id: call_id.to_owned(),
                starts: starts.len(),
                ends: ends.len(),
            });
            continue;
        };
        let (start, end, call_id) = (*start, *end, call_id.to_owned());
        if start > end {
            violations.push(InvariantViolation::EndBeforeStart { call_id, start, end });
            continue;
        }
        if !(is_result_event(end + 1, "message_start") && is_result_event(end + 2, "message_end")) {
            violations.push(InvariantViolation::ResultNotAfterEnd {
                call_id: call_id.clone(),
                end,
            });
        }
        if !executed.contains(call_id.as_str()) && end - start != 1 {
            violations.push(InvariantViolation::NotExecutedApart { call_id, start, end });
        }
    }
    violations
}
