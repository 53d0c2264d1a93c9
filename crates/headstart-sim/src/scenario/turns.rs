//! A scenario's turns: each resolved to its delta events (from a log file, within the scenario's budget, or
//! inline), and checked as the engine will read them.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use headstart::core::delta_log::{parse_timed_delta, read_delta_log, TimedDelta};
use headstart::core::DeltaEvent;
use serde::Deserialize;
use serde_json::Value;

use super::error::ScenarioError;
use super::limits::{time_over_limit, MAX_DELTA_LOG_BYTES, MAX_TIME_MS};

/// A `turns[]` entry as written: a delta-log file or inline events.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TurnSpec {
    pub(super) log: Option<String>,
    pub(super) events: Option<Vec<Value>>,
}

/// Resolves one turn's events; `log_budget` is what remains of [`MAX_DELTA_LOG_BYTES`] for this scenario.
pub(super) fn resolve_turn(
    turn: usize,
    spec: &TurnSpec,
    base: &Path,
    log_budget: &mut u64,
) -> Result<Vec<TimedDelta>, ScenarioError> {
    let fail = |message: String| ScenarioError::Turn { turn, message };
    let events = match (&spec.log, &spec.events) {
        (Some(log), None) => {
            let path: PathBuf = base.join(log);
            let shown = path.display();
            let file = std::fs::File::open(&path).map_err(|err| fail(format!("cannot read {shown}: {err}")))?;
            let over_budget = || {
                fail(format!(
                    "{shown}: the scenario's delta logs are larger than the {MAX_DELTA_LOG_BYTES}-byte limit"
                ))
            };
            if file.metadata().is_ok_and(|meta| meta.len() > *log_budget) {
                return Err(over_budget());
            }
            // Never read more than the budget allows, whatever the file claims to be (a device, a growing file).
            let mut reader = std::io::BufReader::new(file.take(*log_budget + 1));
            let events = read_delta_log(&mut reader);
            let unread = reader.get_ref().limit();
            if unread == 0 {
                return Err(over_budget());
            }
            *log_budget -= *log_budget + 1 - unread;
            events.map_err(|err| fail(format!("{shown}: {err}")))?
        }
        (None, Some(events)) => {
            let mut previous = 0;
            events
                .iter()
                .enumerate()
                .map(|(i, event)| {
                    let timed = parse_timed_delta(event.clone(), previous)
                        .map_err(|message| fail(format!("events[{i}]: {message}")))?;
                    previous = timed.at_ms;
                    Ok(timed)
                })
                .collect::<Result<_, _>>()?
        }
        _ => return Err(fail("name exactly one of log, events".to_owned())),
    };
    if let Some((i, timed)) = events.iter().enumerate().find(|(_, timed)| timed.at_ms > MAX_TIME_MS) {
        return Err(fail(format!("event {i} at_ms: {}", time_over_limit(timed.at_ms))));
    }
    ends_at_terminal(&events).map_err(fail)?;
    Ok(events)
}

/// Refuses a tool call id used by two turns (docs/scenario-format.md: ids are unique across all turns). A repeat within one turn
/// is left to the engine, which rejects it as a protocol violation (contract §2).
pub(super) fn unique_ids_across_turns(turns: &[Vec<TimedDelta>]) -> Result<(), ScenarioError> {
    let mut first_turn: BTreeMap<&str, usize> = BTreeMap::new();
    for (turn, events) in turns.iter().enumerate() {
        for timed in events {
            if let DeltaEvent::ToolcallStart { id, .. } = &timed.event {
                let first = *first_turn.entry(id).or_insert(turn);
                if first != turn {
                    return Err(ScenarioError::Turn {
                        turn,
                        message: format!(
                            "tool call id {id:?} is already used by turn {first}; ids must be unique across turns"
                        ),
                    });
                }
            }
        }
    }
    Ok(())
}

/// Refuses events after a terminal event: the engine stops reading a response at `done`/`error`, so they could
/// never be replayed. Positions are 0-based event numbers within the turn.
fn ends_at_terminal(events: &[TimedDelta]) -> Result<(), String> {
    let Some(terminal) = events.iter().position(|timed| timed.event.is_terminal()) else {
        return Ok(());
    };
    match events.get(terminal + 1) {
        None => Ok(()),
        Some(next) => Err(format!(
            "event {} ({}) follows the terminal event {terminal} ({}); a response ends at its terminal event",
            terminal + 1,
            next.event.type_name(),
            events[terminal].event.type_name()
        )),
    }
}
