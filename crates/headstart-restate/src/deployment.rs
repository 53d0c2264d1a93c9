//! A deployment's parts: the transcript store every session is written to, and the application's setup (tools,
//! hooks, model) for each session. Both services of one `restate serve` process share them.

use std::sync::Arc;

use headstart::store::{SessionQueue, StoreError};
use headstart::SessionSetup;
use headstart::{Clock, RecoveryPolicy, SessionId, SystemClock};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What a deployment runs sessions with.
pub struct Deployment {
    /// The record of every session (contract §7): `inspect`, `serve` and `timeline` read it as any other store.
    /// Each attempt of a turn takes its session over in it ([`SessionQueue::take_over`]) and writes through a
    /// handle fenced by that hold.
    pub(crate) store: Arc<dyn SessionQueue>,
    /// The application: each session's engine and model.
    pub(crate) setup: Arc<dyn SessionSetup>,
    /// What recovery does with calls a crashed attempt left without a result.
    pub(crate) policy: RecoveryPolicy,
    /// The clock of the writes the deployment makes itself.
    pub(crate) clock: Arc<dyn Clock>,
    /// The turns this process runs at once; more wait for a slot (each holds a model stream and an engine).
    turns: Arc<Semaphore>,
}

/// The turns a deployment runs at once unless told otherwise ([`Deployment::with_turn_limit`]).
pub const DEFAULT_TURN_LIMIT: usize = 64;

impl std::fmt::Debug for Deployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployment")
            .field("policy", &self.policy)
            .field("free_turn_slots", &self.turns.available_permits())
            .finish_non_exhaustive()
    }
}

impl Deployment {
    /// Sessions of `setup`, written to `store`; interrupted calls are failed ([`RecoveryPolicy::FailAll`]).
    pub fn new(store: Arc<dyn SessionQueue>, setup: Arc<dyn SessionSetup>) -> Self {
        Deployment {
            store,
            setup,
            policy: RecoveryPolicy::default(),
            clock: Arc::new(SystemClock),
            turns: Arc::new(Semaphore::new(DEFAULT_TURN_LIMIT)),
        }
    }

    /// Runs at most `limit` turns at once in this process (at least 1); the others wait for a slot, their
    /// invocations open. Restate sends a deployment every invocation it has, so this bounds the model streams,
    /// engines and connections one process holds.
    pub fn with_turn_limit(mut self, limit: usize) -> Self {
        self.turns = Arc::new(Semaphore::new(limit.max(1)));
        self
    }

    /// What recovery does with the calls a crashed attempt left without a result and without a journaled end
    /// ([`RecoveryPolicy::FailAll`] unless told otherwise; [`RecoveryPolicy::ReExecuteIdempotent`] runs calls of
    /// idempotent tools again, once per recovery).
    pub fn with_recovery(mut self, policy: RecoveryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// A slot of the turn limit, waited for when every slot is taken.
    pub(crate) async fn turn_slot(&self) -> Option<OwnedSemaphorePermit> {
        if let Ok(slot) = Arc::clone(&self.turns).try_acquire_owned() {
            return Some(slot);
        }
        crate::metrics::turn_queued();
        // The semaphore is never closed; `None` would only let the turn run without a slot.
        Arc::clone(&self.turns).acquire_owned().await.ok()
    }

    /// Creates `session` if the store does not have it yet; returns how many messages it holds.
    pub(crate) async fn open(&self, session: &SessionId) -> Result<u64, StoreError> {
        match self.store.session(session).await? {
            Some(info) => Ok(info.messages),
            None => {
                self.store.create_session_with_id(session, self.clock.now_us()).await?;
                Ok(0)
            }
        }
    }
}
