//! A worker's metrics, recorded through the `metrics` facade next to the totals of
//! [`WorkerStats`](crate::WorkerStats): an application that installs a recorder receives them with no headstart
//! code. The engines a worker runs record the engine's own ([`headstart::metrics`]). docs/fleet.md lists them all.

use std::time::Duration;

use ::metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit};
use headstart::store::SessionEnd;

/// Counter: sessions claimed (pending ones and ones taken over), labelled `queue`.
pub const SESSIONS_CLAIMED: &str = "headstart_sessions_claimed_total";
/// Counter: sessions claimed from a worker whose lease had expired.
pub const SESSIONS_TAKEN_OVER: &str = "headstart_sessions_taken_over_total";
/// Counter: sessions finished in the queue, labelled `end="completed"`, `"failed"`, `"released"` or `"retry"`
/// (released because the model's provider was down), and `queue`.
pub const SESSIONS_FINISHED: &str = "headstart_sessions_finished_total";
/// Gauge: sessions this process's workers are running now.
pub const SESSIONS_RUNNING: &str = "headstart_sessions_running";
/// Counter: unfinished calls that recovery settled before taken-over sessions continued.
pub const RECOVERED_CALLS: &str = "headstart_recovered_calls_total";
/// Counter: leases renewed (one per session per renewal).
pub const LEASES_RENEWED: &str = "headstart_leases_renewed_total";
/// Counter: leases lost (another worker holds the session now): the session was stopped here.
pub const LEASES_LOST: &str = "headstart_leases_lost_total";
/// Counter: writes the store fenced (nothing was written: the lease was gone).
pub const FENCED_WRITES: &str = "headstart_fenced_writes_total";
/// Histogram, seconds: each claim the worker sends to its queue, from sending it to its answer (empty claims too).
pub const CLAIM_DURATION: &str = "headstart_claim_duration_seconds";
/// Gauge, labelled `worker`: 1 while the worker claims, 0 while its breaker is open (its provider is down).
pub const WORKER_CLAIMING: &str = "headstart_worker_claiming";

/// The `end` label of [`SESSIONS_FINISHED`].
const ENDS: [&str; 4] = ["completed", "failed", "released", "retry"];

/// Registers the descriptions and units of a worker's metrics, the engine's ([`headstart::metrics::describe`])
/// too, with the installed recorder, and sets the counters to zero, so a scrape shows every one from the start.
pub fn describe() {
    headstart::metrics::describe();
    let counters = [
        (
            SESSIONS_TAKEN_OVER,
            "Sessions claimed from a worker whose lease had expired.",
        ),
        (
            RECOVERED_CALLS,
            "Unfinished calls recovery settled before taken-over sessions continued.",
        ),
        (LEASES_RENEWED, "Leases renewed, one per session per renewal."),
        (
            LEASES_LOST,
            "Leases lost to another worker; the session was stopped here.",
        ),
        (FENCED_WRITES, "Writes the store fenced because the lease was gone."),
    ];
    for (name, help) in counters {
        describe_counter!(name, help);
        counter!(name).increment(0);
    }
    describe_counter!(SESSIONS_CLAIMED, "Sessions claimed from the queue, by queue.");
    describe_counter!(
        SESSIONS_FINISHED,
        "Sessions finished in the queue, by how they ended and by queue."
    );
    describe_gauge!(
        WORKER_CLAIMING,
        "1 while the worker claims sessions, 0 while its provider is down and its breaker open."
    );
    describe_gauge!(SESSIONS_RUNNING, "Sessions the workers of this process are running.");
    gauge!(SESSIONS_RUNNING).increment(0.0);
    describe_histogram!(
        CLAIM_DURATION,
        Unit::Seconds,
        "Claims sent to the queue, from sending to the answer."
    );
}

/// Shows a worker's labelled metrics from its start: claiming, and zero counts for each of its `queues`.
pub(crate) fn worker_started(worker: &str, queues: &[headstart::store::QueueName]) {
    claiming(worker, true);
    for queue in queues {
        counter!(SESSIONS_CLAIMED, "queue" => queue.to_string()).increment(0);
        for end in ENDS {
            counter!(SESSIONS_FINISHED, "end" => end, "queue" => queue.to_string()).increment(0);
        }
    }
}

pub(crate) fn claiming(worker: &str, claiming: bool) {
    gauge!(WORKER_CLAIMING, "worker" => worker.to_owned()).set(if claiming { 1.0 } else { 0.0 });
}

pub(crate) fn claimed(taken_over: bool, queue: &str) {
    counter!(SESSIONS_CLAIMED, "queue" => queue.to_owned()).increment(1);
    if taken_over {
        counter!(SESSIONS_TAKEN_OVER).increment(1);
    }
}

pub(crate) fn finished(end: &SessionEnd, queue: &str) {
    let end = match end {
        SessionEnd::Completed => ENDS[0],
        SessionEnd::Failed(_) => ENDS[1],
        SessionEnd::Released => ENDS[2],
        SessionEnd::Retry { .. } => ENDS[3],
    };
    counter!(SESSIONS_FINISHED, "end" => end, "queue" => queue.to_owned()).increment(1);
}

pub(crate) fn recovered(calls: u64) {
    counter!(RECOVERED_CALLS).increment(calls);
}

pub(crate) fn renewed(leases: usize) {
    counter!(LEASES_RENEWED).increment(leases as u64);
}

pub(crate) fn lost() {
    counter!(LEASES_LOST).increment(1);
}

pub(crate) fn fenced_write() {
    counter!(FENCED_WRITES).increment(1);
}

pub(crate) fn claim_took(duration: Duration) {
    histogram!(CLAIM_DURATION).record(duration);
}

/// Counts a session in [`SESSIONS_RUNNING`] while it lives (a session task holds one; dropped with the task,
/// even one that panicked).
pub(crate) struct Running(());

impl Running {
    pub(crate) fn start() -> Self {
        gauge!(SESSIONS_RUNNING).increment(1.0);
        Running(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        gauge!(SESSIONS_RUNNING).decrement(1.0);
    }
}
