//! The work queue's operations on PostgreSQL (contract §7.5): claims, takeovers, renewals and finishes, each inside
//! the transaction its caller opened.

use std::time::{Duration, Instant};

use deadpool_postgres::Transaction;
use headstart_store::backend::{self, ClaimedRow};
use headstart_store::{Claim, Lease, SessionEnd, SessionId, StoreError};

use crate::ops::{epoch_i64, execute, get, lease_row, query, query_opt};
use crate::sql;

/// Claims up to `limit` sessions of `queues` for `owner` (see `SessionQueue::claim_from`); `sent` is when the caller
/// asked.
pub(crate) async fn claim(
    tx: &Transaction<'_>,
    what: &str,
    owner: &str,
    queues: &[String],
    lease: Duration,
    limit: usize,
    sent: Instant,
) -> Result<Vec<Claim>, StoreError> {
    let (limit, lease_us) = (backend::limit_i64(limit), backend::duration_us(lease));
    let rows = query(tx, sql::CLAIM, &[&owner, &limit, &lease_us, &queues], what).await?;
    let mut claimed = Vec::with_capacity(rows.len());
    for row in &rows {
        let ordinal: i64 = get(row, 4, what)?;
        let claimed_row = ClaimedRow {
            session: get(row, 0, what)?,
            epoch: get(row, 1, what)?,
            expires_at_us: get(row, 2, what)?,
        };
        let claimed_row_id = claimed_row.session.clone();
        let claim = Claim {
            lease: claimed_row.lease(owner, sent, lease)?,
            previous_owner: get(row, 3, what)?,
            settings: backend::stored_settings(
                &claimed_row_id,
                get(row, 5, what)?,
                get(row, 6, what)?,
                get(row, 7, what)?,
            )?,
            attempts: backend::attempts_u32(get(row, 8, what)?, &claimed_row_id)?,
        };
        claimed.push((ordinal, claim));
    }
    // `UPDATE … RETURNING` returns rows in no particular order; claims are handed out oldest first.
    claimed.sort_by_key(|(ordinal, _)| *ordinal);
    Ok(claimed.into_iter().map(|(_, claim)| claim).collect())
}

/// Takes `session` over for `owner` (see `SessionQueue::take_over`); `sent` is when the caller asked.
pub(crate) async fn take_over(
    tx: &Transaction<'_>,
    what: &str,
    session: &SessionId,
    owner: &str,
    lease: Duration,
    sent: Instant,
) -> Result<Claim, StoreError> {
    let lease_us = backend::duration_us(lease);
    let rows = query(tx, sql::TAKE_OVER, &[&session.0, &owner, &lease_us], what).await?;
    let row = rows.first().ok_or_else(|| StoreError::NoSession(session.0.clone()))?;
    let claimed_row = ClaimedRow {
        session: session.0.clone(),
        epoch: get(row, 0, what)?,
        expires_at_us: get(row, 1, what)?,
    };
    Ok(Claim {
        lease: claimed_row.lease(owner, sent, lease)?,
        previous_owner: get(row, 2, what)?,
        settings: backend::stored_settings(&session.0, get(row, 3, what)?, get(row, 4, what)?, get(row, 5, what)?)?,
        attempts: backend::attempts_u32(get(row, 6, what)?, &session.0)?,
    })
}

/// Renews the leases still held (see `SessionQueue::renew`), in the order given.
pub(crate) async fn renew(
    tx: &Transaction<'_>,
    what: &str,
    leases: &[Lease],
    lease: Duration,
    sent: Instant,
) -> Result<Vec<Lease>, StoreError> {
    let ids: Vec<&str> = leases.iter().map(|held| held.session.0.as_str()).collect();
    let owners: Vec<&str> = leases.iter().map(|held| held.owner.as_str()).collect();
    let epochs: Vec<i64> = leases.iter().map(|held| epoch_i64(held.epoch)).collect();
    let lease_us = backend::duration_us(lease);
    let rows = query(tx, sql::RENEW, &[&ids, &owners, &epochs, &lease_us], what).await?;
    let mut renewed = Vec::with_capacity(rows.len());
    for row in &rows {
        renewed.push(ClaimedRow {
            session: get(row, 0, what)?,
            epoch: get(row, 1, what)?,
            expires_at_us: get(row, 2, what)?,
        });
    }
    let mut in_order = Vec::with_capacity(renewed.len());
    for held in leases {
        let epoch = epoch_i64(held.epoch);
        if let Some(row) = renewed
            .iter()
            .find(|row| row.session == held.session.0 && row.epoch == epoch)
        {
            in_order.push(row.clone().lease(&held.owner, sent, lease)?);
        }
    }
    Ok(in_order)
}

/// Ends a worker's hold on a session (see `SessionQueue::finish`).
pub(crate) async fn finish(
    tx: &Transaction<'_>,
    what: &str,
    lease: &Lease,
    end: &SessionEnd,
) -> Result<(), StoreError> {
    let end = backend::end_state(end);
    let epoch = epoch_i64(lease.epoch);
    let changed = execute(
        tx,
        sql::FINISH,
        &[
            &lease.session.0,
            &lease.owner,
            &epoch,
            &end.state.as_str(),
            &end.failure,
            &end.attempts,
            &end.not_before_in_us,
        ],
        what,
    )
    .await?;
    if changed == 1 {
        return Ok(());
    }
    let row = query_opt(tx, sql::SESSION_LEASE, &[&lease.session.0], what).await?;
    let row = row.map(|row| lease_row(&row, what)).transpose()?;
    Err(backend::finish_refused(what, lease, row.as_ref()))
}
