//! The store's operations as synchronous functions on a connection. A write runs inside an `IMMEDIATE` transaction
//! its caller has opened (`group.rs`: alone, or under group commit together with other writes, each in its own
//! savepoint) and names itself in its errors with the `what` it is given; each read runs in one (deferred)
//! transaction so it sees one snapshot.

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction, TransactionBehavior};

use super::errors::sqlite_error;
use super::sql;
use crate::backend::{self, EncodedMessage, LeaseRow, MessageRow, Op, RunRow};
use crate::lease::Lease;
use crate::types::{AdmittedCall, CallKey, RunEnd, SessionId, SessionSettings, StoredMessage, ToolRun, UnfinishedCall};
use crate::StoreError;

/// Maps rusqlite errors of one operation, naming the operation.
pub(super) fn ctx(what: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |err| sqlite_error(err, what, None)
}

/// Runs a statement through the connection's prepared-statement cache: parsing a statement costs about as much as
/// executing a small one, and every statement of the store is a constant, so each is parsed once per connection.
pub(super) fn execute_cached<P: rusqlite::Params>(conn: &Connection, sql: &str, params: P) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// [`execute_cached`] for a query returning one row.
pub(super) fn query_row_cached<T, P, F>(conn: &Connection, sql: &str, params: P, map: F) -> rusqlite::Result<T>
where
    P: rusqlite::Params,
    F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
{
    conn.prepare_cached(sql)?.query_row(params, map)
}

pub(super) fn begin_read<'c>(conn: &'c mut Connection, what: &str) -> Result<Transaction<'c>, StoreError> {
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

/// The session's queue columns (`None`: no such session).
pub(super) fn lease_row(conn: &Connection, session: &str, what: &str) -> Result<Option<LeaseRow>, StoreError> {
    query_row_cached(conn, sql::SESSION_LEASE, [session], |row| {
        Ok(LeaseRow {
            state: row.get(0)?,
            owner: row.get(1)?,
            epoch: row.get(2)?,
        })
    })
    .optional()
    .map_err(ctx(what))
}

/// The first step of every write to an existing session: the session exists and `fence` may write it
/// (`backend::check_fence`). The write transaction already holds SQLite's write lock, so nothing can claim the
/// session between this check and the commit.
fn check_write(conn: &Connection, session: &str, fence: Option<&Lease>, what: &str) -> Result<(), StoreError> {
    let row = lease_row(conn, session, what)?;
    backend::check_fence(what, session, row.as_ref(), fence)
}

fn next_seq(conn: &Connection, session: &str, what: &str) -> Result<i64, StoreError> {
    query_row_cached(conn, sql::NEXT_SEQ, [session], |row| row.get(0)).map_err(ctx(what))
}

fn seq_u64(value: i64, session: &str, column: &str) -> Result<u64, StoreError> {
    backend::seq_u64(value, session, column)
}

/// Inserts a message at the next sequence number; returns it.
fn insert_message(
    conn: &Connection,
    session: &str,
    message: &EncodedMessage,
    request: Option<u32>,
    at_us: i64,
    what: &str,
) -> Result<i64, StoreError> {
    let seq = next_seq(conn, session, what)?;
    execute_cached(
        conn,
        sql::INSERT_MESSAGE,
        params![
            session,
            seq,
            message.role,
            request.map(i64::from),
            message.turn_id,
            at_us,
            message.body
        ],
    )
    .map_err(ctx(what))?;
    Ok(seq)
}

/// Creates session `session` (`unqueued`), or, given a prompt and settings, submits it: `pending` with the prompt
/// as seq 1.
pub(super) fn create_session(
    conn: &Connection,
    what: &str,
    session: &str,
    submitted: Option<(&EncodedMessage, &SessionSettings)>,
    at_us: i64,
) -> Result<(), StoreError> {
    let row = backend::new_session(submitted.map(|(_, settings)| settings));
    execute_cached(
        conn,
        sql::INSERT_SESSION,
        params![session, at_us, row.state.as_str(), row.system, row.model, row.queue],
    )
    .map_err(ctx(what))?;
    if let Some((prompt, _)) = submitted {
        insert_message(conn, session, prompt, None, at_us, what)?;
    }
    Ok(())
}

pub(super) fn append_user(
    conn: &Connection,
    what: &str,
    fence: Option<&Lease>,
    session: &str,
    message: &EncodedMessage,
    at_us: i64,
) -> Result<u64, StoreError> {
    check_write(conn, session, fence, what)?;
    let seq = insert_message(conn, session, message, None, at_us, what)?;
    seq_u64(seq, session, "seq")
}

/// `invalid` is what [`backend::check_admissions`] found wrong with `admitted`, checked before the write was queued
/// and reported after the session's own checks.
#[allow(clippy::too_many_arguments)] // one per column written, each named at the call site
pub(super) fn commit_fragment(
    conn: &Connection,
    what: &str,
    fence: Option<&Lease>,
    session: &str,
    request: u32,
    fragment: &EncodedMessage,
    admitted: &[AdmittedCall],
    invalid: Option<&StoreError>,
    at_us: i64,
) -> Result<u64, StoreError> {
    check_write(conn, session, fence, what)?;
    if let Some(invalid) = invalid {
        return Err(invalid.clone());
    }
    for call in admitted {
        let existing: Option<String> = query_row_cached(
            conn,
            sql::RUN_STATE,
            params![session, i64::from(request), call.call_id],
            |row| row.get(0),
        )
        .optional()
        .map_err(ctx(what))?;
        if let Some(state) = existing {
            return Err(backend::already_admitted(
                what,
                &CallKey::new(request, &*call.call_id),
                &state,
            ));
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
                at_us,
                call.sealed_at_us
            ],
        )
        .map_err(ctx(what))?;
    }
    seq_u64(seq, session, "seq")
}

pub(super) fn mark_started(
    conn: &Connection,
    what: &str,
    fence: Option<&Lease>,
    session: &str,
    call: &CallKey,
    at_us: i64,
) -> Result<(), StoreError> {
    check_write(conn, session, fence, what)?;
    // Matches nothing when the run already moved on (or does not exist): a late write never moves a run back.
    execute_cached(
        conn,
        sql::MARK_STARTED,
        params![session, i64::from(call.request), call.call_id, at_us],
    )
    .map_err(ctx(what))?;
    Ok(())
}

#[allow(clippy::too_many_arguments)] // one per column written, each named at the call site
pub(super) fn append_tool_result(
    conn: &Connection,
    what: &str,
    fence: Option<&Lease>,
    session: &str,
    call: &CallKey,
    result: &EncodedMessage,
    run: Option<RunEnd>,
    at_us: i64,
) -> Result<u64, StoreError> {
    let request = i64::from(call.request);
    check_write(conn, session, fence, what)?;
    let existing: Option<(String, Option<i64>)> =
        query_row_cached(conn, sql::RUN_STATE, params![session, request, call.call_id], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()
        .map_err(ctx(what))?;
    let existing = existing
        .as_ref()
        .map(|(state, result_seq)| (state.as_str(), *result_seq));
    backend::check_result(what, call, run.as_ref(), existing)?;
    let seq = insert_message(conn, session, result, Some(call.request), at_us, what)?;
    if let Some(end) = run {
        let changed = execute_cached(
            conn,
            sql::END_RUN,
            params![
                session,
                request,
                call.call_id,
                end.state.as_str(),
                end.outcome.as_str(),
                at_us,
                seq,
                end.started_at_us
            ],
        )
        .map_err(ctx(what))?;
        if changed != 1 {
            return Err(StoreError::Conflict(
                format!("{what}: the run of call {call} could not be ended").into(),
            ));
        }
    }
    seq_u64(seq, session, "seq")
}

pub(super) fn load_log(conn: &mut Connection, id: &SessionId, after: u64) -> Result<Vec<StoredMessage>, StoreError> {
    let what = Op::LoadLog(id, after).to_string();
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let session = id.0.as_str();
    let tx = begin_read(conn, &what)?;
    require_session(&tx, session, &what)?;
    let rows = {
        let mut stmt = tx.prepare_cached(sql::LOAD_LOG).map_err(ctx(&what))?;
        let rows = stmt
            .query_map(rusqlite::params![session, after], |row| {
                Ok(MessageRow {
                    seq: row.get(0)?,
                    role: row.get(1)?,
                    request: row.get(2)?,
                    at_us: row.get(3)?,
                    body: row.get(4)?,
                })
            })
            .map_err(ctx(&what))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(ctx(&what))?
    };
    rows.into_iter().map(|row| row.decode(session)).collect()
}

/// Reads the run columns of [`sql::TOOL_RUNS`] (also the first columns of [`sql::UNFINISHED_RUNS`]).
fn run_row(row: &Row<'_>) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
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
        sealed_at_us: row.get(10)?,
    })
}

pub(super) fn tool_runs(conn: &mut Connection, id: &SessionId, request: u32) -> Result<Vec<ToolRun>, StoreError> {
    let what = Op::ToolRuns(id, request).to_string();
    let session = id.0.as_str();
    let tx = begin_read(conn, &what)?;
    require_session(&tx, session, &what)?;
    let rows = {
        let mut stmt = tx.prepare_cached(sql::TOOL_RUNS).map_err(ctx(&what))?;
        let rows = stmt
            .query_map(params![session, i64::from(request)], run_row)
            .map_err(ctx(&what))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(ctx(&what))?
    };
    rows.into_iter().map(|raw| raw.validate(session)).collect()
}

pub(super) fn unfinished_calls(conn: &mut Connection, id: &SessionId) -> Result<Vec<UnfinishedCall>, StoreError> {
    let what = Op::UnfinishedCalls(id).to_string();
    let session = id.0.as_str();
    let tx = begin_read(conn, &what)?;
    require_session(&tx, session, &what)?;
    let rows = {
        let mut stmt = tx.prepare_cached(sql::UNFINISHED_RUNS).map_err(ctx(&what))?;
        let rows = stmt
            .query_map([session], |row| Ok((run_row(row)?, row.get::<_, Option<String>>(11)?)))
            .map_err(ctx(&what))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(ctx(&what))?
    };
    rows.into_iter()
        .map(|(raw, body)| {
            let fragment_seq = raw.fragment_seq;
            let run = raw.validate(session)?;
            let call = backend::owning_call(session, fragment_seq, &run.call_id, body.as_deref())?;
            Ok(UnfinishedCall { run, call })
        })
        .collect()
}
