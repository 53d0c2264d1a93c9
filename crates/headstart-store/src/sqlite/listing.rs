//! The session listing: every session, oldest first, one session's entry, or one page of it, newest first, paged in SQL so that a page
//! of a large store reads only its own rows.

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::ops::{begin_read, ctx};
use super::sql;
use crate::backend::{Op, SessionRow};
use crate::listing::{SessionsPage, SessionsQuery};
use crate::types::SessionInfo;
use crate::StoreError;

/// Every session, oldest first.
pub(super) fn sessions(conn: &mut Connection) -> Result<Vec<SessionInfo>, StoreError> {
    let what = &Op::Sessions.to_string();
    let tx = begin_read(conn, what)?;
    let rows = {
        let mut stmt = tx.prepare_cached(sql::LIST_SESSIONS).map_err(ctx(what))?;
        let rows = stmt.query_map([], session_row).map_err(ctx(what))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(ctx(what))?
    };
    rows.into_iter().map(SessionRow::validate).collect()
}

/// One page, newest first, and how many sessions match, from one snapshot.
pub(super) fn sessions_page(conn: &mut Connection, query: &SessionsQuery) -> Result<SessionsPage, StoreError> {
    let what = &Op::Sessions.to_string();
    let tx = begin_read(conn, what)?;
    let state = query.state.map(|state| state.as_str());
    let (offset, limit) = query.sql_bounds();
    let rows = {
        let mut stmt = tx.prepare_cached(sql::LIST_SESSIONS_PAGE).map_err(ctx(what))?;
        let rows = stmt
            .query_map(params![state, limit, offset], session_row)
            .map_err(ctx(what))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(ctx(what))?
    };
    let total: i64 = tx
        .prepare_cached(sql::COUNT_SESSIONS)
        .and_then(|mut stmt| stmt.query_row([state], |row| row.get(0)))
        .map_err(ctx(what))?;
    Ok(SessionsPage {
        sessions: rows.into_iter().map(SessionRow::validate).collect::<Result<_, _>>()?,
        total: u64::try_from(total).unwrap_or(0),
    })
}

/// One session's entry, `None` when there is no such session.
pub(super) fn session(conn: &mut Connection, session: &str) -> Result<Option<SessionInfo>, StoreError> {
    let what = &Op::Sessions.to_string();
    let row = conn
        .prepare_cached(sql::ONE_SESSION)
        .and_then(|mut stmt| stmt.query_row([session], session_row).optional())
        .map_err(ctx(what))?;
    row.map(SessionRow::validate).transpose()
}

/// The columns of `sql::LIST_SESSIONS` as a row to validate.
fn session_row(row: &Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        id: row.get(0)?,
        created_at_us: row.get(1)?,
        messages: row.get(2)?,
        state: row.get(3)?,
        owner: row.get(4)?,
        epoch: row.get(5)?,
        lease_expires_at_us: row.get(6)?,
        failure: row.get(7)?,
        system: row.get(8)?,
        model: row.get(9)?,
        queue: row.get(10)?,
        attempts: row.get(11)?,
        not_before_us: row.get(12)?,
    })
}
