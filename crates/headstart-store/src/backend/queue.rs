//! The session queue as rows (contract §7.5): who may write a session (fencing), session and lease rows read back,
//! and the values a claim binds.

use std::time::{Duration, Instant};

use super::messages::seq_u64;
use crate::lease::{Lease, SessionEnd};
use crate::types::{SessionId, SessionInfo, SessionSettings, SessionState};
use crate::{QueueName, StoreError};

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
    /// `system_prompt`.
    pub system: Option<String>,
    /// `model`.
    pub model: Option<String>,
    /// `queue`.
    pub queue: String,
    /// `attempts`.
    pub attempts: i64,
    /// `not_before_us`.
    pub not_before_us: Option<i64>,
}

impl SessionRow {
    /// Checks the row and turns it into a [`SessionInfo`].
    pub fn validate(self) -> Result<SessionInfo, StoreError> {
        let id = self.id;
        let messages = seq_u64(self.messages, &id, "message count")?;
        let epoch = seq_u64(self.epoch, &id, "epoch")?;
        let state = SessionState::parse(&self.state)
            .ok_or_else(|| StoreError::Decode(format!("session {id}: unknown state {:?}", self.state).into()))?;
        let settings = stored_settings(&id, self.system, self.model, self.queue)?;
        let attempts = attempts_u32(self.attempts, &id)?;
        Ok(SessionInfo {
            id: SessionId(id),
            created_at_us: self.created_at_us,
            messages,
            state,
            owner: self.owner,
            epoch,
            lease_expires_at_us: self.lease_expires_at_us,
            failure: self.failure,
            settings,
            attempts,
            not_before_us: self.not_before_us,
        })
    }
}

/// A stored attempt count, checked.
pub fn attempts_u32(attempts: i64, session: &str) -> Result<u32, StoreError> {
    u32::try_from(attempts)
        .map_err(|_| StoreError::Decode(format!("session {session}: invalid attempt count {attempts}").into()))
}

/// The settings columns of a session row (`system_prompt`, `model`, `queue`), checked.
pub fn stored_settings(
    session: &str,
    system: Option<String>,
    model: Option<String>,
    queue: String,
) -> Result<SessionSettings, StoreError> {
    let queue = SessionSettings::stored_queue(queue)
        .map_err(|error| StoreError::Decode(format!("session {session}: {error}").into()))?;
    Ok(SessionSettings { system, model, queue })
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

/// The columns a new session row is stored with.
#[derive(Debug, Clone, Copy)]
pub struct NewSession<'a> {
    /// `pending` with a submission's settings, or `unqueued` for a session created without a prompt.
    pub state: SessionState,
    /// `system_prompt`.
    pub system: Option<&'a str>,
    /// `model`.
    pub model: Option<&'a str>,
    /// `queue` (the default one for an unqueued session).
    pub queue: &'a str,
}

/// The columns a new session row is stored with: `pending` with a submission's settings, or `unqueued` with none
/// for a session created without a prompt.
pub fn new_session(submitted: Option<&SessionSettings>) -> NewSession<'_> {
    match submitted {
        Some(settings) => NewSession {
            state: SessionState::Pending,
            system: settings.system.as_deref(),
            model: settings.model.as_deref(),
            queue: settings.queue_name(),
        },
        None => NewSession {
            state: SessionState::Unqueued,
            system: None,
            model: None,
            queue: QueueName::DEFAULT,
        },
    }
}

/// The columns a finished session is stored with.
#[derive(Debug, Clone, Copy)]
pub struct EndColumns<'a> {
    /// `state`.
    pub state: SessionState,
    /// `failure`: why it failed, or the last error of a retry.
    pub failure: Option<&'a str>,
    /// Added to `attempts` (1 for a retry).
    pub attempts: i64,
    /// The backoff of a retry (µs, from the database's clock), after which it may be claimed.
    pub not_before_in_us: Option<i64>,
}

/// The columns a finished session is stored with (see [`EndColumns`]).
pub fn end_state(end: &SessionEnd) -> EndColumns<'_> {
    let (state, failure) = match end {
        SessionEnd::Completed => (SessionState::Completed, None),
        SessionEnd::Failed(reason) => (SessionState::Failed, Some(reason.as_str())),
        SessionEnd::Released => (SessionState::Pending, None),
        SessionEnd::Retry { reason, .. } => (SessionState::Pending, Some(reason.as_str())),
    };
    let (attempts, not_before_in_us) = match end {
        SessionEnd::Retry { after, .. } => (1, Some(duration_us(*after))),
        _ => (0, None),
    };
    EndColumns {
        state,
        failure,
        attempts,
        not_before_in_us,
    }
}

/// The names of `queues` as a SQL text array (PostgreSQL `= ANY`) or JSON array (SQLite `json_each`).
pub fn queue_names(queues: &[QueueName]) -> Vec<&str> {
    queues.iter().map(QueueName::as_str).collect()
}
