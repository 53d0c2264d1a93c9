//! One broken invariant, and how it reads.

use std::fmt;

/// One broken invariant.
#[derive(Debug, Clone, PartialEq)]
pub enum InvariantViolation {
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
    /// §3.7.5, §7.3: the context of a request does not begin with the context the request before it saw, so
    /// something the model was already given moved, or was given again: results are delivered exactly once.
    ContextRewritten {
        /// The later request.
        request: u32,
        /// The first position (0-based) where its context differs from the earlier request's.
        at: usize,
    },
}

impl InvariantViolation {
    /// Whether a process killed at any instant may leave this until recovery (contract §7.4): an admitted call not
    /// settled, and a stored call without a result. Anything else a crashed store shows is a broken invariant.
    pub fn left_by_a_crash(&self) -> bool {
        matches!(
            self,
            InvariantViolation::Unsettled { .. } | InvariantViolation::ResultCount { results: 0, .. }
        )
    }
}

impl fmt::Display for InvariantViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvariantViolation::SequenceGap { position, seq } => {
                write!(f, "message {position} of the log has seq {seq}, not {}", position + 1)
            }
            InvariantViolation::StartedBeforeOwner {
                call_id,
                started_ms,
                owner_ms,
            } => write!(
                f,
                "{call_id:?} started at {started_ms} ms, before its owner was stored at {owner_ms} ms"
            ),
            InvariantViolation::StartedWithoutOwner { call_id } => {
                write!(f, "{call_id:?} started, but no stored fragment holds it")
            }
            InvariantViolation::WrongOwner {
                call_id,
                recorded,
                holder,
            } => write!(
                f,
                "the run of {call_id:?} names fragment #{recorded} as its owner, but #{holder} holds the call"
            ),
            InvariantViolation::CallStoredTwice { call_id } => write!(f, "call {call_id:?} is stored twice"),
            InvariantViolation::ResultCount { call_id, results } => {
                write!(f, "stored call {call_id:?} has {results} results")
            }
            InvariantViolation::ResultWithoutCall { call_id } => {
                write!(
                    f,
                    "a result answers {call_id:?}, which no fragment stored before it holds"
                )
            }
            InvariantViolation::AdmittedTwice { call_id } => write!(f, "call {call_id:?} was admitted twice"),
            InvariantViolation::AdmittedWithoutOwner { call_id } => {
                write!(f, "admitted call {call_id:?} has no stored owner")
            }
            InvariantViolation::Unsettled { call_id } => {
                write!(f, "admitted call {call_id:?} never settled: its run has no final state")
            }
            InvariantViolation::RunResultMismatch {
                call_id,
                recorded,
                stored,
            } => write!(
                f,
                "the run of {call_id:?} records result {recorded:?}, but its stored result is #{stored}"
            ),
            InvariantViolation::TurnIds { request, turn_ids } => {
                write!(f, "request {request:?}: fragments have turn ids {turn_ids:?}")
            }
            InvariantViolation::PrefixUsage { request, seq, total } => write!(
                f,
                "request {request:?}: fragment #{seq} is not the last, but carries usage {total}"
            ),
            InvariantViolation::EventCount { event, count } => write!(f, "{count} {event} events, not 1"),
            InvariantViolation::EventNotFirst { event, first } => {
                write!(f, "the first event is {first:?}, not {event}")
            }
            InvariantViolation::EventNotLast { event, last } => write!(f, "the last event is {last:?}, not {event}"),
            InvariantViolation::ToolEventCount { call_id, starts, ends } => write!(
                f,
                "{call_id:?}: {starts} tool_execution_start, {ends} tool_execution_end"
            ),
            InvariantViolation::EndBeforeStart { call_id, start, end } => write!(
                f,
                "{call_id:?}: tool_execution_end at {end} comes before tool_execution_start at {start}"
            ),
            InvariantViolation::ContextRewritten { request, at } => write!(
                f,
                "the context of request {request} rewrites the one before it at message {at}: \
                 something already delivered moved or was delivered again"
            ),
            InvariantViolation::ResultNotAfterEnd { call_id, end } => write!(
                f,
                "{call_id:?}: tool_execution_end at {end} is not directly followed by its result message"
            ),
            InvariantViolation::NotExecutedApart { call_id, start, end } => write!(
                f,
                "{call_id:?} never executed, but its start ({start}) and end ({end}) are not adjacent"
            ),
            InvariantViolation::StartedBeforeMessageEnd { call_id } => write!(
                f,
                "{call_id:?} started before the message_end of the fragment holding it"
            ),
        }
    }
}
