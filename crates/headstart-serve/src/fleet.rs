//! A fleet's state from its queue (contract §7.5): the workers the sessions name, what each holds and until
//! when, what each finished, and the sessions claimed more than once (taken over after a lost lease or a
//! release).

use std::collections::BTreeMap;

use headstart::store::{SessionInfo, SessionState};
use serde::Serialize;

/// The fleet as its queue shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Fleet {
    /// Whether the store holds any queued session (else it is a single-process store: no fleet).
    pub queue: bool,
    /// Sessions waiting for a worker.
    pub pending: usize,
    /// Each queue some unfinished session waits or runs in, by name (issue 44).
    pub queues: Vec<Queue>,
    /// Every worker some session names, by name.
    pub workers: Vec<Worker>,
    /// Sessions claimed more than once, newest first.
    pub takeovers: Vec<Takeover>,
}

/// One queue's unfinished sessions. A worker's breaker (its provider down) shows on its own metrics and log, not
/// here: the store knows sessions, not workers.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Queue {
    /// Its name.
    pub name: String,
    /// Sessions waiting for a worker.
    pub pending: usize,
    /// Of which released for a provider outage and waiting out their backoff or their next claim.
    pub retrying: usize,
    /// Sessions a worker holds.
    pub running: usize,
}

/// One worker.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Worker {
    /// Its name (`--name`).
    pub name: String,
    /// The sessions it holds now.
    pub running: Vec<Held>,
    /// Sessions it completed.
    pub completed: usize,
    /// Sessions it failed.
    pub failed: usize,
}

/// A session a worker holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Held {
    /// The session.
    pub session: String,
    /// The claim's epoch.
    pub epoch: u64,
    /// When the lease ends (µs since the Unix epoch, the database's clock).
    pub lease_expires_at_us: Option<i64>,
}

/// A session claimed more than once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Takeover {
    /// The session.
    pub session: String,
    /// How many claims it has had.
    pub epoch: u64,
    /// Its current or last worker.
    pub owner: Option<String>,
    /// Its state.
    pub state: String,
}

impl Fleet {
    /// The fleet of the listed sessions (oldest first, as the store lists them).
    pub fn of(sessions: &[SessionInfo]) -> Fleet {
        let mut workers: BTreeMap<&str, Worker> = BTreeMap::new();
        let mut queues: BTreeMap<&str, Queue> = BTreeMap::new();
        let mut fleet = Fleet::default();
        for info in sessions {
            if info.state != SessionState::Unqueued {
                fleet.queue = true;
            }
            if info.state == SessionState::Pending {
                fleet.pending += 1;
            }
            if matches!(info.state, SessionState::Pending | SessionState::Running) {
                let name = info.settings.queue_name();
                let queue = queues.entry(name).or_insert_with(|| Queue {
                    name: name.to_owned(),
                    ..Queue::default()
                });
                match info.state {
                    SessionState::Pending => queue.pending += 1,
                    _ => queue.running += 1,
                }
                if info.state == SessionState::Pending && info.attempts > 0 {
                    queue.retrying += 1;
                }
            }
            if info.epoch > 1 {
                fleet.takeovers.push(Takeover {
                    session: info.id.0.clone(),
                    epoch: info.epoch,
                    owner: info.owner.clone(),
                    state: info.state.as_str().to_owned(),
                });
            }
            let Some(owner) = &info.owner else { continue };
            let worker = workers.entry(owner).or_insert_with(|| Worker {
                name: owner.clone(),
                ..Worker::default()
            });
            match info.state {
                SessionState::Running => worker.running.push(Held {
                    session: info.id.0.clone(),
                    epoch: info.epoch,
                    lease_expires_at_us: info.lease_expires_at_us,
                }),
                SessionState::Completed => worker.completed += 1,
                SessionState::Failed => worker.failed += 1,
                SessionState::Unqueued | SessionState::Pending => {}
            }
        }
        fleet.takeovers.reverse();
        fleet.workers = workers.into_values().collect();
        fleet.queues = queues.into_values().collect();
        fleet
    }
}
