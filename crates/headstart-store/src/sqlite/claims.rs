//! The work queue's operations on SQLite (contract §7.5): claims, takeovers, renewals and finishes, each inside the
//! write transaction the caller holds.

use std::time::{Duration, Instant};

use rusqlite::{params, Connection, OptionalExtension};

use super::ops::{ctx, execute_cached, lease_row, query_row_cached};
use super::sql;
use crate::backend::{self, ClaimedRow};
use crate::lease::{Claim, Lease, SessionEnd};
use crate::types::SessionId;
use crate::{QueueName, StoreError};

/// The database's clock (µs since the Unix epoch).
fn now_us(conn: &Connection, what: &str) -> Result<i64, StoreError> {
    query_row_cached(conn, sql::NOW_US, [], |row| row.get(0)).map_err(ctx(what))
}

/// Claims up to `limit` sessions of `queues` for `owner` (see `SessionQueue::claim_from`); `sent` is when the
/// caller asked.
pub(super) fn claim(
    conn: &Connection,
    what: &str,
    owner: &str,
    queues: &[QueueName],
    lease: Duration,
    limit: usize,
    sent: Instant,
) -> Result<Vec<Claim>, StoreError> {
    let now = now_us(conn, what)?;
    let expires_at_us = now.saturating_add(backend::duration_us(lease));
    let queues = serde_json::to_string(&backend::queue_names(queues))
        .map_err(|error| StoreError::Backend(error.to_string().into()))?;
    let picked: Vec<(String, Option<String>)> = {
        let mut stmt = conn.prepare_cached(sql::CLAIMABLE).map_err(ctx(what))?;
        let rows = stmt
            .query_map(params![now, backend::limit_i64(limit), queues], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .map_err(ctx(what))?;
        rows.collect::<Result<_, _>>().map_err(ctx(what))?
    };
    let held = Held {
        owner,
        expires_at_us,
        lease,
        sent,
    };
    picked
        .into_iter()
        .map(|(session, previous_owner)| claim_one(conn, what, session, previous_owner, &held))
        .collect()
}

/// What a claim gives its holder: the owner, when the lease ends on the database's clock, and, for the lease's
/// local deadline, its length and when the caller asked.
struct Held<'a> {
    owner: &'a str,
    expires_at_us: i64,
    lease: Duration,
    sent: Instant,
}

/// Claims `session` (`CLAIM_SESSION`: running under `held.owner`, epoch + 1), whoever held it before.
fn claim_one(
    conn: &Connection,
    what: &str,
    session: String,
    previous_owner: Option<String>,
    held: &Held<'_>,
) -> Result<Claim, StoreError> {
    type Columns = (i64, Option<String>, Option<String>, String, i64);
    let (epoch, system, model, queue, attempts): Columns = query_row_cached(
        conn,
        sql::CLAIM_SESSION,
        params![session, held.owner, held.expires_at_us],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?)),
    )
    .map_err(ctx(what))?;
    let settings = backend::stored_settings(&session, system, model, queue)?;
    let attempts = backend::attempts_u32(attempts, &session)?;
    let row = ClaimedRow {
        session,
        epoch,
        expires_at_us: held.expires_at_us,
    };
    Ok(Claim {
        lease: row.lease(held.owner, held.sent, held.lease)?,
        previous_owner,
        settings,
        attempts,
    })
}

/// Takes `session` over for `owner` (see `SessionQueue::take_over`); `sent` is when the caller asked.
pub(super) fn take_over(
    conn: &Connection,
    what: &str,
    session: &SessionId,
    owner: &str,
    lease: Duration,
    sent: Instant,
) -> Result<Claim, StoreError> {
    let previous_owner: Option<String> =
        query_row_cached(conn, sql::RUNNING_OWNER, params![session.0], |row| row.get(0))
            .optional()
            .map_err(ctx(what))?
            .ok_or_else(|| StoreError::NoSession(session.0.clone()))?;
    let now = now_us(conn, what)?;
    let held = Held {
        owner,
        expires_at_us: now.saturating_add(backend::duration_us(lease)),
        lease,
        sent,
    };
    claim_one(conn, what, session.0.clone(), previous_owner, &held)
}

/// Renews the leases still held (see `SessionQueue::renew`).
pub(super) fn renew(
    conn: &Connection,
    what: &str,
    leases: &[Lease],
    lease: Duration,
    sent: Instant,
) -> Result<Vec<Lease>, StoreError> {
    let now = now_us(conn, what)?;
    let expires_at_us = now.saturating_add(backend::duration_us(lease));
    let mut renewed = Vec::with_capacity(leases.len());
    for held in leases {
        let epoch = i64::try_from(held.epoch).unwrap_or(i64::MAX);
        let expiry: Option<i64> = query_row_cached(
            conn,
            sql::RENEW_LEASE,
            params![held.session.0, held.owner, epoch, expires_at_us],
            |row| row.get(0),
        )
        .optional()
        .map_err(ctx(what))?;
        if let Some(expires_at_us) = expiry {
            let row = ClaimedRow {
                session: held.session.0.clone(),
                epoch,
                expires_at_us,
            };
            renewed.push(row.lease(&held.owner, sent, lease)?);
        }
    }
    Ok(renewed)
}

/// Ends a worker's hold on a session (see `SessionQueue::finish`).
pub(super) fn finish(conn: &Connection, what: &str, lease: &Lease, end: &SessionEnd) -> Result<(), StoreError> {
    let end = backend::end_state(end);
    let epoch = i64::try_from(lease.epoch).unwrap_or(i64::MAX);
    let now = now_us(conn, what)?;
    let changed = execute_cached(
        conn,
        sql::FINISH_SESSION,
        params![
            lease.session.0,
            lease.owner,
            epoch,
            end.state.as_str(),
            end.failure,
            end.attempts,
            end.not_before_in_us,
            now
        ],
    )
    .map_err(ctx(what))?;
    if changed == 1 {
        return Ok(());
    }
    let row = lease_row(conn, &lease.session.0, what)?;
    Err(backend::finish_refused(what, lease, row.as_ref()))
}
