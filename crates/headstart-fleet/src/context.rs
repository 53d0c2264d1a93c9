//! What a worker's loop and its session tasks share: the worker's [`Context`] and each claimed session ([`Held`]).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};

use headstart::store::{Lease, SessionQueue, SessionSettings};
use headstart::CancellationToken;

use crate::breaker::{Breaker, BreakerChange};
use crate::config::WorkerConfig;
use crate::events::{Counters, WorkerEvent};
use crate::metrics;
use headstart::SessionSetup;

pub(crate) type Observer = Arc<dyn Fn(&WorkerEvent) + Send + Sync>;

/// What a worker and its session tasks share.
pub(crate) struct Context {
    pub(crate) queue: Arc<dyn SessionQueue>,
    pub(crate) setup: Arc<dyn SessionSetup>,
    pub(crate) config: WorkerConfig,
    pub(crate) counters: Counters,
    pub(crate) observer: Option<Observer>,
    /// Whether the worker claims, given what its sessions' model requests said about the provider.
    pub(crate) breaker: Mutex<Breaker>,
}

impl Context {
    pub(crate) fn report(&self, event: WorkerEvent) {
        if let Some(observer) = &self.observer {
            observer(&event);
        }
    }

    /// Runs `change` on the breaker and reports what changed (once per change: an event and the `claiming` gauge).
    pub(crate) fn breaker(&self, change: impl FnOnce(&mut Breaker) -> Option<BreakerChange>) {
        let changed = change(&mut self.breaker.lock().unwrap_or_else(PoisonError::into_inner));
        match changed {
            None => {}
            Some(BreakerChange::Opened { failures, cool_down }) => {
                self.counters.count_breaker_opened();
                metrics::claiming(&self.config.id, false);
                self.report(WorkerEvent::BreakerOpened { failures, cool_down });
            }
            Some(BreakerChange::Closed) => {
                metrics::claiming(&self.config.id, true);
                self.report(WorkerEvent::BreakerClosed);
            }
        }
    }

    /// A model request of one of the worker's sessions opened: the provider is up.
    pub(crate) fn provider_answered(&self) {
        self.breaker(Breaker::succeeded);
    }
}

/// A claimed session as the worker's loop and the session's task both see it.
pub(crate) struct Held {
    /// The current lease: renewals replace it; the lease guard reads its `held_until`.
    pub(crate) lease: Mutex<Lease>,
    /// Stops the session's run: the lease was lost, or the worker shuts down.
    pub(crate) cancel: CancellationToken,
    /// Set before `cancel` when the lease was lost (the session then must not be finished by this worker).
    pub(crate) lost: AtomicBool,
    /// Set before the session is finished in the queue: a renewal that misses it then is no loss.
    pub(crate) finishing: AtomicBool,
    /// What the session was submitted with beyond its prompt (the claim's).
    pub(crate) settings: SessionSettings,
    /// How many times it was released for a provider outage before this claim.
    pub(crate) attempts: u32,
}

impl Held {
    pub(crate) fn lease(&self) -> Lease {
        self.lease.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub(crate) fn may_have_expired(&self) -> bool {
        self.lease
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .may_have_expired()
    }
}
