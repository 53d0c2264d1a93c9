//! The engine's invariants, checked by one checker wherever a run can be observed: a replay [`Report`]
//! ([`check_report`]), what a store holds for a session ([`check_session`], [`check_log`]), and the events of one
//! response wrapped by `Engine::wrap` together with the store it wrote ([`check_turn`]). Each broken rule is one
//! [`Violation`].
//!
//! What is checked (contract sections in brackets):
//! - sequence numbers run 1, 2, 3, … in log order (§7);
//! - **owner durable before start** (§1): a call that started is held by a stored fragment, stored no later than
//!   the start; a run record's owner is the fragment that holds its call;
//! - **exactly one result** (§5.5): a call is stored once and has exactly one result; every result answers a call
//!   stored before it; every admitted call is admitted once, held by a stored fragment and settled, and its run
//!   record's result is its call's stored result;
//! - **one turn id per request, usage only on the last fragment** (§3.2, §3.5);
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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use headstart::store::{RunState, StoreError, StoredMessage, ToolRun};
use headstart::{AgentEvent, Message, SessionId, TranscriptStore};

use crate::report::{Report, TranscriptEntry};

/// One broken invariant.
#[derive(Debug, Clone, PartialEq)]
pub enum Violation {
    /// §7: the message at `position` (0-based, in log order) does not have sequence number `position + 1`.
    SequenceGap {
        /// Where in the log.
        position: usize,
        /// The sequence number it has.
        seq: u64,
    },
    /// §1: a call started before the fragment holding it was stored.
    StartedBeforeOwner {
        /// The call.
        call_id: String,
        /// When it started (ms).
        started_ms: f64,
        /// When its owner was stored (ms).
        owner_ms: f64,
    },
    /// §1: a call started, but no stored fragment holds it.
    StartedWithoutOwner {
        /// The call.
        call_id: String,
    },
    /// §1: a run record names a fragment as the call's owner that does not hold the call.
    WrongOwner {
        /// The call.
        call_id: String,
        /// The owner the run record names.
        recorded: u64,
        /// The fragment that holds the call.
        holder: u64,
    },
    /// §5.5: a call is held by two stored fragments.
    CallStoredTwice {
        /// The call.
        call_id: String,
    },
    /// §5.5: a stored call has no result, or more than one.
    ResultCount {
        /// The call.
        call_id: String,
        /// How many results it has.
        results: usize,
    },
    /// §5.5: a result answers no call stored before it.
    ResultWithoutCall {
        /// The call id the result names.
        call_id: String,
    },
    /// §5.5: a call has two run records.
    AdmittedTwice {
        /// The call.
        call_id: String,
    },
    /// §5.5: an admitted call that did not start is held by no stored fragment.
    AdmittedWithoutOwner {
        /// The call.
        call_id: String,
    },
    /// §5.5: an admitted call never settled: its run record has no final state.
    Unsettled {
        /// The call.
        call_id: String,
    },
    /// §5.5: a run record's result is not its call's stored result.
    RunResultMismatch {
        /// The call.
        call_id: String,
        /// The result the run record names.
        recorded: Option<u64>,
        /// The sequence number of the call's stored result.
        stored: u64,
    },
    /// §3.2: the fragments of one request carry different turn ids.
    TurnIds {
        /// The request (`None`: fragments stored without one).
        request: Option<u32>,
        /// The distinct turn ids.
        turn_ids: Vec<String>,
    },
    /// §3.2, §3.5: a fragment other than the request's last carries usage.
    PrefixUsage {
        /// The request.
        request: Option<u32>,
        /// The fragment.
        seq: u64,
        /// Its total usage.
        total: u64,
    },
    /// §6: an event that must appear exactly once does not.
    EventCount {
        /// The event type.
        event: &'static str,
        /// How often it appears.
        count: usize,
    },
    /// §6: the stream does not start with the event it must start with.
    EventNotFirst {
        /// The event type that must come first.
        event: &'static str,
        /// The type of the first event.
        first: Option<String>,
    },
    /// §6: the stream does not end with the event it must end with.
    EventNotLast {
        /// The event type that must come last.
        event: &'static str,
        /// The type of the last event.
        last: Option<String>,
    },
    /// §5.7: a call does not have exactly one `tool_execution_start` and one `tool_execution_end`.
    ToolEventCount {
        /// The call.
        call_id: String,
        /// Its `tool_execution_start` events.
        starts: usize,
        /// Its `tool_execution_end` events.
        ends: usize,
    },
    /// §6.4: a call's `tool_execution_end` comes before its `tool_execution_start`.
    EndBeforeStart {
        /// The call.
        call_id: String,
        /// Position of the start in the stream.
        start: usize,
        /// Position of the end in the stream.
        end: usize,
    },
    /// §6.4: a call's `tool_execution_end` is not directly followed by its result's `message_start`/`message_end`.
    ResultNotAfterEnd {
        /// The call.
        call_id: String,
        /// Position of the end in the stream.
        end: usize,
    },
    /// §5.7: a call that never executed does not get its start and end back to back.
    NotExecutedApart {
        /// The call.
        call_id: String,
        /// Position of the start in the stream.
        start: usize,
        /// Position of the end in the stream.
        end: usize,
    },
    /// §6.3: an executed call started before the `message_end` of the fragment holding it.
    StartedBeforeMessageEnd {
        /// The call.
        call_id: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::SequenceGap { position, seq } => {
                write!(f, "message {position} of the log has seq {seq}, not {}", position + 1)
            }
            Violation::StartedBeforeOwner {
                call_id,
                started_ms,
                owner_ms,
            } => write!(
                f,
                "{call_id:?} started at {started_ms} ms, before its owner was stored at {owner_ms} ms"
            ),
            Violation::StartedWithoutOwner { call_id } => {
                write!(f, "{call_id:?} started, but no stored fragment holds it")
            }
            Violation::WrongOwner {
                call_id,
                recorded,
                holder,
            } => write!(
                f,
                "the run of {call_id:?} names fragment #{recorded} as its owner, but #{holder} holds the call"
            ),
            Violation::CallStoredTwice { call_id } => write!(f, "call {call_id:?} is stored twice"),
            Violation::ResultCount { call_id, results } => {
                write!(f, "stored call {call_id:?} has {results} results")
            }
            Violation::ResultWithoutCall { call_id } => {
                write!(
                    f,
                    "a result answers {call_id:?}, which no fragment stored before it holds"
                )
            }
            Violation::AdmittedTwice { call_id } => write!(f, "call {call_id:?} was admitted twice"),
            Violation::AdmittedWithoutOwner { call_id } => {
                write!(f, "admitted call {call_id:?} has no stored owner")
            }
            Violation::Unsettled { call_id } => {
                write!(f, "admitted call {call_id:?} never settled: its run has no final state")
            }
            Violation::RunResultMismatch {
                call_id,
                recorded,
                stored,
            } => write!(
                f,
                "the run of {call_id:?} records result {recorded:?}, but its stored result is #{stored}"
            ),
            Violation::TurnIds { request, turn_ids } => {
                write!(f, "request {request:?}: fragments have turn ids {turn_ids:?}")
            }
            Violation::PrefixUsage { request, seq, total } => write!(
                f,
                "request {request:?}: fragment #{seq} is not the last, but carries usage {total}"
            ),
            Violation::EventCount { event, count } => write!(f, "{count} {event} events, not 1"),
            Violation::EventNotFirst { event, first } => {
                write!(f, "the first event is {first:?}, not {event}")
            }
            Violation::EventNotLast { event, last } => write!(f, "the last event is {last:?}, not {event}"),
            Violation::ToolEventCount { call_id, starts, ends } => write!(
                f,
                "{call_id:?}: {starts} tool_execution_start, {ends} tool_execution_end"
            ),
            Violation::EndBeforeStart { call_id, start, end } => write!(
                f,
                "{call_id:?}: tool_execution_end at {end} comes before tool_execution_start at {start}"
            ),
            Violation::ResultNotAfterEnd { call_id, end } => write!(
                f,
                "{call_id:?}: tool_execution_end at {end} is not directly followed by its result message"
            ),
            Violation::NotExecutedApart { call_id, start, end } => write!(
                f,
                "{call_id:?} never executed, but its start ({start}) and end ({end}) are not adjacent"
            ),
            Violation::StartedBeforeMessageEnd { call_id } => write!(
                f,
                "{call_id:?} started before the message_end of the fragment holding it"
            ),
        }
    }
}

/// Checks a replay report: its transcript, tool runs and events (a whole agent run).
pub fn check_report(report: &Report) -> Vec<Violation> {
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
pub fn check_log(log: &[StoredMessage], runs: &[ToolRun]) -> Vec<Violation> {
    let log: Vec<Logged<'_>> = log.iter().map(Logged::from_stored).collect();
    let runs: Vec<Run<'_>> = runs.iter().map(Run::from_record).collect();
    check_transcript(&log, &runs)
}

/// Loads a session's log and run records from `store` and checks them ([`check_log`]).
pub async fn check_session(store: &dyn TranscriptStore, session: &SessionId) -> Result<Vec<Violation>, StoreError> {
    let log = store.load_log(session).await?;
    let runs = store.tool_runs(session).await?;
    Ok(check_log(&log, &runs))
}

/// Checks one response wrapped by `Engine::wrap`: the session's log and run records as the response left them, and
/// the events it emitted (from its `turn_start` to its `turn_end`).
pub fn check_turn(log: &[StoredMessage], runs: &[ToolRun], events: &[AgentEvent]) -> Vec<Violation> {
    let log: Vec<Logged<'_>> = log.iter().map(Logged::from_stored).collect();
    let runs: Vec<Run<'_>> = runs.iter().map(Run::from_record).collect();
    let events: Vec<Observed<'_>> = events.iter().map(Observed::from_event).collect();
    let mut violations = check_transcript(&log, &runs);
    violations.extend(check_events(&events, Scope::Turn, &log, &runs));
    violations
}

/// One message of a log, reduced to what the invariants read.
struct Logged<'a> {
    seq: u64,
    at_ms: f64,
    kind: LoggedKind<'a>,
}

enum LoggedKind<'a> {
    User,
    Fragment {
        request: Option<u32>,
        turn_id: &'a str,
        usage_total: u64,
        calls: Vec<&'a str>,
    },
    Result {
        /// The request whose call it answers, when the source says (a store does, a report does not).
        request: Option<u32>,
        call_id: &'a str,
    },
}

impl<'a> Logged<'a> {
    fn from_entry(entry: &'a TranscriptEntry) -> Self {
        match entry {
            TranscriptEntry::User { seq, at_ms, .. } => Logged {
                seq: *seq,
                at_ms: at_ms.0,
                kind: LoggedKind::User,
            },
            TranscriptEntry::Assistant {
                seq,
                request,
                turn_id,
                content,
                usage,
                at_ms,
                ..
            } => Logged {
                seq: *seq,
                at_ms: at_ms.0,
                kind: LoggedKind::Fragment {
                    request: *request,
                    turn_id,
                    usage_total: usage.total(),
                    calls: content
                        .iter()
                        .filter_map(|block| block.as_tool_call())
                        .map(|call| call.id.as_str())
                        .collect(),
                },
            },
            TranscriptEntry::ToolResult {
                seq,
                tool_call_id,
                at_ms,
                ..
            } => Logged {
                seq: *seq,
                at_ms: at_ms.0,
                kind: LoggedKind::Result {
                    request: None,
                    call_id: tool_call_id,
                },
            },
        }
    }

    fn from_stored(stored: &'a StoredMessage) -> Self {
        let kind = match &stored.message {
            Message::User(_) => LoggedKind::User,
            Message::Assistant(fragment) => LoggedKind::Fragment {
                request: stored.request,
                turn_id: &fragment.turn_id,
                usage_total: fragment.usage.total(),
                calls: fragment.tool_calls().map(|call| call.id.as_str()).collect(),
            },
            Message::ToolResult(result) => LoggedKind::Result {
                request: stored.request,
                call_id: &result.tool_call_id,
            },
        };
        Logged {
            seq: stored.seq,
            at_ms: us_to_ms(stored.at_us),
            kind,
        }
    }
}

/// One run record, reduced to what the invariants read; `None` where the source does not say.
struct Run<'a> {
    request: u32,
    call_id: &'a str,
    started_ms: Option<f64>,
    owner_seq: Option<u64>,
    settled: bool,
    /// `Some(recorded)` when the source records the result's sequence number (a store does, a report does not).
    result_seq: Option<Option<u64>>,
}

impl<'a> Run<'a> {
    fn from_record(run: &'a ToolRun) -> Self {
        Run {
            request: run.request,
            call_id: &run.call_id,
            started_ms: run.started_at_us.map(us_to_ms),
            owner_seq: Some(run.fragment_seq),
            settled: !matches!(run.state, RunState::Admitted | RunState::Started),
            result_seq: Some(run.result_seq),
        }
    }
}

/// One event, reduced to what the invariants read.
struct Observed<'a> {
    kind: &'a str,
    call_id: Option<&'a str>,
    role: Option<&'a str>,
    /// For an assistant `message_end`: the calls of the fragment, when the event carries it.
    holds: Option<Vec<&'a str>>,
}

impl<'a> Observed<'a> {
    fn from_event(event: &'a AgentEvent) -> Self {
        let holds = match event {
            AgentEvent::MessageEnd { message, .. } => match &**message {
                Message::Assistant(fragment) => Some(fragment.tool_calls().map(|call| call.id.as_str()).collect()),
                _ => None,
            },
            _ => None,
        };
        Observed {
            kind: event.type_name(),
            call_id: event.tool_call_id(),
            role: event.role().map(|role| role.as_str()),
            holds,
        }
    }
}

/// What an event stream covers.
#[derive(Clone, Copy)]
enum Scope {
    /// A whole agent run: `agent_end` once, last.
    Run,
    /// One response wrapped by `Engine::wrap`: `turn_start` once, first; `turn_end` once, last.
    Turn,
}

/// Microseconds to milliseconds (exact below 2^53 µs, and order-preserving).
fn us_to_ms(us: i64) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let us = us as f64;
    us / 1000.0
}

/// A call: the request of the response holding it (`None` when the source does not say) and its id.
type CallKey<'a> = (Option<u32>, &'a str);

/// The calls stored in `log`, each with the sequence number and time of the first fragment holding it.
fn holders<'a>(log: &[Logged<'a>]) -> BTreeMap<CallKey<'a>, (u64, f64)> {
    let mut holders = BTreeMap::new();
    for logged in log {
        if let LoggedKind::Fragment { request, calls, .. } = &logged.kind {
            for call in calls {
                holders.entry((*request, *call)).or_insert((logged.seq, logged.at_ms));
            }
        }
    }
    holders
}

/// The call each message of `log` answers (`None` for messages that are not results): the result's request and
/// id, or, when the result does not carry its request, the most recent fragment before it that holds its id.
fn answered<'a>(log: &[Logged<'a>]) -> Vec<Option<CallKey<'a>>> {
    let mut latest: BTreeMap<&str, Option<u32>> = BTreeMap::new();
    log.iter()
        .map(|logged| match &logged.kind {
            LoggedKind::Fragment { request, calls, .. } => {
                for call in calls {
                    latest.insert(call, *request);
                }
                None
            }
            LoggedKind::Result {
                request: Some(request),
                call_id,
            } => Some((Some(*request), *call_id)),
            LoggedKind::Result { request: None, call_id } => Some((latest.get(call_id).copied().flatten(), *call_id)),
            LoggedKind::User => None,
        })
        .collect()
}

/// The sequence numbers of each call's results in `log`.
fn results<'a>(log: &[Logged<'a>]) -> BTreeMap<CallKey<'a>, Vec<u64>> {
    let mut results: BTreeMap<CallKey<'a>, Vec<u64>> = BTreeMap::new();
    for (logged, call) in log.iter().zip(answered(log)) {
        if let Some(call) = call {
            results.entry(call).or_default().push(logged.seq);
        }
    }
    results
}

/// Everything but the event order: sequence numbers, ownership, results, run records, turn ids and usage.
fn check_transcript(log: &[Logged<'_>], runs: &[Run<'_>]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (position, logged) in log.iter().enumerate() {
        if logged.seq != position as u64 + 1 {
            violations.push(Violation::SequenceGap {
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
                        violations.push(Violation::CallStoredTwice {
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
                    violations.push(Violation::ResultWithoutCall {
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
            violations.push(Violation::ResultCount {
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
            violations.push(Violation::AdmittedTwice { call_id: call_id() });
        }
        match (holders.get(&call), run.started_ms) {
            (None, Some(_)) => violations.push(Violation::StartedWithoutOwner { call_id: call_id() }),
            (None, None) => violations.push(Violation::AdmittedWithoutOwner { call_id: call_id() }),
            (Some(&(holder, owner_ms)), started) => {
                if let Some(recorded) = run.owner_seq.filter(|recorded| *recorded != holder) {
                    violations.push(Violation::WrongOwner {
                        call_id: call_id(),
                        recorded,
                        holder,
                    });
                }
                if let Some(started_ms) = started.filter(|started| *started < owner_ms) {
                    violations.push(Violation::StartedBeforeOwner {
                        call_id: call_id(),
                        started_ms,
                        owner_ms,
                    });
                }
            }
        }
        if !run.settled {
            violations.push(Violation::Unsettled { call_id: call_id() });
        }
        if let (Some(recorded), Some([stored])) = (run.result_seq, results.get(&call).map(Vec::as_slice)) {
            if recorded != Some(*stored) {
                violations.push(Violation::RunResultMismatch {
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
            violations.push(Violation::TurnIds {
                request: *request,
                turn_ids: turn_ids.into_iter().map(str::to_owned).collect(),
            });
        }
        for (fragment, _, total) in &fragments[..fragments.len().saturating_sub(1)] {
            if *total != 0 {
                violations.push(Violation::PrefixUsage {
                    request: *request,
                    seq: fragment.seq,
                    total: *total,
                });
            }
        }
    }
    violations
}

/// The event order of §5.7 and §6 over `events`; `log` and `runs` say which calls have results and which executed.
fn check_events(events: &[Observed<'_>], scope: Scope, log: &[Logged<'_>], runs: &[Run<'_>]) -> Vec<Violation> {
    let mut violations = Vec::new();
    let kind_at = |i: usize| events.get(i).map(|event| event.kind.to_owned());
    let count = |kind: &str| events.iter().filter(|event| event.kind == kind).count();
    let (first, last) = match scope {
        Scope::Run => (None, "agent_end"),
        Scope::Turn => (Some("turn_start"), "turn_end"),
    };
    if let Some(first) = first {
        if count(first) != 1 {
            violations.push(Violation::EventCount {
                event: first,
                count: count(first),
            });
        }
        if events.first().map(|event| event.kind) != Some(first) {
            violations.push(Violation::EventNotFirst {
                event: first,
                first: kind_at(0),
            });
        }
    }
    if count(last) != 1 {
        violations.push(Violation::EventCount {
            event: last,
            count: count(last),
        });
    }
    if events.last().map(|event| event.kind) != Some(last) {
        violations.push(Violation::EventNotLast {
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
                    violations.push(Violation::StartedBeforeMessageEnd {
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
            violations.push(Violation::ToolEventCount {
                call_id: call_id.to_owned(),
                starts: starts.len(),
                ends: ends.len(),
            });
            continue;
        };
        let (start, end, call_id) = (*start, *end, call_id.to_owned());
        if start > end {
            violations.push(Violation::EndBeforeStart { call_id, start, end });
            continue;
        }
        if !(is_result_event(end + 1, "message_start") && is_result_event(end + 2, "message_end")) {
            violations.push(Violation::ResultNotAfterEnd {
                call_id: call_id.clone(),
                end,
            });
        }
        if !executed.contains(call_id.as_str()) && end - start != 1 {
            violations.push(Violation::NotExecutedApart { call_id, start, end });
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use headstart::core::model::{AssistantMessage, ContentBlock, ToolCall, ToolResultMessage, Usage};
    use headstart::core::ToolArguments;
    use headstart::store::{RunOutcome, RunState};
    use headstart::{AgentStop, ResponseOutcome, Role, StopReason, UserMessage};
    use serde_json::Value;

    use super::*;
    use crate::report::{EventReport, Ms, ToolRunReport};

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: "lookup".to_owned(),
            arguments: ToolArguments::default(),
        }
    }

    fn fragment(seq: u64, at_us: i64, calls: &[&str], input_tokens: u64) -> StoredMessage {
        StoredMessage {
            seq,
            request: Some(0),
            at_us,
            message: Message::Assistant(AssistantMessage {
                turn_id: "turn-0".to_owned(),
                stop_reason: StopReason::ToolUse,
                content: calls.iter().map(|id| ContentBlock::ToolCall(call(id))).collect(),
                usage: Usage {
                    input: input_tokens,
                    ..Usage::default()
                },
                model: None,
                error_message: None,
            }),
        }
    }

    fn result(seq: u64, at_us: i64, id: &str) -> StoredMessage {
        StoredMessage {
            seq,
            request: None,
            at_us,
            message: Message::ToolResult(ToolResultMessage {
                tool_call_id: id.to_owned(),
                tool_name: "lookup".to_owned(),
                content: vec![ContentBlock::text("ok")],
                details: Value::Null,
                is_error: false,
                terminate: false,
            }),
        }
    }

    fn run(id: &str, fragment_seq: u64, started_at_us: Option<i64>, result_seq: u64) -> ToolRun {
        ToolRun {
            call_id: id.to_owned(),
            tool_name: "lookup".to_owned(),
            request: 0,
            fragment_seq,
            state: if started_at_us.is_some() {
                RunState::Finished
            } else {
                RunState::Skipped
            },
            outcome: Some(if started_at_us.is_some() {
                RunOutcome::Finished
            } else {
                RunOutcome::Skipped
            }),
            admitted_at_us: 10_000,
            started_at_us,
            ended_at_us: Some(50_000),
            result_seq: Some(result_seq),
        }
    }

    /// A response that stored c1 early (executed) and c2 in its terminal fragment (never executed).
    fn session() -> (Vec<StoredMessage>, Vec<ToolRun>) {
        let log = vec![
            StoredMessage {
                seq: 1,
                request: None,
                at_us: 0,
                message: Message::User(UserMessage::new("go")),
            },
            fragment(2, 10_000, &["c1"], 0),
            result(3, 50_000, "c1"),
            fragment(4, 60_000, &["c2"], 5),
            result(5, 61_000, "c2"),
        ];
        let runs = vec![run("c1", 2, Some(10_000), 3), run("c2", 4, None, 5)];
        (log, runs)
    }

    fn message_end(stored: &StoredMessage) -> [AgentEvent; 2] {
        [
            AgentEvent::MessageStart {
                role: Role::of(&stored.message),
            },
            AgentEvent::MessageEnd {
                seq: Some(stored.seq),
                message: Arc::new(stored.message.clone()),
            },
        ]
    }

    fn start(id: &str) -> AgentEvent {
        AgentEvent::ToolExecutionStart {
            call: Arc::new(call(id)),
        }
    }

    fn end(id: &str) -> AgentEvent {
        AgentEvent::ToolExecutionEnd {
            tool_call_id: id.to_owned(),
            is_error: false,
            outcome: None,
        }
    }

    /// The events of [`session`] as `Engine::wrap` emits them: 0 `turn_start`; 1–2 fragment #2; 3 start c1; 4–5
    /// fragment #4; 6 start c2, 7 end c2, 8–9 its result; 10 end c1, 11–12 its result; 13 `turn_end`.
    fn turn_events(log: &[StoredMessage]) -> Vec<AgentEvent> {
        let mut events = vec![AgentEvent::ResponseStart { request: 0 }];
        events.extend(message_end(&log[1]));
        events.push(start("c1"));
        events.extend(message_end(&log[3]));
        events.push(start("c2"));
        events.push(end("c2"));
        events.extend(message_end(&log[4]));
        events.push(end("c1"));
        events.extend(message_end(&log[2]));
        events.push(AgentEvent::ResponseEnd {
            request: 0,
            outcome: {
                let mut outcome = ResponseOutcome::new(StopReason::ToolUse, 2);
                outcome.committed_prefixes = 1;
                outcome
            },
        });
        events
    }

    fn report_of(log: &[StoredMessage], runs: &[ToolRun], events: &[AgentEvent]) -> Report {
        let mut report = Report::failed("s", "unused");
        report.error = None;
        report.transcript = log
            .iter()
            .map(|stored| TranscriptEntry::from_stored(stored, true))
            .collect();
        report.tool_runs = runs.iter().map(|run| ToolRunReport::from_run(run, true)).collect();
        report.events = events
            .iter()
            .map(|event| EventReport::from_event(event, Ms(0.0)))
            .collect();
        report
    }

    #[test]
    fn a_sound_session_breaks_nothing() {
        let (log, runs) = session();
        let events = turn_events(&log);
        assert_eq!(check_log(&log, &runs), []);
        assert_eq!(check_turn(&log, &runs, &events), []);
        let mut run_events = events;
        run_events.push(AgentEvent::AgentEnd {
            stop: AgentStop::Completed,
        });
        assert_eq!(check_report(&report_of(&log, &runs, &run_events)), []);
    }

    #[test]
    fn each_transcript_rule_can_fail() {
        type Break = fn(&mut Vec<StoredMessage>, &mut Vec<ToolRun>);
        let cases: [(Break, Violation); 11] = [
            (|log, _| log[2].seq = 7, Violation::SequenceGap { position: 2, seq: 7 }),
            (
                |_, runs| runs[0].started_at_us = Some(9_000),
                Violation::StartedBeforeOwner {
                    call_id: "c1".into(),
                    started_ms: 9.0,
                    owner_ms: 10.0,
                },
            ),
            (
                |_, runs| runs[0].fragment_seq = 4,
                Violation::WrongOwner {
                    call_id: "c1".into(),
                    recorded: 4,
                    holder: 2,
                },
            ),
            (
                |log, _| log[3] = fragment(4, 60_000, &["c2", "c1"], 5),
                Violation::CallStoredTwice { call_id: "c1".into() },
            ),
            (
                |log, _| log[4] = result(5, 61_000, "c1"),
                Violation::ResultCount {
                    call_id: "c1".into(),
                    results: 2,
                },
            ),
            (
                |log, _| log.swap(1, 2),
                Violation::ResultWithoutCall { call_id: "c1".into() },
            ),
            (
                |_, runs| runs.push(run("c2", 4, None, 5)),
                Violation::AdmittedTwice { call_id: "c2".into() },
            ),
            (
                |_, runs| runs.push(run("c9", 4, None, 5)),
                Violation::AdmittedWithoutOwner { call_id: "c9".into() },
            ),
            (
                |_, runs| runs[1].state = RunState::Admitted,
                Violation::Unsettled { call_id: "c2".into() },
            ),
            (
                |_, runs| runs[1].result_seq = None,
                Violation::RunResultMismatch {
                    call_id: "c2".into(),
                    recorded: None,
                    stored: 5,
                },
            ),
            (
                |log, _| log[1] = fragment(2, 10_000, &["c1"], 3),
                Violation::PrefixUsage {
                    request: Some(0),
                    seq: 2,
                    total: 3,
                },
            ),
        ];
        for (break_it, expected) in cases {
            let (mut log, mut runs) = session();
            break_it(&mut log, &mut runs);
            let found = check_log(&log, &runs);
            assert!(found.contains(&expected), "expected {expected} among {found:?}");
        }
    }

    #[test]
    fn a_started_call_without_owner_and_a_second_turn_id_are_found() {
        let (mut log, mut runs) = session();
        runs.push(run("c9", 2, Some(20_000), 5));
        if let Message::Assistant(fragment) = &mut log[3].message {
            fragment.turn_id = "turn-x".to_owned();
        }
        let found = check_log(&log, &runs);
        assert!(found.contains(&Violation::StartedWithoutOwner { call_id: "c9".into() }));
        assert!(found.contains(&Violation::TurnIds {
            request: Some(0),
            turn_ids: vec!["turn-0".into(), "turn-x".into()],
        }));
    }

    #[test]
    fn each_event_rule_can_fail() {
        type Break = fn(&mut Vec<AgentEvent>);
        let cases: [(Break, Violation); 8] = [
            (
                |events| {
                    events.remove(0);
                },
                Violation::EventNotFirst {
                    event: "turn_start",
                    first: Some("message_start".into()),
                },
            ),
            (
                |events| events.push(AgentEvent::ResponseStart { request: 1 }),
                Violation::EventCount {
                    event: "turn_start",
                    count: 2,
                },
            ),
            (
                |events| {
                    events.pop();
                },
                Violation::EventNotLast {
                    event: "turn_end",
                    last: Some("message_end".into()),
                },
            ),
            (
                |events| events.insert(4, end("c1")),
                Violation::ToolEventCount {
                    call_id: "c1".into(),
                    starts: 1,
                    ends: 2,
                },
            ),
            (
                |events| events.swap(3, 10),
                Violation::EndBeforeStart {
                    call_id: "c1".into(),
                    start: 10,
                    end: 3,
                },
            ),
            (
                |events| events.swap(10, 12),
                Violation::ResultNotAfterEnd {
                    call_id: "c1".into(),
                    end: 12,
                },
            ),
            (
                |events| {
                    let moved = events.remove(3);
                    events.insert(2, moved);
                },
                Violation::StartedBeforeMessageEnd { call_id: "c1".into() },
            ),
            (
                |events| events.swap(7, 8),
                Violation::NotExecutedApart {
                    call_id: "c2".into(),
                    start: 6,
                    end: 8,
                },
            ),
        ];
        let (log, runs) = session();
        for (break_it, expected) in cases {
            let mut events = turn_events(&log);
            break_it(&mut events);
            let found = check_turn(&log, &runs, &events);
            assert!(found.contains(&expected), "expected {expected} among {found:?}");
        }
    }

    #[test]
    fn a_report_needs_a_single_last_agent_end() {
        let (log, runs) = session();
        let events = turn_events(&log);
        let found = check_report(&report_of(&log, &runs, &events));
        assert!(found.contains(&Violation::EventCount {
            event: "agent_end",
            count: 0,
        }));
        assert!(found.contains(&Violation::EventNotLast {
            event: "agent_end",
            last: Some("turn_end".into()),
        }));
    }
}
