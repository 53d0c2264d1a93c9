//! Fleets of workers on one store (contract §7.5): the work queue, leases, fencing, idempotency keys.
//!
//! Single-process use needs none of this: [`TranscriptStore::create_session`] makes an
//! [`Unqueued`](crate::SessionState::Unqueued) session that only its creator drives, and every write goes through
//! as before. A fleet instead [`submit`](SessionQueue::submit)s sessions, and workers
//! [`claim`](SessionQueue::claim) them:
//!
//! 1. `claim(worker, lease, limit)` hands a worker pending sessions and sessions whose owner's lease expired. Each
//!    claim increments the session's **epoch**, the fencing token: a [`Lease`] is (session, owner, epoch).
//! 2. The worker writes through [`fenced`](SessionQueue::fenced)`(lease)`, a handle on the same store whose every
//!    write checks, in its own transaction, that the session is still `running` under that owner and epoch. When it
//!    is not (another worker claimed it, it was finished), the write changes nothing and fails with
//!    [`StoreError::Fenced`]: the worker stops that session.
//! 3. It [`renew`](SessionQueue::renew)s its leases well before they expire, checks
//!    [`Lease::may_have_expired`] (its own monotonic clock) before starting a call's `execute`, and
//!    [`finish`](SessionQueue::finish)es the session (completed, failed or released back to the queue).
//! 4. A worker that claims a session another worker held ([`Claim::previous_owner`]) runs recovery (contract §7.4)
//!    before continuing it.
//! 5. While it has room, it claims when a [`wake_ups`](SessionQueue::wake_ups) stream says a session is waiting,
//!    and polls at its interval besides: a wake-up is a hint, never needed for correctness.
//!
//! Lease expiry is measured on **the database's clock** (PostgreSQL's `clock_timestamp()`, the machine's clock for
//! SQLite), never the caller's: workers on several machines share one clock that way, and virtual replay clocks
//! never reach the queue. A worker's own deadline ([`Lease::held_until`]) is taken before the claim or renewal
//! request is sent, so it ends no later than the database's.
//!
//! Writes made without a lease (a handle that is not fenced) are fenced too when the session is `running`: only
//! its owner writes it. An administrator's `recover` on a fleet's database therefore cannot race a live worker.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use headstart_core::model::UserMessage;

use crate::types::{CallKey, SessionId, SessionSettings};
use crate::wake::WakeUps;
use crate::QueueName;
use crate::{StoreError, TranscriptStore};

/// A worker's hold on one session: the fencing token of its writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The session held.
    pub session: SessionId,
    /// The worker holding it (the name it claimed with).
    pub owner: String,
    /// The session's epoch when the worker claimed it: every claim increments it, so a higher epoch means a later
    /// owner.
    pub epoch: u64,
    /// When the lease ends unless renewed, on the database's clock (µs since the Unix epoch). Another worker may
    /// claim the session from then on.
    pub expires_at_us: i64,
    /// When the lease may have ended by the worker's own monotonic clock: the instant just before the claim or
    /// renewal was sent, plus the lease duration. The database's expiry is never earlier (its clock started
    /// counting later), so a worker that stops starting calls at this instant never starts one after losing the
    /// lease, whatever the skew between its clock and the database's.
    pub held_until: Instant,
}

impl Lease {
    /// Whether the lease may have expired by the worker's monotonic clock (contract §7.5: a worker should not start a
    /// call's `execute` then; it renews first).
    pub fn may_have_expired(&self) -> bool {
        Instant::now() >= self.held_until
    }

    /// The stable idempotency key of call `call` of the leased session (see [`idempotency_key`]).
    pub fn idempotency_key(&self, call: &CallKey) -> String {
        idempotency_key(&self.session, call)
    }
}

/// A session handed to a worker by [`SessionQueue::claim`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The worker's lease on it.
    pub lease: Lease,
    /// The worker that held it before, when its lease expired (it died, stalled, or lost its connection): the new
    /// owner runs recovery (contract §7.4) before continuing. `None` for a session that was pending (submitted or
    /// released); recovery then finds nothing to do, so running it always is safe too.
    pub previous_owner: Option<String>,
    /// What the session was submitted with beyond its prompt ([`SessionQueue::submit_with`]): the worker uses
    /// each one given instead of its own.
    pub settings: SessionSettings,
    /// How many times a worker released the session because its model's provider was down
    /// ([`SessionEnd::Retry`]) before this claim: a worker fails it once these reach its limit.
    pub attempts: u32,
}

/// How a worker ends its hold on a session ([`SessionQueue::finish`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEnd {
    /// The agent loop ended: the session is `completed`.
    Completed,
    /// The worker gives up on the session: it is `failed`, with this reason.
    Failed(String),
    /// The worker stops without finishing (it shuts down): the session is `pending` again, for any worker to
    /// claim.
    Released,
    /// The session could not go on for a reason that is not its own (its model's provider is down: connection
    /// refused, 5xx, 429 after the retries, overloaded): it is `pending` again in its queue, its
    /// [`Claim::attempts`] one more, `reason` stored as its last error, and no worker claims it before `after` has
    /// passed (the database's clock).
    Retry {
        /// The error that stopped it.
        reason: String,
        /// How long no worker claims it.
        after: Duration,
    },
}

/// The work queue of a fleet of workers sharing one store (contract §7.5). See the [module documentation](self).
///
/// Every method is one transaction. The queue methods ignore a handle's own fence: they take the lease they act on
/// as an argument.
#[async_trait]
pub trait SessionQueue: TranscriptStore {
    /// Creates a `pending` session whose first message (seq 1) is `prompt`, in one transaction; a worker's claim
    /// picks it up. `at_us` is the caller's clock, as for [`TranscriptStore::create_session`]. The session has no
    /// settings of its own: [`submit_with`](Self::submit_with) with the default.
    async fn submit(&self, prompt: &UserMessage, at_us: i64) -> Result<SessionId, StoreError> {
        self.submit_with(prompt, &SessionSettings::default(), at_us).await
    }

    /// [`submit`](Self::submit) with `settings` stored beside the session, in the same transaction: the listing
    /// ([`TranscriptStore::sessions`]) shows them and every [`Claim`] of the session carries them.
    async fn submit_with(
        &self,
        prompt: &UserMessage,
        settings: &SessionSettings,
        at_us: i64,
    ) -> Result<SessionId, StoreError>;

    /// Claims up to `limit` sessions of the default queue ([`QueueName::DEFAULT`]) for worker `owner`: see
    /// [`claim_from`](Self::claim_from).
    async fn claim(&self, owner: &str, lease: Duration, limit: usize) -> Result<Vec<Claim>, StoreError> {
        self.claim_from(owner, &[QueueName::default()], lease, limit).await
    }

    /// Claims up to `limit` sessions of `queues` for worker `owner`, oldest first: pending ones whose backoff (a
    /// [`SessionEnd::Retry`]) has passed, and running ones whose lease has expired. Each claimed session becomes
    /// `running` under `owner` with its epoch incremented and a lease of `lease` from now (the database's clock).
    /// Sessions another worker is claiming or writing at this moment are skipped, never waited for (PostgreSQL:
    /// `FOR UPDATE SKIP LOCKED`), so concurrent claimers never receive the same session. No queues: no claims.
    async fn claim_from(
        &self,
        owner: &str,
        queues: &[QueueName],
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<Claim>, StoreError>;

    /// Takes `session` for `owner` now, whoever holds it and whatever its state: it becomes `running` under
    /// `owner` with its epoch incremented and a lease of `lease` from now, so every write under an earlier lease
    /// (through [`fenced`](Self::fenced)) is refused from then on. [`Claim::previous_owner`] is the owner it had when
    /// it was `running`. [`StoreError::NoSession`] when the store does not have it.
    ///
    /// For a coordinator that itself guarantees one live owner per session and decides when the previous one is
    /// gone: headstart on Restate takes its session over on every attempt of a turn, so an attempt Restate replaced
    /// cannot write after its successor began. A fleet's workers never call it: they [`claim`](Self::claim).
    async fn take_over(&self, session: &SessionId, owner: &str, lease: Duration) -> Result<Claim, StoreError>;

    /// Extends each of `leases` that its worker still holds (same owner and epoch, session still `running`) to
    /// `lease` from now, and returns them renewed, in the order given. A lease missing from the answer is lost:
    /// its session must stop in this worker. A lease that expired but was not claimed by anyone is renewed: no
    /// other worker wrote the session meanwhile, since none held it.
    async fn renew(&self, leases: &[Lease], lease: Duration) -> Result<Vec<Lease>, StoreError>;

    /// Ends the worker's hold on the leased session as `end` says. Fails with [`StoreError::Fenced`] (changing
    /// nothing) when the lease is no longer held.
    async fn finish(&self, lease: &Lease, end: SessionEnd) -> Result<(), StoreError>;

    /// A handle on this store whose every write to `lease.session` is conditional on the lease, in the write's own
    /// transaction (a lost lease: [`StoreError::Fenced`], nothing written). It refuses writes to other sessions and
    /// creating sessions ([`StoreError::Conflict`]); reads pass through. Hand it to the engine that runs the
    /// session.
    fn fenced(&self, lease: &Lease) -> Arc<dyn TranscriptStore>;

    /// Wake-ups for a worker waiting for work: a stream that says when a session was submitted or released, so
    /// that an idle worker claims at once instead of at its next poll. `None` (the default) when this queue cannot
    /// tell: its workers poll. PostgreSQL listens on a connection of its own (`LISTEN`, reconnecting when it
    /// drops); the SQLite store tells only the workers of this process that share the store object.
    ///
    /// A wake-up is only a hint (see the [`wake`](crate::wake) module): a worker polls too, so a notification that
    /// never comes delays a claim by one poll interval at most. Call it within a tokio runtime.
    ///
    /// `queues` are the queues the worker serves: a store that can tell a session's queue (PostgreSQL, whose
    /// notification carries it) wakes it only for those; a wake-up that names no queue (a session released at
    /// shutdown) wakes every worker.
    fn wake_ups(&self, queues: &[QueueName]) -> Option<WakeUps> {
        let _ = queues;
        None
    }
}

/// The namespace of idempotency keys (the bytes of `"headstart\0idempo"`), fixed forever: changing it would
/// change every key, and services would run a re-executed call twice.
const IDEMPOTENCY_NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6865_6164_7374_6172_7400_6964_656d_706f);

/// The idempotency key of call `call` in `session`: the same on every attempt and on every worker, different
/// for every (session, request, call id): a call id is unique only within its response (contract §7.2.2), so a
/// provider that numbers its calls `call_0`, `call_1`, … in every response still gets a key per call. A tool that
/// calls an outside service passes it along (an `Idempotency-Key` header, a request id) so that when recovery
/// re-runs the call after a crash or a takeover (contract §7.4), the service can recognise the repetition.
///
/// It is a name-based UUID (version 5, 36 characters), a format services that limit key length or alphabet
/// accept, derived from the session id's length, the session id, the request (4 bytes) and the call id, so no two
/// calls share the input.
pub fn idempotency_key(session: &SessionId, call: &CallKey) -> String {
    let session = session.0.as_bytes();
    let mut name = Vec::with_capacity(12 + session.len() + call.call_id.len());
    name.extend_from_slice(&(session.len() as u64).to_be_bytes());
    name.extend_from_slice(session);
    name.extend_from_slice(&call.request.to_be_bytes());
    name.extend_from_slice(call.call_id.as_bytes());
    uuid::Uuid::new_v5(&IDEMPOTENCY_NAMESPACE, &name).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key of call `call_1` of request 0 of the session below. Keys include the request since call ids became
    /// unique per response (they were derived from the session and the call id alone before).
    const PINNED_KEY: &str = "c5f6bef3-15ac-50de-bb21-556d2c761c12";

    #[test]
    fn idempotency_keys_are_stable_and_distinct() {
        let session = SessionId::from("0190f4e1-0000-7000-8000-000000000001");
        let call = |request, id: &str| CallKey::new(request, id);
        let key = idempotency_key(&session, &call(0, "call_1"));
        // Pinned: the key of a call must never change between versions (services keep keys for days).
        assert_eq!(key, PINNED_KEY);
        assert_eq!(
            idempotency_key(&session, &call(0, "call_1")),
            key,
            "same on every attempt"
        );
        assert_ne!(idempotency_key(&session, &call(0, "call_2")), key);
        assert_ne!(
            idempotency_key(&session, &call(1, "call_1")),
            key,
            "the same id in another response is another call"
        );
        assert_ne!(idempotency_key(&SessionId::from("other"), &call(0, "call_1")), key);
        // The session id's length is part of the input: moving characters between the two parts changes the key.
        assert_ne!(
            idempotency_key(&SessionId::from("ab"), &call(0, "c")),
            idempotency_key(&SessionId::from("a"), &call(0, "bc"))
        );
        let lease = Lease {
            session: session.clone(),
            owner: "w1".to_owned(),
            epoch: 3,
            expires_at_us: 0,
            held_until: Instant::now(),
        };
        assert_eq!(
            lease.idempotency_key(&call(0, "call_1")),
            key,
            "the same from a lease, whichever epoch"
        );
        assert!(lease.may_have_expired());
    }
}
