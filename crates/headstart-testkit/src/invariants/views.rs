//! Each source reduced to what the invariants read: a log message ([`Logged`]) from a report entry or a stored
//! message, a run record ([`Run`]) from a report's or the store's, an event ([`Observed`]) from a report's or the
//! engine's. Times become milliseconds as each source gives them.

use headstart::store::{RunState, StoredMessage, ToolRun};
use headstart::{AgentEvent, Message};
use headstart_timeline::report::TranscriptEntry;

/// One message of a log, reduced to what the invariants read.
pub(super) struct Logged<'a> {
    pub(super) seq: u64,
    pub(super) at_ms: f64,
    pub(super) kind: LoggedKind<'a>,
}

/// What a logged message is, with what the invariants read of it.
pub(super) enum LoggedKind<'a> {
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
    pub(super) fn from_entry(entry: &'a TranscriptEntry) -> Self {
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

    pub(super) fn from_stored(stored: &'a StoredMessage) -> Self {
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
pub(super) struct Run<'a> {
    pub(super) request: u32,
    pub(super) call_id: &'a str,
    pub(super) started_ms: Option<f64>,
    pub(super) owner_seq: Option<u64>,
    pub(super) settled: bool,
    /// `Some(recorded)` when the source records the result's sequence number (a store does, a report does not).
    pub(super) result_seq: Option<Option<u64>>,
}

impl<'a> Run<'a> {
    pub(super) fn from_record(run: &'a ToolRun) -> Self {
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
pub(super) struct Observed<'a> {
    pub(super) kind: &'a str,
    pub(super) call_id: Option<&'a str>,
    pub(super) role: Option<&'a str>,
    /// For an assistant `message_end`: the calls of the fragment, when the event carries it.
    pub(super) holds: Option<Vec<&'a str>>,
}

impl<'a> Observed<'a> {
    pub(super) fn from_event(event: &'a AgentEvent) -> Self {
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

/// Microseconds to milliseconds (exact below 2^53 µs, and order-preserving).
pub(super) fn us_to_ms(us: i64) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let us = us as f64;
    us / 1000.0
}
