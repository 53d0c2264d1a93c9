//! The session listing: every session, oldest first, one session's entry, or one page of it, newest first, paged in SQL so that a page
//! of a large store reads only its own rows.

use deadpool_postgres::Transaction;
use headstart_store::backend::SessionRow;
use headstart_store::{SessionInfo, SessionsPage, SessionsQuery, StoreError};
use tokio_postgres::Row;

use crate::ops::{get, query, query_one};
use crate::sql;

/// Every session, oldest first.
pub(crate) async fn sessions(tx: &Transaction<'_>, what: &str) -> Result<Vec<SessionInfo>, StoreError> {
    let rows = query(tx, sql::LIST_SESSIONS, &[], what).await?;
    rows.iter().map(|row| session_row(row, what)?.validate()).collect()
}

/// One page, newest first, and how many sessions match, from the read transaction's one snapshot.
pub(crate) async fn sessions_page(
    tx: &Transaction<'_>,
    what: &str,
    page: SessionsQuery,
) -> Result<SessionsPage, StoreError> {
    let state = page.state.map(|state| state.as_str());
    let (offset, limit) = page.sql_bounds();
    let rows = query(tx, sql::LIST_SESSIONS_PAGE, &[&state, &limit, &offset], what).await?;
    let total: i64 = get(&query_one(tx, sql::COUNT_SESSIONS, &[&state], what).await?, 0, what)?;
    Ok(SessionsPage {
        sessions: rows
            .iter()
            .map(|row| session_row(row, what)?.validate())
            .collect::<Result<_, _>>()?,
        total: u64::try_from(total).unwrap_or(0),
    })
}

/// One session's entry, `None` when there is no such session.
pub(crate) async fn session(
    tx: &Transaction<'_>,
    what: &str,
    session: String,
) -> Result<Option<SessionInfo>, StoreError> {
    let rows = query(tx, sql::ONE_SESSION, &[&session], what).await?;
    rows.first().map(|row| session_row(row, what)?.validate()).transpose()
}

/// The columns of `sql::LIST_SESSIONS` as a row to validate.
fn session_row(row: &Row, what: &str) -> Result<SessionRow, StoreError> {
    Ok(SessionRow {
        id: get(row, 0, what)?,
        created_at_us: get(row, 1, what)?,
        messages: get(row, 2, what)?,
        state: get(row, 3, what)?,
        owner: get(row, 4, what)?,
        epoch: get(row, 5, what)?,
        lease_expires_at_us: get(row, 6, what)?,
        failure: get(row, 7, what)?,
        system: get(row, 8, what)?,
        model: get(row, 9, what)?,
        queue: get(row, 10, what)?,
        attempts: get(row, 11, what)?,
        not_before_us: get(row, 12, what)?,
    })
}
