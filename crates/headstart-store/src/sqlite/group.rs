//! Group commit: writes that arrive while another commit is in progress share the next transaction and its sync.
//!
//! Every write is queued as a [`Job`]. The first write that finds no leader running starts one on tokio's blocking
//! pool; the leader takes the connection and, until the queue is empty, drains everything queued so far and commits
//! it as one group: `BEGIN IMMEDIATE`, then each job inside its own savepoint, then one `COMMIT` (one WAL sync under
//! `synchronous = FULL`). Writes arriving during that commit form the next group, so groups grow exactly when
//! commits are the bottleneck, and a write that arrives alone is committed alone at once.
//!
//! Every guarantee of a single-write transaction holds per job:
//! - **atomic**: a job that fails is rolled back to its savepoint and gets its error; the group goes on without it;
//! - **durable before it returns**: a job's result is handed back only after the group's `COMMIT` succeeded; if
//!   the `COMMIT` (or the `BEGIN`) fails, every job of the group gets that error, and none of them was written;
//! - **ordered**: jobs run in queue order, so sequence numbers stay gapless and follow the order writes were made.
//!
//! SQLite rolls a whole transaction back by itself on some errors (a full disk, some I/O errors). When a job fails
//! that way, the jobs before it lost their writes too: that job gets its error, and all the others are run again
//! in a fresh transaction (each job is a function of its inputs, safe to run again on a clean slate).

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::errors::{shared_sqlite_error, sqlite_error};
use crate::StoreError;

/// The most writes one group commits together (bounds the latency of the group's first write).
const MAX_GROUP: usize = 1024;

/// One queued write.
pub(super) trait Job: Send {
    /// What the write does, for errors ("commit a fragment of request 0 to session …").
    fn what(&self) -> &str;
    /// Performs the write inside the open transaction; keeps its value until [`Job::finish`].
    fn run(&mut self, conn: &Connection) -> Result<(), StoreError>;
    /// Hands the outcome back: `Ok` once the group committed, else the error.
    fn finish(self: Box<Self>, outcome: Result<(), StoreError>);
}

/// A write of a typed value as a [`Job`]: `op` performs it, `reply` receives its value once it is durable.
pub(super) struct WriteJob<T, F> {
    what: String,
    op: F,
    value: Option<T>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> WriteJob<T, F>
where
    T: Send + 'static,
    F: Fn(&Connection, &str) -> Result<T, StoreError> + Send + 'static,
{
    /// A job and the receiver of its outcome.
    pub fn queued(what: String, op: F) -> (Box<dyn Job>, oneshot::Receiver<Result<T, StoreError>>) {
        let (reply, receiver) = oneshot::channel();
        let job = WriteJob {
            what,
            op,
            value: None,
            reply,
        };
        (Box::new(job), receiver)
    }
}

impl<T, F> Job for WriteJob<T, F>
where
    T: Send + 'static,
    F: Fn(&Connection, &str) -> Result<T, StoreError> + Send + 'static,
{
    fn what(&self) -> &str {
        &self.what
    }

    fn run(&mut self, conn: &Connection) -> Result<(), StoreError> {
        self.value = None;
        let value = (self.op)(conn, &self.what)?;
        self.value = Some(value);
        Ok(())
    }

    fn finish(self: Box<Self>, outcome: Result<(), StoreError>) {
        let WriteJob { what, value, reply, .. } = *self;
        let result = outcome.and_then(|()| {
            value.ok_or_else(|| StoreError::Backend(format!("{what}: internal error: the write kept no value").into()))
        });
        // The caller may have stopped waiting (its future was dropped): the write stands regardless.
        let _ = reply.send(result);
    }
}

/// The queue of writes waiting for the leader.
#[derive(Default)]
pub(super) struct WriteQueue {
    state: Mutex<QueueState>,
}

#[derive(Default)]
struct QueueState {
    jobs: Vec<Box<dyn Job>>,
    leading: bool,
}

/// The message a write gets when the connection's mutex is poisoned.
pub(super) const POISONED: &str =
    "the database connection is unusable: an earlier store operation panicked while holding it";

impl WriteQueue {
    /// Queues a job; `true` when the caller must start a leader (none is running).
    pub fn push(&self, job: Box<dyn Job>) -> Result<bool, Box<dyn Job>> {
        let Ok(mut state) = self.state.lock() else {
            return Err(job);
        };
        state.jobs.push(job);
        Ok(!std::mem::replace(&mut state.leading, true))
    }

    /// Gives up the leader role without leading (the task that was to lead never ran); queued jobs wait for the
    /// leader the next write starts.
    pub fn resign(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.leading = false;
        }
    }

    /// The leader: commits groups from the queue on `conn` until it is empty.
    pub fn lead(&self, conn: &Mutex<Connection>) {
        /// Lets a later write start a new leader if this one unwinds.
        struct Resign<'q>(&'q WriteQueue);
        impl Drop for Resign<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    if let Ok(mut state) = self.0.state.lock() {
                        state.leading = false;
                    }
                }
            }
        }
        let _resign = Resign(self);
        loop {
            let jobs = {
                let Ok(mut state) = self.state.lock() else {
                    return;
                };
                if state.jobs.is_empty() {
                    state.leading = false;
                    return;
                }
                let take = state.jobs.len().min(MAX_GROUP);
                state.jobs.drain(..take).collect::<Vec<_>>()
            };
            match conn.lock() {
                Ok(mut conn) => {
                    commit_group(&mut conn, jobs);
                    // The group's writers have their replies: a checkpoint now delays nobody but the next group.
                    super::checkpoint::if_due(&conn);
                }
                Err(_) => {
                    for job in jobs {
                        job.finish(Err(StoreError::Backend(POISONED.into())));
                    }
                }
            }
        }
    }
}

/// Runs `job` alone in its own transaction (group commit off).
pub(super) fn commit_alone(conn: &mut Connection, job: Box<dyn Job>) {
    commit_group(conn, vec![job]);
}

/// Commits `jobs` as one transaction (several, if SQLite rolls one back by itself).
fn commit_group(conn: &mut Connection, mut jobs: Vec<Box<dyn Job>>) {
    while !jobs.is_empty() {
        jobs = commit_round(conn, jobs);
    }
}

/// Runs `sql` (a transaction-control statement) through the statement cache.
fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// One SQLite error, stated for each job it fails (the jobs share the error as their source).
fn for_each_job(err: rusqlite::Error) -> impl Fn(&str) -> StoreError {
    let err = Arc::new(err);
    move |what| shared_sqlite_error(&err, what, None)
}

/// One transaction over `jobs`; returns the jobs to run again when SQLite rolled the transaction back by itself.
fn commit_round(conn: &mut Connection, jobs: Vec<Box<dyn Job>>) -> Vec<Box<dyn Job>> {
    if let Err(err) = control(conn, "BEGIN IMMEDIATE") {
        let error = for_each_job(err);
        for job in jobs {
            let failure = error(job.what());
            job.finish(Err(failure));
        }
        return Vec::new();
    }
    // A lone write needs no savepoint: the transaction is its own.
    let savepoints = jobs.len() > 1;
    let mut written: Vec<Box<dyn Job>> = Vec::with_capacity(jobs.len());
    let mut queue = jobs.into_iter();
    while let Some(mut job) = queue.next() {
        let ran = if savepoints {
            control(conn, "SAVEPOINT job")
                .map_err(|err| sqlite_error(err, job.what(), None))
                .and_then(|()| run_caught(job.as_mut(), conn))
        } else {
            run_caught(job.as_mut(), conn)
        };
        match ran {
            Ok(()) => {
                if savepoints {
                    if let Err(err) = control(conn, "RELEASE job") {
                        let failure = sqlite_error(err, job.what(), None);
                        return fail_round(conn, job, failure, written, queue);
                    }
                }
                written.push(job);
            }
            Err(failure) => {
                if conn.is_autocommit() || !savepoints {
                    return fail_round(conn, job, failure, written, queue);
                }
                if let Err(err) = control(conn, "ROLLBACK TO job").and_then(|()| control(conn, "RELEASE job")) {
                    let rollback = sqlite_error(err, job.what(), None);
                    return fail_round(conn, job, rollback, written, queue);
                }
                job.finish(Err(failure));
            }
        }
    }
    match control(conn, "COMMIT") {
        Ok(()) => {
            for job in written {
                job.finish(Ok(()));
            }
        }
        Err(err) => {
            let error = for_each_job(err);
            roll_back(conn);
            for job in written {
                let failure = error(job.what());
                job.finish(Err(failure));
            }
        }
    }
    Vec::new()
}

/// `failed` ends the round: it gets `failure`, the transaction is rolled back (if SQLite has not already), and the
/// jobs written before it and those not yet run are returned to run again.
fn fail_round(
    conn: &Connection,
    failed: Box<dyn Job>,
    failure: StoreError,
    written: Vec<Box<dyn Job>>,
    rest: impl Iterator<Item = Box<dyn Job>>,
) -> Vec<Box<dyn Job>> {
    roll_back(conn);
    failed.finish(Err(failure));
    written.into_iter().chain(rest).collect()
}

fn roll_back(conn: &Connection) {
    if !conn.is_autocommit() {
        // Nothing else can be done if this fails; the next BEGIN will report a connection that is still in a
        // transaction.
        let _ = control(conn, "ROLLBACK");
    }
}

/// Runs a job, turning a panic into its error (the connection's mutex stays usable, and the savepoint undoes
/// whatever the job had written).
fn run_caught(job: &mut dyn Job, conn: &Connection) -> Result<(), StoreError> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| job.run(conn))) {
        Ok(result) => result,
        Err(_) => Err(StoreError::Backend(
            format!("{}: a store operation panicked", job.what()).into(),
        )),
    }
}
