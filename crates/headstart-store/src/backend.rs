//! Building blocks for store implementations: everything about a write or a stored row that does not depend on the
//! database, so that every backend validates, encodes, fences and reports the same way. Using a store needs none
//! of it.
//!
//! A backend reads rows in its own types, hands the raw values to these functions, and gets the record types and
//! the [`StoreError`]s every backend must give (their wording included: the conformance suite checks it).

use std::fmt;
use std::time::{Duration, Instant};

use headstart_core::model::{AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage};
use serde::Serialize;

use crate::layer::Write;
use crate::lease::{Lease, SessionEnd};
use crate::types::{
    AdmittedCall, CallKey, RunEnd, RunOutcome, RunState, SessionId, SessionInfo, SessionState, StoredMessage, ToolRun,
};
use crate::StoreError;

/// The stored text of a message: its serde JSON, stored as text (never re-encoded by the database) so that it
/// reads back byte for byte.
pub fn encode(message: &Message, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(message).map_err(|err| encode_failed(what, &err))
}

fn encode_failed(what: &str, err: &serde_json::Error) -> StoreError {
    StoreError::Backend(format!("{what}: cannot encode the message: {err}").into())
}

/// Decodes the stored body of message `seq` of `session`.
pub fn decode(session: &str, seq: i64, body: &str) -> Result<Message, StoreError> {
    serde_json::from_str(body).map_err(|err| {
        StoreError::Decode(
            format!("session {session}, message seq {seq}: the stored body is not a valid message: {err}").into(),
        )
    })
}

/// A stored integer that must be a sequence number or a count (not negative).
pub fn seq_u64(value: i64, session: &str, column: &str) -> Result<u64, StoreError> {
    u64::try_from(value)
        .map_err(|_| StoreError::Decode(format!("session {session}: {column} {value} is not a sequence number").into()))
}

/// A message encoded for its row. A backend encodes it on the caller's side, before the write is queued, so the
/// write carries the row's columns rather than a copy of the message.
#[derive(Debug, Clone)]
pub struct EncodedMessage {
    /// `role`: `user`, `assistant` or `tool_result`.
    pub role: &'static str,
    /// `turn_id`: an assistant fragment's response id (`None` for other messages).
    pub turn_id: Option<String>,
    /// `body`: the message as [`encode`] writes it.
    pub body: String,
}

impl EncodedMessage {
    /// A user prompt; `what` names the write in errors.
    pub fn user(message: &UserMessage, what: &str) -> Result<Self, StoreError> {
        Self::encode(MessageRef::User(message), None, what)
    }

    /// An assistant fragment; `what` names the write in errors.
    pub fn assistant(fragment: &AssistantMessage, what: &str) -> Result<Self, StoreError> {
        Self::encode(MessageRef::Assistant(fragment), Some(fragment.turn_id.clone()), what)
    }

    /// A tool result; `what` names the write in errors.
    pub fn tool_result(result: &ToolResultMessage, what: &str) -> Result<Self, StoreError> {
        Self::encode(MessageRef::ToolResult(result), None, what)
    }

    fn encode(message: MessageRef<'_>, turn_id: Option<String>, what: &str) -> Result<Self, StoreError> {
        Ok(Self {
            role: message.role(),
            turn_id,
            body: serde_json::to_string(&message).map_err(|err| encode_failed(what, &err))?,
        })
    }
}

/// A [`Message`] by reference: serializes as the `Message` holding the same value does (the same tag and variant
/// names; a test holds them equal), so a message is encoded without being cloned into a `Message`.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum MessageRef<'a> {
    User(&'a UserMessage),
    Assistant(&'a AssistantMessage),
    ToolResult(&'a ToolResultMessage),
}

impl MessageRef<'_> {
    /// [`Message::role`].
    fn role(&self) -> &'static str {
        match self {
            Self::User(_) => "user",
            Self::Assistant(_) => "assistant",
            Self::ToolResult(_) => "tool_result",
        }
    }
}

/// One row of the message log, as stored.
#[derive(Debug, Clone)]
pub struct MessageRow {
    /// `seq`.
    pub seq: i64,
    /// `role`.
    pub role: String,
    /// `request`.
    pub request: Option<i64>,
    /// `at_us`.
    pub at_us: i64,
    /// `body`.
    pub body: String,
}

impl MessageRow {
    /// Decodes and checks the row (its body must be a message of the stored role).
    pub fn decode(self, session: &str) -> Result<StoredMessage, StoreError> {
        let MessageRow {
            seq,
            role,
            request,
            at_us,
            body,
        } = self;
        let message = decode(session, seq, &body)?;
        if message.role() != role {
            return Err(StoreError::Decode(
                format!(
                    "session {session}, message seq {seq}: stored with role {role} but its body is a {} message",
                    message.role()
                )
                .into(),
            ));
        }
        let request = request
            .map(|request| {
                u32::try_from(request).map_err(|_| {
                    StoreError::Decode(
                        format!("session {session}, message seq {seq}: request {request} is out of range").into(),
                    )
                })
            })
            .transpose()?;
        Ok(StoredMessage {
            seq: seq_u64(seq, session, "seq")?,
            request,
            at_us,
            message,
        })
    }
}

/// A tool-run row as stored, before validation.
#[derive(Debug, Clone)]
pub struct RunRow {
    /// `call_id`.
    pub call_id: String,
    /// `tool_name`.
    pub tool_name: String,
    /// `request`.
    pub request: i64,
    /// `fragment_seq`.
    pub fragment_seq: i64,
    /// `state`.
    pub state: String,
    /// `outcome`.
    pub outcome: Option<String>,
    /// `admitted_at_us`.
    pub admitted_at_us: i64,
    /// `started_at_us`.
    pub started_at_us: Option<i64>,
    /// `ended_at_us`.
    pub ended_at_us: Option<i64>,
    /// `result_seq`.
    pub result_seq: Option<i64>,
}

impl RunRow {
    /// Checks the row and turns it into a [`ToolRun`].
    pub fn validate(self, session: &str) -> Result<ToolRun, StoreError> {
        let bad = |what: String| {
            StoreError::Decode(format!("session {session}, run of call {}: {what}", self.call_id).into())
        };
        let state = RunState::parse(&self.state).ok_or_else(|| bad(format!("unknown state {:?}", self.state)))?;
        let outcome = match &self.outcome {
            None => None,
            Some(name) => Some(RunOutcome::parse(name).ok_or_else(|| bad(format!("unknown outcome {name:?}")))?),
        };
        let request =
            u32::try_from(self.request).map_err(|_| bad(format!("request {} is out of range", self.request)))?;
        let fragment_seq = u64::try_from(self.fragment_seq)
            .map_err(|_| bad(format!("fragment seq {} is out of range", self.fragment_seq)))?;
        let result_seq = self
            .result_seq
            .map(|seq| u64::try_from(seq).map_err(|_| bad(format!("result seq {seq} is out of range"))))
            .transpose()?;
        Ok(ToolRun {
            call_id: self.call_id,
            tool_name: self.tool_name,
            request,
            fragment_seq,
            state,
            outcome,
            admitted_at_us: self.admitted_at_us,
            started_at_us: self.started_at_us,
            ended_at_us: self.ended_at_us,
            result_seq,
        })
    }
}

/// Finds call `call_id` in `body`, the stored body of its owning fragment (`None` when the fragment is missing).
pub fn owning_call(
    session: &str,
    fragment_seq: i64,
    call_id: &str,
    body: Option<&str>,
) -> Result<ToolCall, StoreError> {
    let missing = |why: &str| {
        StoreError::Decode(
            format!("session {session}, run of call {call_id}: its fragment (message seq {fragment_seq}) {why}").into(),
        )
    };
    let body = body.ok_or_else(|| missing("is missing"))?;
    match decode(session, fragment_seq, body)? {
        Message::Assistant(fragment) => fragment
            .tool_calls()
            .find(|call| call.id == call_id)
            .cloned()
            .ok_or_else(|| missing("does not contain the call")),
        other => Err(missing(&format!("is a {} message", other.role()))),
    }
}

/// The checks of a fragment commit that need no database: every admitted call is a call of the fragment, and none
/// is admitted twice. The backend then checks that none is already admitted in the same request
/// ([`already_admitted`]): a call is identified by its request and id ([`CallKey`]), so the same id admitted by
/// another response of the session is another call.
pub fn check_admissions(what: &str, fragment: &AssistantMessage, admitted: &[AdmittedCall]) -> Result<(), StoreError> {
    for (position, call) in admitted.iter().enumerate() {
        if !fragment.tool_calls().any(|c| c.id == call.call_id) {
            return Err(StoreError::Conflict(
                format!(
                    "{what}: admitted call {} is not a tool call of the fragment",
                    call.call_id
                )
                .into(),
            ));
        }
        if admitted[..position]
            .iter()
            .any(|earlier| earlier.call_id == call.call_id)
        {
            return Err(StoreError::Conflict(
                format!("{what}: call {} is admitted twice in one commit", call.call_id).into(),
            ));
        }
    }
    Ok(())
}

/// The error for admitting call `call` again: its response already has a run for it, in state `state`.
pub fn already_admitted(what: &str, call: &CallKey, state: &str) -> StoreError {
    StoreError::Conflict(
        format!(
            "{what}: call {} is already admitted in this response (request {}; its run is {state})",
            call.call_id, call.request
        )
        .into(),
    )
}

/// The error for a write through a handle opened for reading only; `label` names the store.
pub fn read_only(label: &str, what: &str) -> StoreError {
    StoreError::ReadOnly(format!("{label}: cannot {what}: the store was opened read-only").into())
}

/// The states a run can end in.
fn is_end_state(state: RunState) -> bool {
    matches!(state, RunState::Finished | RunState::Cancelled | RunState::Skipped)
}

/// Checks a tool result against the call's run: `run` is how the result ends it (`None` for a call that was never
/// admitted), `existing` the run's stored state name and result seq (`None` when the call has no run).
pub fn check_result(
    what: &str,
    call: &CallKey,
    run: Option<&RunEnd>,
    existing: Option<(&str, Option<i64>)>,
) -> Result<(), StoreError> {
    let has_ended =
        |state: &str, result_seq: Option<i64>| result_seq.is_some() || !matches!(state, "admitted" | "started");
    match (run, existing) {
        (Some(_), None) => Err(StoreError::Conflict(
            format!("{what}: call {call} has no admitted run").into(),
        )),
        (Some(end), Some(_)) if !is_end_state(end.state) => Err(StoreError::Conflict(
            format!("{what}: a run cannot end in state {}", end.state.as_str()).into(),
        )),
        (_, Some((state, result_seq))) if has_ended(state, result_seq) => Err(StoreError::Conflict(
            format!("{what}: the run of call {call} already ended ({state})").into(),
        )),
        (None, Some(_)) => Err(StoreError::Conflict(
            format!("{what}: call {call} has an open run, which its result must end").into(),
        )),
        _ => Ok(()),
    }
}

/// The queue columns of a session row, read (and, on PostgreSQL, locked) inside a write's transaction.
#[derive(Debug, Clone)]
pub struct LeaseRow {
    /// `state`.
    pub state: String,
    /// `owner`.
    pub owner: Option<String>,
    /// `epoch`.
    pub epoch: i64,
}

/// Decides whether a write to `session` may go on (contract §7.5): `row` is the session's queue columns (`None`: no
/// such session), `fence` the writer's lease (`None`: a handle without one).
///
/// - A fenced writer writes only its own session, and only while the session is `running` under its owner and
///   epoch; anything else is [`StoreError::Fenced`].
/// - A writer without a lease writes any session that no worker holds; a `running` session is fenced.
pub fn check_fence(what: &str, session: &str, row: Option<&LeaseRow>, fence: Option<&Lease>) -> Result<(), StoreError> {
    if let Some(lease) = fence {
        if lease.session.0 != session {
            return Err(StoreError::Conflict(
                format!(
                    "{what}: this handle holds the lease on session {} and writes nothing else",
                    lease.session
                )
                .into(),
            ));
        }
    }
    let Some(row) = row else {
        return Err(StoreError::NoSession(session.to_owned()));
    };
    let running = row.state == SessionState::Running.as_str();
    match fence {
        Some(lease) => {
            let held =
                running && row.owner.as_deref() == Some(lease.owner.as_str()) && epoch_is(row.epoch, lease.epoch);
            if held {
                Ok(())
            } else {
                Err(lease_lost(what, session, row, lease))
            }
        }
        None if running => Err(StoreError::Fenced(format!(
            "{what}: session {session} is held by worker {} (epoch {}); only its lease writes it",
            row.owner.as_deref().unwrap_or("?"),
            row.epoch
        ))),
        None => Ok(()),
    }
}

fn epoch_is(stored: i64, lease: u64) -> bool {
    u64::try_from(stored).is_ok_and(|stored| stored == lease)
}

/// The [`StoreError::Fenced`] of a writer whose `lease` on `session` is lost, saying who holds it now.
pub fn lease_lost(what: &str, session: &str, row: &LeaseRow, lease: &Lease) -> StoreError {
    let now = match (row.state.as_str(), row.owner.as_deref()) {
        ("running", Some(owner)) => format!("it is held by worker {owner} (epoch {})", row.epoch),
        (state, _) => format!("it is {state} (epoch {})", row.epoch),
    };
    StoreError::Fenced(format!(
        "{what}: worker {} lost its lease on session {session} (epoch {}): {now}",
        lease.owner, lease.epoch
    ))
}

/// The error of a [`finish`](crate::SessionQueue::finish) that matched no row: no such session, or the lease is
/// lost (`row` is the session as it is now).
pub fn finish_refused(what: &str, lease: &Lease, row: Option<&LeaseRow>) -> StoreError {
    match row {
        None => StoreError::NoSession(lease.session.0.clone()),
        Some(row) => lease_lost(what, &lease.session.0, row, lease),
    }
}

/// One row of the session listing, as stored.
#[derive(Debug, Clone)]
pub struct SessionRow {
    /// `id`.
    pub id: String,
    /// `created_at_us`.
    pub created_at_us: i64,
    /// How many messages it holds.
    pub messages: i64,
    /// `state`.
    pub state: String,
    /// `owner`.
    pub owner: Option<String>,
    /// `epoch`.
    pub epoch: i64,
    /// `lease_expires_at_us`.
    pub lease_expires_at_us: Option<i64>,
    /// `failure`.
    pub failure: Option<String>,
}

impl SessionRow {
    /// Checks the row and turns it into a [`SessionInfo`].
    pub fn validate(self) -> Result<SessionInfo, StoreError> {
        let id = self.id;
        let messages = seq_u64(self.messages, &id, "message count")?;
        let epoch = seq_u64(self.epoch, &id, "epoch")?;
        let state = SessionState::parse(&self.state)
            .ok_or_else(|| StoreError::Decode(format!("session {id}: unknown state {:?}", self.state).into()))?;
        Ok(SessionInfo {
            id: SessionId(id),
            created_at_us: self.created_at_us,
            messages,
            state,
            owner: self.owner,
            epoch,
            lease_expires_at_us: self.lease_expires_at_us,
            failure: self.failure,
        })
    }
}

/// A lease row returned by a claim or a renewal, before validation.
#[derive(Debug, Clone)]
pub struct ClaimedRow {
    /// `id`.
    pub session: String,
    /// `epoch` after the claim.
    pub epoch: i64,
    /// `lease_expires_at_us` after the claim or renewal.
    pub expires_at_us: i64,
}

impl ClaimedRow {
    /// The lease of `owner`; `sent` is the instant just before the claim or renewal was sent, `lease` its duration.
    pub fn lease(self, owner: &str, sent: Instant, lease: Duration) -> Result<Lease, StoreError> {
        let epoch = seq_u64(self.epoch, &self.session, "epoch")?;
        Ok(Lease {
            session: SessionId(self.session),
            owner: owner.to_owned(),
            epoch,
            expires_at_us: self.expires_at_us,
            held_until: sent.checked_add(lease).unwrap_or(sent),
        })
    }
}

/// A lease duration in whole microseconds, as stored (saturating at about 292,000 years).
pub fn duration_us(lease: Duration) -> i64 {
    i64::try_from(lease.as_micros()).unwrap_or(i64::MAX)
}

/// A claim limit as a SQL `LIMIT`.
pub fn limit_i64(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// Checks an owner name before a claim: it names the worker in every lease, so it must not be empty.
pub fn check_owner(owner: &str) -> Result<(), StoreError> {
    if owner.trim().is_empty() {
        return Err(StoreError::Conflict(
            "claim sessions: the worker's name is empty".into(),
        ));
    }
    Ok(())
}

/// A store operation, named in its errors ("commit a fragment of request 0 to session …"): every backend describes
/// an operation the same way.
#[derive(Debug, Clone, Copy)]
pub enum Op<'a> {
    /// A write of [`TranscriptStore`](crate::TranscriptStore).
    Write(Write<'a>),
    /// [`TranscriptStore::sessions`](crate::TranscriptStore::sessions).
    Sessions,
    /// [`TranscriptStore::load_log`](crate::TranscriptStore::load_log).
    LoadLog(&'a SessionId),
    /// [`TranscriptStore::tool_runs`](crate::TranscriptStore::tool_runs).
    ToolRuns(&'a SessionId),
    /// [`TranscriptStore::unfinished_calls`](crate::TranscriptStore::unfinished_calls).
    UnfinishedCalls(&'a SessionId),
    /// [`SessionQueue::submit`](crate::SessionQueue::submit).
    Submit,
    /// [`SessionQueue::claim`](crate::SessionQueue::claim) by this worker.
    Claim(&'a str),
    /// [`SessionQueue::renew`](crate::SessionQueue::renew).
    Renew(&'a [Lease]),
    /// [`SessionQueue::finish`](crate::SessionQueue::finish).
    Finish(&'a Lease, &'a SessionEnd),
}

impl fmt::Display for Op<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Write(Write::CreateSession) => f.write_str("create a session"),
            Op::Write(Write::AppendUser { session }) => write!(f, "append a user message to session {session}"),
            Op::Write(Write::CommitFragment { session, request, .. }) => {
                write!(f, "commit a fragment of request {request} to session {session}")
            }
            Op::Write(Write::MarkStarted { session, call }) => {
                write!(f, "mark call {call} of session {session} started")
            }
            Op::Write(Write::AppendToolResult {
                session,
                request,
                result,
            }) => {
                write!(
                    f,
                    "append the result of call {} (request {request}) to session {session}",
                    result.tool_call_id
                )
            }
            Op::Sessions => f.write_str("list sessions"),
            Op::LoadLog(session) => write!(f, "load the log of session {session}"),
            Op::ToolRuns(session) => write!(f, "list the tool runs of session {session}"),
            Op::UnfinishedCalls(session) => write!(f, "list the unfinished calls of session {session}"),
            Op::Submit => f.write_str("submit a session"),
            Op::Claim(owner) => write!(f, "claim sessions for worker {owner}"),
            Op::Renew([lease]) => write!(
                f,
                "renew the lease of worker {} on session {}",
                lease.owner, lease.session
            ),
            Op::Renew(leases) => write!(f, "renew {} leases", leases.len()),
            Op::Finish(lease, end) => {
                let action = match end {
                    SessionEnd::Completed => "complete",
                    SessionEnd::Failed(_) => "fail",
                    SessionEnd::Released => "release",
                };
                write!(
                    f,
                    "{action} session {} (worker {}, epoch {})",
                    lease.session, lease.owner, lease.epoch
                )
            }
        }
    }
}

/// The state a finished session is stored in, and its failure reason.
pub fn end_state(end: &SessionEnd) -> (SessionState, Option<&str>) {
    match end {
        SessionEnd::Completed => (SessionState::Completed, None),
        SessionEnd::Failed(reason) => (SessionState::Failed, Some(reason.as_str())),
        SessionEnd::Released => (SessionState::Pending, None),
    }
}

#[cfg(test)]
mod tests {
    use headstart_core::model::Message;

    use super::EncodedMessage;
    use crate::conformance::data::{call, prefix, result};

    /// A message encoded by reference is stored exactly as the `Message` holding it (its role column included).
    #[test]
    fn encoded_messages_are_the_message_encoding() {
        let lookup = call("c1", "lookup");
        let fragment = prefix("turn-1", "looking", std::slice::from_ref(&lookup));
        let user = headstart_core::model::UserMessage::new("hello");
        let tool_result = result(&lookup, "found");
        let cases = [
            (EncodedMessage::user(&user, "w"), Message::User(user.clone())),
            (
                EncodedMessage::assistant(&fragment, "w"),
                Message::Assistant(fragment.clone()),
            ),
            (
                EncodedMessage::tool_result(&tool_result, "w"),
                Message::ToolResult(tool_result.clone()),
            ),
        ];
        for (encoded, message) in cases {
            let encoded = encoded.expect("encode");
            assert_eq!(
                encoded.body,
                serde_json::to_string(&message).expect("encode the message")
            );
            assert_eq!(encoded.role, message.role());
        }
    }
}
