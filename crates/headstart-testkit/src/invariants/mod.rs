//! The engine's invariants, checked by one checker wherever a run can be observed: a replay [`Report`]
//! ([`check_report`]), what a store holds for a session ([`check_session`], [`check_log`]), and the events of one
//! response wrapped by `Engine::wrap` together with the store it wrote ([`check_turn`]). Each broken rule is one
//! [`InvariantViolation`].
//!
//! What is checked (contract sections in brackets):
//! - sequence numbers run 1, 2, 3, … in log order (§7);
//! - **owner durable before start** (§1): a call that started is held by a stored fragment, stored no later than
//!   the start; a run record's owner is the fragment that holds its call;
//! - **exactly one result** (§5.5): a call is stored once and has exactly one result; every result answers a call
//!   stored before it; every admitted call is admitted once, held by a stored fragment and settled, and its run
//!   record's result is its call's stored result;
//! - **one turn id per request, usage only on the last fragment** (§3.2, §3.5);
//! - **delivered exactly once** (§3.7.5, §7.3), where the log holds whole messages: each request's context begins
//!   with the context of the request before it, so nothing the model was given moves or comes again, a
//!   provider-async result reaching the model in a later request included;
//! - **event order** (§5.7, §6), where events were observed: every call with a result or a tool event has one
//!   `tool_execution_start` and one `tool_execution_end`, in that order, the end directly followed by its result's
//!   `message_start`/`message_end`; a call that never executed gets its start and end back to back; an executed
//!   call starts after the `message_end` of the fragment holding it (only where events carry their message, not in
//!   a report); `agent_end` is the single last event of a run, and a wrapped response starts with its single
//!   `turn_start` and ends with its single `turn_end`.
//!
//! A store holds no events, so [`check_session`] and [`check_log`] check everything but the event order. Times are
//! compared in milliseconds as each source gives them (a report's are rounded the same way for every entry).
//!
//! A call is its request and its id (contract §7.2.2: ids are unique per response, not per session): a result
//! answers the call of its request (a store says which; in a report, where results do not carry it, the most recent
//! fragment before the result holding its id), and a run record the call of its request. The event order is
//! checked by call id, within one response ([`check_turn`]) or a replay, whose ids are unique across turns.
//!
//! One idea a file: `views` reduces each source to what the rules read, `calls` indexes calls across a log,
//! `transcript` and `events` hold the rules, `violation` what a broken rule reports; this file is the entry points.

mod calls;
mod delivery;
mod events;
#[cfg(test)]
mod tests;
mod transcript;
mod views;
mod violation;

use headstart::store::{StoreError, StoredMessage, ToolRun};
use headstart::{AgentEvent, SessionId, TranscriptStore};
use headstart_timeline::report::Report;

use delivery::check_delivery;
use events::{check_events, Scope};
use transcript::check_transcript;
use views::{Logged, Observed, Run};
pub use violation::InvariantViolation;

/// Checks a replay report: its transcript, tool runs and events (a whole agent run).
pub fn check_report(report: &Report) -> Vec<InvariantViolation> {
    let log: Vec<Logged<'_>> = report.transcript.iter().map(Logged::from_entry).collect();
    let runs: Vec<Run<'_>> = report
        .tool_runs
        .iter()
        .map(|run| Run {
            request: run.request,
            call_id: &run.id,
            started_ms: run.started_ms.map(|ms| ms.0),
            owner_seq: None,
            settled: run.outcome.is_some(),
            result_seq: None,
        })
        .collect();
    let events: Vec<Observed<'_>> = report
        .events
        .iter()
        .map(|event| Observed {
            kind: &event.kind,
            call_id: event.tool_call_id.as_deref(),
            role: event.role.as_deref(),
            holds: None,
        })
        .collect();
    let mut violations = check_transcript(&log, &runs);
    violations.extend(check_events(&events, Scope::Run, &log, &runs));
    violations
}

/// Checks what a store holds for one session: its durable log and its run records (no events).
pub fn check_log(log: &[StoredMessage], runs: &[ToolRun]) -> Vec<InvariantViolation> {
    let mut violations = check_delivery(log);
    let log: Vec<Logged<'_>> = log.iter().map(Logged::from_stored).collect();
    let runs: Vec<Run<'_>> = runs.iter().map(Run::from_record).collect();
    violations.extend(check_transcript(&log, &runs));
    violations
}

/// Loads a session's log and run records from `store` and checks them ([`check_log`]).
pub async fn check_session(
    store: &dyn TranscriptStore,
    session: &SessionId,
) -> Result<Vec<InvariantViolation>, StoreError> {
    let log = store.load_log(session).await?;
    let runs = store.tool_runs(session).await?;
    Ok(check_log(&log, &runs))
}

/// Checks one response wrapped by `Engine::wrap`: the session's log and run records as the response left them, and
/// the events it emitted (from its `turn_start` to its `turn_end`).
pub fn check_turn(log: &[StoredMessage], runs: &[ToolRun], events: &[AgentEvent]) -> Vec<InvariantViolation> {
    let mut violations = check_delivery(log);
    let log: Vec<Logged<'_>> = log.iter().map(Logged::from_stored).collect();
    let runs: Vec<Run<'_>> = runs.iter().map(Run::from_record).collect();
    let events: Vec<Observed<'_>> = events.iter().map(Observed::from_event).collect();
    violations.extend(check_transcript(&log, &runs));
    violations.extend(check_events(&events, Scope::Turn, &log, &runs));
    violations
}
