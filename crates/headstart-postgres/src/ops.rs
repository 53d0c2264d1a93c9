//! The store's operations, each inside the transaction its caller opened (`PgStore::run`: a read-committed write
//! transaction, or a repeatable-read read-only one so that a read sees one snapshot). Each names itself in its
//! errors with the `what` it is given. Validation, decoding and fencing decisions are `headstart_store::backend`'s,
//! shared with every backend.

use std::future::Future;
use std::pin::Pin;

use deadpool_postgres::Transaction;
use headstart_store::backend::{self, EncodedMessage, LeaseRow, MessageRow, RunRow};
use headstart_store::{
    AdmittedCall, CallKey, Lease, RunEnd, SessionSettings, StoreError, StoredMessage, ToolRun, UnfinishedCall,
};
use tokio_postgres::types::{FromSql, ToSql};
use tokio_postgres::Row;

use crate::errors::{decode_error, pg_error, Stage};
use crate::metrics;
use crate::sql;

/// A boxed operation future borrowing its transaction.
pub(crate) type OpFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// What kind of transaction an operation runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Repeatable read, read only.
    Read,
    /// Read committed, committed at `synchronous_commit` on or above.
    Write,
    /// A transcript write that admits no call: relaxed to `synchronous_commit = off` under
    /// [`Durability::Normal`](headstart_store::Durability::Normal).
    WriteRelaxable,
}

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// Runs a statement (prepared once per connection) and returns its rows.
pub(crate) async fn query(
    tx: &Transaction<'_>,
    statement: &str,
    params: Params<'_>,
    what: &str,
) -> Result<Vec<Row>, StoreError> {
    let fail = |err: tokio_postgres::Error| pg_error(err, what, Stage::Running);
    let prepared = tx.prepare_cached(statement).await.map_err(fail)?;
    metrics::sent(1);
    tx.query(&prepared, params).await.map_err(fail)
}

/// [`query`] for at most one row.
pub(crate) async fn query_opt(
    tx: &Transaction<'_>,
    statement: &str,
    params: Params<'_>,
    what: &str,
) -> Result<Option<Row>, StoreError> {
    let fail = |err: tokio_postgres::Error| pg_error(err, what, Stage::Running);
    let prepared = tx.prepare_cached(statement).await.map_err(fail)?;
    metrics::sent(1);
    tx.query_opt(&prepared, params).await.map_err(fail)
}

/// [`query`] for exactly one row.
pub(crate) async fn query_one(
    tx: &Transaction<'_>,
    statement: &str,
    params: Params<'_>,
    what: &str,
) -> Result<Row, StoreError> {
    query_opt(tx, statement, params, what)
        .await?
        .ok_or_else(|| StoreError::Backend(format!("{what}: a statement that returns one row returned none").into()))
}

/// [`query`] for a statement without rows; returns how many rows it changed.
pub(crate) async fn execute(
    tx: &Transaction<'_>,
    statement: &str,
    params: Params<'_>,
    what: &str,
) -> Result<u64, StoreError> {
    let fail = |err: tokio_postgres::Error| pg_error(err, what, Stage::Running);
    let prepared = tx.prepare_cached(statement).await.map_err(fail)?;
    metrics::sent(1);
    tx.execute(&prepared, params).await.map_err(fail)
}

/// Column `index` of `row`; a value of another type than the schema's is [`StoreError::Decode`].
pub(crate) fn get<'r, T: FromSql<'r>>(row: &'r Row, index: usize, what: &str) -> Result<T, StoreError> {
    row.try_get(index)
        .map_err(|err| decode_error(err, &format!("{what}: column {index}")))
}

pub(crate) fn lease_row(row: &Row, what: &str) -> Result<LeaseRow, StoreError> {
    Ok(LeaseRow {
        state: get(row, 0, what)?,
        owner: get(row, 1, what)?,
        epoch: get(row, 2, what)?,
    })
}

/// The first step of every write to an existing session: lock its row, then check that it exists and that
/// `fence` may write it (`backend::check_fence`).
async fn lock_session(
    tx: &Transaction<'_>,
    session: &str,
    fence: Option<&Lease>,
    what: &str,
) -> Result<(), StoreError> {
    let row = query_opt(tx, sql::LOCK_SESSION, &[&session], what).await?;
    let row = row.map(|row| lease_row(&row, what)).transpose()?;
    backend::check_fence(what, session, row.as_ref(), fence)
}

async fn require_session(tx: &Transaction<'_>, session: &str, what: &str) -> Result<(), StoreError> {
    let row = query_one(tx, sql::SESSION_EXISTS, &[&session], what).await?;
    if get::<bool>(&row, 0, what)? {
        Ok(())
    } else {
        Err(StoreError::NoSession(session.to_owned()))
    }
}

/// Appends a message at the session's next sequence number; returns it.
async fn insert_message(
    tx: &Transaction<'_>,
    session: &str,
    message: &EncodedMessage,
    request: Option<u32>,
    at_us: i64,
    what: &str,
) -> Result<i64, StoreError> {
    let request = request.map(i64::from);
    let row = query_one(
        tx,
        sql::INSERT_MESSAGE,
        &[
            &session,
            &message.role,
            &request,
            &message.turn_id,
            &at_us,
            &message.body,
        ],
        what,
    )
    .await?;
    get(&row, 0, what)
}

pub(crate) fn epoch_i64(epoch: u64) -> i64 {
    i64::try_from(epoch).unwrap_or(i64::MAX)
}

/// Creates session `session` (`unqueued`), or, given a prompt and settings, submits it: `pending` with the prompt
/// as seq 1.
pub(crate) async fn create_session(
    tx: &Transaction<'_>,
    what: &str,
    session: &str,
    submitted: Option<(&EncodedMessage, &SessionSettings)>,
    at_us: i64,
) -> Result<(), StoreError> {
    let row = backend::new_session(submitted.map(|(_, settings)| settings));
    execute(
        tx,
        sql::INSERT_SESSION,
        &[
            &session,
            &at_us,
            &row.state.as_str(),
            &row.system,
            &row.model,
            &row.queue,
        ],
        what,
    )
    .await?;
    if let Some((prompt, _)) = submitted {
        insert_message(tx, session, prompt, None, at_us, what).await?;
    }
    Ok(())
}

pub(crate) async fn append_user(
    tx: &Transaction<'_>,
    what: &str,
    fence: Option<&Lease>,
    session: &str,
    message: &EncodedMessage,
    at_us: i64,
) -> Result<u64, StoreError> {
    lock_session(tx, session, fence, what).await?;
    let seq = insert_message(tx, session, message, None, at_us, what).await?;
    backend::seq_u64(seq, session, "seq")
}

/// `invalid` is what [`backend::check_admissions`] found wrong with `admitted`, checked before the operation was
/// spawned and reported after the session's own checks.
#[allow(clippy::too_many_arguments)] // one per column written, each named at the call site
pub(crate) async fn commit_fragment(
    tx: &Transaction<'_>,
    what: &str,
    fence: Option<&Lease>,
    session: &str,
    request: u32,
    fragment: &EncodedMessage,
    admitted: &[AdmittedCall],
    invalid: Option<StoreError>,
    at_us: i64,
) -> Result<u64, StoreError> {
    lock_session(tx, session, fence, what).await?;
    if let Some(invalid) = invalid {
        return Err(invalid);
    }
    let call_ids: Vec<&str> = admitted.iter().map(|call| call.call_id.as_str()).collect();
    let request_i64 = i64::from(request);
    if !admitted.is_empty() {
        let existing = query(tx, sql::ADMITTED_AMONG, &[&session, &request_i64, &call_ids], what).await?;
        if let Some(row) = existing.first() {
            let call_id: String = get(row, 0, what)?;
            let state: String = get(row, 1, what)?;
            return Err(backend::already_admitted(what, &CallKey::new(request, call_id), &state));
        }
    }
    let seq = insert_message(tx, session, fragment, Some(request), at_us, what).await?;
    if !admitted.is_empty() {
        let tool_names: Vec<&str> = admitted.iter().map(|call| call.tool_name.as_str()).collect();
        let sealed: Vec<Option<i64>> = admitted.iter().map(|call| call.sealed_at_us).collect();
        let request = request_i64;
        execute(
            tx,
            sql::INSERT_ADMITTED_RUNS,
            &[&session, &call_ids, &tool_names, &request, &seq, &at_us, &sealed],
            what,
        )
        .await?;
    }
    backend::seq_u64(seq, session, "seq")
}

pub(crate) async fn mark_started(
    tx: &Transaction<'_>,
    what: &str,
    fence: Option<&Lease>,
    session: &str,
    call: &CallKey,
    at_us: i64,
) -> Result<(), StoreError> {
    lock_session(tx, session, fence, what).await?;
    // Matches nothing when the run already moved on (or does not exist): a late write never moves a run back.
    let request = i64::from(call.request);
    execute(
        tx,
        sql::MARK_STARTED,
        &[&session, &request, &call.call_id, &at_us],
        what,
    )
    .await?;
    Ok(())
}

#[allow(clippy::too_many_arguments)] // one per column written, each named at the call site
pub(crate) async fn append_tool_result(
    tx: &Transaction<'_>,
    what: &str,
    fence: Option<&Lease>,
    session: &str,
    call: &CallKey,
    result: &EncodedMessage,
    run: Option<RunEnd>,
    at_us: i64,
) -> Result<u64, StoreError> {
    let call_id = call.call_id.as_str();
    let request_i64 = i64::from(call.request);
    lock_session(tx, session, fence, what).await?;
    let existing = query_opt(tx, sql::RUN_STATE, &[&session, &request_i64, &call_id], what).await?;
    let existing: Option<(String, Option<i64>)> = existing
        .map(|row| Ok::<_, StoreError>((get(&row, 0, what)?, get(&row, 1, what)?)))
        .transpose()?;
    let existing = existing
        .as_ref()
        .map(|(state, result_seq)| (state.as_str(), *result_seq));
    backend::check_result(what, call, run.as_ref(), existing)?;
    let seq = insert_message(tx, session, result, Some(call.request), at_us, what).await?;
    if let Some(end) = run {
        let changed = execute(
            tx,
            sql::END_RUN,
            &[
                &session,
                &request_i64,
                &call_id,
                &end.state.as_str(),
                &end.outcome.as_str(),
                &at_us,
                &seq,
                &end.started_at_us,
            ],
            what,
        )
        .await?;
        if changed != 1 {
            return Err(StoreError::Conflict(
                format!("{what}: the run of call {call} could not be ended").into(),
            ));
        }
    }
    backend::seq_u64(seq, session, "seq")
}

pub(crate) async fn load_log(
    tx: &Transaction<'_>,
    what: &str,
    session: &str,
    after: i64,
) -> Result<Vec<StoredMessage>, StoreError> {
    require_session(tx, session, what).await?;
    let rows = query(tx, sql::LOAD_LOG, &[&session, &after], what).await?;
    rows.iter()
        .map(|row| {
            MessageRow {
                seq: get(row, 0, what)?,
                role: get(row, 1, what)?,
                request: get(row, 2, what)?,
                at_us: get(row, 3, what)?,
                body: get(row, 4, what)?,
            }
            .decode(session)
        })
        .collect()
}

/// The run columns of [`sql::TOOL_RUNS`] (also the first columns of [`sql::UNFINISHED_RUNS`]).
fn run_row(row: &Row, what: &str) -> Result<RunRow, StoreError> {
    Ok(RunRow {
        call_id: get(row, 0, what)?,
        tool_name: get(row, 1, what)?,
        request: get(row, 2, what)?,
        fragment_seq: get(row, 3, what)?,
        state: get(row, 4, what)?,
        outcome: get(row, 5, what)?,
        admitted_at_us: get(row, 6, what)?,
        started_at_us: get(row, 7, what)?,
        ended_at_us: get(row, 8, what)?,
        result_seq: get(row, 9, what)?,
        sealed_at_us: get(row, 10, what)?,
    })
}

pub(crate) async fn tool_runs(
    tx: &Transaction<'_>,
    what: &str,
    session: &str,
    from_request: i64,
) -> Result<Vec<ToolRun>, StoreError> {
    require_session(tx, session, what).await?;
    let rows = query(tx, sql::TOOL_RUNS, &[&session, &from_request], what).await?;
    rows.iter().map(|row| run_row(row, what)?.validate(session)).collect()
}

pub(crate) async fn unfinished_calls(
    tx: &Transaction<'_>,
    what: &str,
    session: &str,
) -> Result<Vec<UnfinishedCall>, StoreError> {
    require_session(tx, session, what).await?;
    let rows = query(tx, sql::UNFINISHED_RUNS, &[&session], what).await?;
    rows.iter()
        .map(|row| {
            let raw = run_row(row, what)?;
            let body: Option<String> = get(row, 11, what)?;
            let fragment_seq = raw.fragment_seq;
            let run = raw.validate(session)?;
            let call = backend::owning_call(session, fragment_seq, &run.call_id, body.as_deref())?;
            Ok(UnfinishedCall { run, call })
        })
        .collect()
}
