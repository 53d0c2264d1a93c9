//! The store's operations as synchronous functions on a connection. A write runs inside an `IMMEDIATE` transaction
//! its caller has opened (`group.rs`: alone, or under group commit together with other writes, each in its own
//! savepoint) and names itself in its errors with the `what` it is given; each read runs in one (deferred)
//! transaction so it sees one snapshot.

use headstart_core::model::{Message, ToolCall};
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction, TransactionBehavior};

use super::errors::sqlite_error;
use super::sql;
use crate::types::{
    AdmittedCall, RunEnd, RunOutcome, RunState, SessionId, SessionInfo, StoredMessage, ToolRun, UnfinishedCall,
};
use crate::StoreError;

/// Maps rusqlite errors of one operation, naming the operation.
fn ctx(what: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |err| sqlite_error(err, what, None)
}

/// Runs a statement through the connection's prepared-statement cache: parsing a statement costs about as much as
/// executing a small one, and every statement of the store is a constant, so each is parsed once per connection.
fn execute_cached<P: rusqlite::Params>(conn: &Connection, sql: &str, params: P) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// [`execute_cached`] for a query returning one row.
fn query_row_cached<T, P, F>(conn: &Connection, sql: &str, params: P, map: F) -> rusqlite::Result<T>
where
    P: rusqlite::Params,
    F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
{
    conn.prepare_cached(sql)?.query_row(params, map)
}

fn begin_read<'c>(conn: &'c mut Connection, what: &str) -> Result<Transaction<'c>, StoreError> {
    conn.transaction_with_behavior(TransactionBehavior::Deferred)
        .map_err(ctx(what))
}

fn require_session(conn: &Connection, session: &str, what: &str) -> Result<(), StoreError> {
    let exists: bool = query_row_cached(conn, sql::SESSION_EXISTS, [session], |row| row.get(0)).map_err(ctx(what))?;
    if exists {
        Ok(())
    } else {
        Err(StoreError::NoSession(session.to_owned()))
    }
}

fn next_seq(conn: &Connection, session: &str, what: &str) -> Result<i64, StoreError> {
    query_row_cached(conn, sql::NEXT_SEQ, [session], |row| row.get(0)).map_err(ctx(what))
}

fn encode(message: &Message, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(message)
        .map_err(|err| StoreError::Backend(format!("{what}: cannot encode the message: {err}")))
}

fn seq_u64(value: i64, session: &str, column: &str) -> Result<u64, StoreError> {
    u64::try_from(value)
        .map_err(|_| StoreError::Decode(format!("session {session}: {column} {value} is not a sequence number")))
}

/// Inserts a message at the next sequence number; returns it.
fn insert_message(
    conn: &Connection,
    session: &str,
    message: &Message,
    request: Option<u32>,
    at_us: i64,
    what: &str,
) -> Result<i64, StoreError> {
    let body = encode(message, what)?;
    let turn_id = match message {
        Message::Assistant(fragment) => Some(fragment.turn_id.as_str()),
        _ => None,
    };
    let seq = next_seq(conn, session, what)?;
    execute_cached(
        conn,
        sql::INSERT_MESSAGE,
        params![
            session,
            seq,
            message.role(),
            request.map(i64::from),
            turn_id,
            at_us,
            body
        ],
    )
    .map_err(ctx(what))?;
    Ok(seq)
}

/// `what`: "create session <id>".
pub(super) fn create_session(conn: &Connection, what: &str, session: &str, at_us: i64) -> Result<(), StoreError> {
    execute_cached(conn, sql::INSERT_SESSION, params![session, at_us]).map_err(ctx(what))?;
    Ok(())
}

pub(super) fn sessions(conn: &mut Connection) -> Result<Vec<SessionInfo>, StoreError> {
    let what = "list sessions";
    let tx = begin_read(conn, what)?;
    let rows = {
        let mut stmt = tx.prepare_cached(sql::LIST_SESSIONS).map_err(ctx(what))?;
        let rows = stmt
            .query_map([], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
            })
            .map_err(ctx(what))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(ctx(what))?
    };
    rows.into_iter()
        .map(|(id, created_at_us, messages)| {
            let messages = seq_u64(messages, &id, "message count")?;
            Ok(SessionInfo {
                id: SessionId(id),
                created_at_us,
                messages,
            })
        })
        .collect()
}

/// `what`: "append a user message to session <id>".
pub(super) fn append_user(
    conn: &Connection,
    what: &str,
    session: &str,
    message: &Message,
    at_us: i64,
) -> Result<u64, StoreError> {
    require_session(conn, session, what)?;
    let seq = insert_message(conn, session, message, None, at_us, what)?;
    seq_u64(seq, session, "seq")
}

/// `what`: "commit a fragment of request <n> to session <id>".
pub(super) fn commit_fragment(
    conn: &Connection,
    what: &str,
    session: &str,
    request: u32,
    fragment: &Message,
    admitted: &[AdmittedCall],
    at_us: i64,
) -> Result<u64, StoreError> {
    let Message::Assistant(assistant) = fragment else {
        return Err(StoreError::Backend(format!(
            "{what}: the fragment is not an assistant message"
        )));
    };
    require_session(conn, session, what)?;
    // Validate every admitted call before writing anything (the transaction would roll back anyway; this gives
    // the caller a precise message).
    for (position, call) in admitted.iter().enumerate() {
        if !assistant.tool_calls().any(|c| c.id == call.call_id) {
            return Err(StoreError::Conflict(format!(
                "{what}: admitted call {} is not a tool call of the fragment",
                call.call_id
            )));
        }
        if admitted[..position]
            .iter()
            .any(|earlier| earlier.call_id == call.call_id)
        {
            return Err(StoreError::Conflict(format!(
                "{what}: call {} is admitted twice in one commit",
                call.call_id
            )));
        }
        let existing: Option<String> =
            query_row_cached(conn, sql::RUN_STATE, params![session, call.call_id], |row| row.get(0))
                .optional()
                .map_err(ctx(what))?;
        if let Some(state) = existing {
            return Err(StoreError::Conflict(format!(
                "{what}: call {} is already admitted in this session (its run is {state})",
                call.call_id
            )));
        }
    }
    let seq = insert_message(conn, session, fragment, Some(request), at_us, what)?;
    let first_admission: i64 =
        query_row_cached(conn, sql::NEXT_ADMISSION, [session], |row| row.get(0)).map_err(ctx(what))?;
    for (admission, call) in (first_admission..).zip(admitted) {
        execute_cached(
            conn,
            sql::INSERT_ADMITTED_RUN,
            params![
                session,
                call.call_id,
                admission,
                call.tool_name,
                i64::from(request),
                seq,
                at_us
            ],
        )
        .map_err(ctx(what))?;
    }
    seq_u64(seq, session, "seq")
}

/// `what`: "mark call <call id> of session <id> started".
pub(super) fn mark_started(
    conn: &Connection,
    what: &str,
    session: &str,
    call_id: &str,
    at_us: i64,
) -> Result<(), StoreError> {
    require_session(conn, session, what)?;
    // Matches nothing when the run already moved on (or does not exist): a late write never moves a run back.
    execute_cached(conn, sql::MARK_STARTED, params![session, call_id, at_us]).map_err(ctx(what))?;
    Ok(())
}

/// The states a run can end in.
fn is_end_state(state: RunState) -> bool {
    matches!(state, RunState::Finished | RunState::Cancelled | RunState::Skipped)
}

/// Whether a stored run (its state name and result seq) has ended.
fn has_ended(state: &str, result_seq: Option<i64>) -> bool {
    result_seq.is_some() || !matches!(state, "admitted" | "started")
}

/// `what`: "append the result of call <call id> to session <id>".
pub(super) fn append_tool_result(
    conn: &Connection,
    what: &str,
    session: &str,
    result: &Message,
    run: Option<RunEnd>,
    at_us: i64,
) -> Result<u64, StoreError> {
    let Message::ToolResult(tool_result) = result else {
        return Err(StoreError::Backend(format!("{what}: the message is not a tool result")));
    };
    let call_id = tool_result.tool_call_id.as_str();
    require_session(conn, session, what)?;
    let existing: Option<(String, Option<i64>)> =
        query_row_cached(conn, sql::RUN_STATE, params![session, call_id], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()
        .map_err(ctx(what))?;
    match (&run, &existing) {
        (Some(_), None) => {
            return Err(StoreError::Conflict(format!(
                "{what}: call {call_id} has no admitted run"
            )));
        }
        (Some(end), Some(_)) if !is_end_state(end.state) => {
            return Err(StoreError::Conflict(format!(
                "{what}: a run cannot end in state {}",
                end.state.as_str()
            )));
        }
        (_, Some((state, result_seq))) if has_ended(state, *result_seq) => {
            return Err(StoreError::Conflict(format!(
                "{what}: the run of call {call_id} already ended ({state})"
            )));
        }
        (None, Some(_)) => {
            return Err(StoreError::Conflict(format!(
                "{what}: call {call_id} has an open run, which its result must end"
            )));
        }
        _ => {}
    }
    let seq = insert_message(conn, session, result, None, at_us, what)?;
    if let Some(end) = run {
        let changed = execute_cached(
            conn,
            sql::END_RUN,
            params![
                session,
                call_id,
                end.state.as_str(),
                end.outcome.as_str(),
                at_us,
                seq,
                end.started_at_us
            ],
        )
        .map_err(ctx(what))?;
        if changed != 1 {
            return Err(StoreError::Conflict(format!(
                "{what}: the run of call {call_id} could not be ended"
            )));
        }
    }
    seq_u64(seq, session, "seq")
}

pub(super) fn load_log(conn: &mut Connection, session: &str) -> Result<Vec<StoredMessage>, StoreError> {
    let what = format!("load the log of session {session}");
    let tx = begin_read(conn, &what)?;
    require_session(&tx, session, &what)?;
    let rows = {
        let mut stmt = tx.prepare_cached(sql::LOAD_LOG).map_err(ctx(&what))?;
        let rows = stmt
            .query_map([session], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, Option<i64>>(2)?,
                    row.get::<_, i64>(3)?,
                    row.get::<_, String>(4)?,
                ))
            })
            .map_err(ctx(&what))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(ctx(&what))?
    };
    rows.into_iter()
        .map(|(seq, role, request, at_us, body)| {
            let message = decode(session, seq, &body)?;
            if message.role() != role {
                return Err(StoreError::Decode(format!(
                    "session {session}, message seq {seq}: stored with role {role} but its body is a {} message",
                    message.role()
                )));
            }
            let request = request
                .map(|request| {
                    u32::try_from(request).map_err(|_| {
                        StoreError::Decode(format!(
                            "session {session}, message seq {seq}: request {request} is out of range"
                        ))
                    })
                })
                .transpose()?;
            Ok(StoredMessage {
                seq: seq_u64(seq, session, "seq")?,
                request,
                at_us,
                message,
            })
        })
        .collect()
}

fn decode(session: &str, seq: i64, body: &str) -> Result<Message, StoreError> {
    serde_json::from_str(body).map_err(|err| {
        StoreError::Decode(format!(
            "session {session}, message seq {seq}: the stored body is not a valid message: {err}"
        ))
    })
}

/// A run row as stored, before validation.
struct RawRun {
    call_id: String,
    tool_name: String,
    request: i64,
    fragment_seq: i64,
    state: String,
    outcome: Option<String>,
    admitted_at_us: i64,
    started_at_us: Option<i64>,
    ended_at_us: Option<i64>,
    result_seq: Option<i64>,
}

impl RawRun {
    /// Reads the run columns of [`sql::TOOL_RUNS`] (also the first columns of [`sql::UNFINISHED_RUNS`]).
    fn read(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(RawRun {
            call_id: row.get(0)?,
            tool_name: row.get(1)?,
            request: row.get(2)?,
            fragment_seq: row.get(3)?,
            state: row.get(4)?,
            outcome: row.get(5)?,
            admitted_at_us: row.get(6)?,
            started_at_us: row.get(7)?,
            ended_at_us: row.get(8)?,
            result_seq: row.get(9)?,
        })
    }

    fn validate(self, session: &str) -> Result<ToolRun, StoreError> {
        let bad = |what: String| StoreError::Decode(format!("session {session}, run of call {}: {what}", self.call_id));
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

pub(super) fn tool_runs(conn: &mut Connection, session: &str) -> Result<Vec<ToolRun>, StoreError> {
    let what = format!("list the tool runs of session {session}");
    let tx = begin_read(conn, &what)?;
    require_session(&tx, session, &what)?;
    let rows = {
        let mut stmt = tx.prepare_cached(sql::TOOL_RUNS).map_err(ctx(&what))?;
        let rows = stmt.query_map([session], RawRun::read).map_err(ctx(&what))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(ctx(&what))?
    };
    rows.into_iter().map(|raw| raw.validate(session)).collect()
}

pub(super) fn unfinished_calls(conn: &mut Connection, session: &str) -> Result<Vec<UnfinishedCall>, StoreError> {
    let what = format!("list the unfinished calls of session {session}");
    let tx = begin_read(conn, &what)?;
    require_session(&tx, session, &what)?;
    let rows = {
        let mut stmt = tx.prepare_cached(sql::UNFINISHED_RUNS).map_err(ctx(&what))?;
        let rows = stmt
            .query_map([session], |row| {
                Ok((RawRun::read(row)?, row.get::<_, Option<String>>(10)?))
            })
            .map_err(ctx(&what))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(ctx(&what))?
    };
    rows.into_iter()
        .map(|(raw, body)| {
            let fragment_seq = raw.fragment_seq;
            let run = raw.validate(session)?;
            let call = owning_call(session, fragment_seq, &run.call_id, body.as_deref())?;
            Ok(UnfinishedCall { run, call })
        })
        .collect()
}

/// Finds call `call_id` in the body of its owning fragment.
fn owning_call(session: &str, fragment_seq: i64, call_id: &str, body: Option<&str>) -> Result<ToolCall, StoreError> {
    let missing = |why: &str| {
        StoreError::Decode(format!(
            "session {session}, run of call {call_id}: its fragment (message seq {fragment_seq}) {why}"
        ))
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
