//! [`Worker`]: the loop that claims sessions, renews their leases and runs each on a task of its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt as _;
use headstart::store::{Failures, Lease, SessionQueue, StoreError, WakeUp, WakeUps};
use headstart::{CancellationToken, SessionId};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::breaker::Breaker;
use crate::claim_schedule::ClaimSchedule;
use crate::config::{WorkerConfig, WorkerError};
use crate::context::{Context, Held};
use crate::events::{Counters, WorkerEvent, WorkerStats};
use crate::metrics;
use crate::session;
use headstart::SessionSetup;

/// A worker of a fleet. See the [crate documentation](crate).
pub struct Worker {
    context: Arc<Context>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("config", &self.context.config)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker taking sessions from `queue` and running them as `setup` says.
    pub fn new(
        queue: Arc<dyn SessionQueue>,
        setup: Arc<dyn SessionSetup>,
        config: WorkerConfig,
    ) -> Result<Self, WorkerError> {
        if config.concurrency == 0 {
            return Err(WorkerError::NoConcurrency);
        }
        if config.lease < Duration::from_millis(3) {
            return Err(WorkerError::LeaseTooShort(config.lease));
        }
        if config.id.is_empty() {
            return Err(WorkerError::NoId);
        }
        if config.queues.is_empty() {
            return Err(WorkerError::NoQueues);
        }
        if config.max_attempts == 0 {
            return Err(WorkerError::NoAttempts);
        }
        let breaker = Mutex::new(Breaker::new(config.breaker));
        Ok(Worker {
            context: Arc::new(Context {
                queue,
                setup,
                config,
                counters: Counters::default(),
                observer: None,
                breaker,
            }),
        })
    }

    /// Calls `observer` with every [`WorkerEvent`], on the worker's tasks (keep it quick). Set it before
    /// [`run`](Self::run).
    pub fn observe(mut self, observer: impl Fn(&WorkerEvent) + Send + Sync + 'static) -> Self {
        if let Some(context) = Arc::get_mut(&mut self.context) {
            context.observer = Some(Arc::new(observer));
        }
        self
    }

    /// What the worker did so far.
    pub fn stats(&self) -> WorkerStats {
        self.context.counters.snapshot()
    }

    /// Runs until `shutdown` is cancelled: claims, renews, runs sessions. While it has room it claims at its poll
    /// interval, and at once when the queue's [`wake_ups`](SessionQueue::wake_ups) say a session is waiting (a
    /// burst of them makes one claim); a wake-up that never comes costs one poll interval at most. On shutdown it
    /// stops claiming, cancels its sessions (their admitted calls settle as on any cancellation, contract §5.5),
    /// releases them to the queue, and returns once every session task ended.
    ///
    /// While its store fails, it neither claims nor renews before the wait of [`WorkerConfig::retry`] has passed.
    pub async fn run(&self, shutdown: CancellationToken) -> WorkerStats {
        let context = &self.context;
        let config = &context.config;
        let renew_every = config.lease / 3;
        let mut held: HashMap<SessionId, Arc<Held>> = HashMap::new();
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut task_sessions: HashMap<tokio::task::Id, SessionId> = HashMap::new();
        let mut next_renewal = Instant::now() + renew_every;
        let mut schedule = ClaimSchedule::new(Instant::now(), config.poll_interval);
        let mut failures = Failures::default();
        let mut wake_ups = context.queue.wake_ups(&config.queues);
        metrics::worker_started(&config.id, &config.queues);
        // Whether the queue's wake-ups are down (reported once, with their return).
        let mut wake_ups_lost = false;
        while !shutdown.is_cancelled() {
            // While the provider is down the worker claims nothing (a wake-up included) until the cool-down ends.
            if let Some(until) = self.breaker().reopens_at() {
                schedule.hold_until(until);
            }
            if held.len() < config.concurrency && schedule.due(Instant::now()) {
                // What a burst left is answered by this claim: taken now, it wakes no second one.
                while let Some(wake_up) = wake_ups.as_mut().and_then(WakeUps::try_next) {
                    self.woken(wake_up, &mut schedule, &mut wake_ups_lost);
                }
                schedule.claiming(Instant::now());
                let claimed = self.claim(&mut held, &mut tasks, &mut task_sessions).await;
                if let Some(at) = self.settle("claim", claimed, &mut failures) {
                    schedule.claim_failed(at);
                    next_renewal = next_renewal.max(at);
                }
            }
            if Instant::now() >= next_renewal {
                next_renewal = Instant::now() + renew_every;
                if let Some(renewed) = self.renew(&held).await {
                    if let Some(at) = self.settle("renew", renewed, &mut failures) {
                        // Sooner than the next third of the lease while the waits are short: the leases may still
                        // be saved.
                        next_renewal = at;
                        schedule.renewal_failed(at);
                    }
                }
            }
            let wake = if held.len() < config.concurrency {
                schedule.next().min(next_renewal)
            } else {
                next_renewal
            };
            tokio::select! {
                Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    // A task that panicked is forgotten too: its lease lapses and another worker recovers it.
                    let id = match done {
                        Ok((id, _)) => id,
                        Err(error) => error.id(),
                    };
                    if let Some(session) = task_sessions.remove(&id) {
                        held.remove(&session);
                    }
                    // Room again: look for work now rather than at the next poll (unless the store is being
                    // left alone).
                    schedule.wake();
                }
                Some(wake_up) = next_wake_up(wake_ups.as_mut()), if wake_ups.is_some() => {
                    self.woken(wake_up, &mut schedule, &mut wake_ups_lost);
                }
                () = tokio::time::sleep_until(wake) => {}
                () = shutdown.cancelled() => {}
            }
        }
        for entry in held.values() {
            entry.cancel.cancel();
        }
        while tasks.join_next().await.is_some() {}
        self.stats()
    }

    /// A wake-up from the queue: work wakes the schedule; the listener's loss and return are reported, and its
    /// return wakes the schedule too (what was sent while it was away was missed).
    fn woken(&self, wake_up: WakeUp, schedule: &mut ClaimSchedule, lost: &mut bool) {
        match wake_up {
            WakeUp::Work => schedule.wake(),
            WakeUp::Listening => {
                if std::mem::take(lost) {
                    self.context.report(WorkerEvent::WakeUpsRestored);
                }
                schedule.wake();
            }
            WakeUp::Lost(message) => {
                if !std::mem::replace(lost, true) {
                    self.context.report(WorkerEvent::WakeUpsLost { message });
                }
            }
        }
    }

    /// After a claim or renewal: a success starts the retry schedule over; a failure is reported with its wait,
    /// and gives the instant before which the store is not tried again.
    fn settle(&self, operation: &str, outcome: Result<(), StoreError>, failures: &mut Failures) -> Option<Instant> {
        let context = &self.context;
        match outcome {
            Ok(()) => {
                failures.succeeded();
                None
            }
            Err(error) => {
                let retry_in = failures.failed(&context.config.retry, fastrand::f64());
                context.report(WorkerEvent::StoreUnreachable {
                    message: format!("{operation}: {error}"),
                    retry_in,
                });
                Some(Instant::now() + retry_in)
            }
        }
    }

    /// Claims what there is room for and starts each claimed session's task.
    async fn claim(
        &self,
        held: &mut HashMap<SessionId, Arc<Held>>,
        tasks: &mut JoinSet<()>,
        task_sessions: &mut HashMap<tokio::task::Id, SessionId>,
    ) -> Result<(), StoreError> {
        let context = &self.context;
        let config = &context.config;
        let room = self.breaker().room(Instant::now(), config.concurrency - held.len());
        if room == 0 {
            return Ok(());
        }
        let sent = std::time::Instant::now();
        let claims = context
            .queue
            .claim_from(&config.id, &config.queues, config.lease, room)
            .await;
        metrics::claim_took(sent.elapsed());
        let claims = claims?;
        if !claims.is_empty() {
            self.breaker().probe_claimed();
        }
        for claim in claims {
            let session = claim.lease.session.clone();
            context
                .counters
                .count_claim(claim.previous_owner.is_some(), claim.settings.queue_name());
            context.report(WorkerEvent::Claimed {
                session: session.clone(),
                epoch: claim.lease.epoch,
                previous_owner: claim.previous_owner.clone(),
            });
            let entry = Arc::new(Held {
                lease: Mutex::new(claim.lease),
                cancel: CancellationToken::new(),
                lost: AtomicBool::new(false),
                finishing: AtomicBool::new(false),
                settings: claim.settings,
                attempts: claim.attempts,
            });
            held.insert(session.clone(), Arc::clone(&entry));
            let task = tasks.spawn(session::drive(Arc::clone(context), entry));
            task_sessions.insert(task.id(), session);
        }
        Ok(())
    }

    /// The worker's breaker, locked (briefly: never across an await).
    fn breaker(&self) -> std::sync::MutexGuard<'_, Breaker> {
        self.context.breaker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Renews the leases of the sessions not being finished; `None` when there was none (the store was not
    /// asked). On an error the leases keep their old deadlines: the guard stops calls once they may have lapsed.
    async fn renew(&self, held: &HashMap<SessionId, Arc<Held>>) -> Option<Result<(), StoreError>> {
        let context = &self.context;
        let leases: Vec<Lease> = held
            .values()
            .filter(|entry| !entry.finishing.load(Ordering::SeqCst))
            .map(|entry| entry.lease())
            .collect();
        if leases.is_empty() {
            return None;
        }
        let renewed = match context.queue.renew(&leases, context.config.lease).await {
            Ok(renewed) => renewed,
            Err(error) => return Some(Err(error)),
        };
        metrics::renewed(renewed.len());
        let mut kept: HashMap<&SessionId, &Lease> = HashMap::new();
        for lease in &renewed {
            kept.insert(&lease.session, lease);
        }
        for (session, entry) in held {
            match kept.get(session) {
                Some(lease) => *entry.lease.lock().unwrap_or_else(PoisonError::into_inner) = (*lease).clone(),
                None if entry.finishing.load(Ordering::SeqCst) => {}
                None => session::lose(context, session, entry, "the lease could not be renewed"),
            }
        }
        Some(Ok(()))
    }
}

/// The next wake-up of `wake_ups` (never, without them).
async fn next_wake_up(wake_ups: Option<&mut WakeUps>) -> Option<WakeUp> {
    wake_ups?.next().await
}
