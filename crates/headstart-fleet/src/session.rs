//! One claimed session on its own task: recover, resume, finish.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::StreamExt;
use headstart::store::{Layered, SessionEnd, StoreError, Write, WriteFuture, WriteLayer, Written};
use headstart::{Agent, AgentEvent, AgentStop, SessionId};

use crate::context::{Context, Held};
use crate::events::WorkerEvent;
use crate::metrics;
use crate::provider_watch::{Outage, Watched};

/// Stops a session whose lease is gone: marks it lost (so it is not finished here) and cancels its run.
pub(crate) fn lose(context: &Context, session: &SessionId, held: &Held, reason: &str) {
    if held.lost.swap(true, Ordering::SeqCst) {
        return;
    }
    context.counters.count_lost();
    context.report(WorkerEvent::Lost {
        session: session.clone(),
        reason: reason.to_owned(),
    });
    held.cancel.cancel();
}

/// Counts the writes the store fenced, so a worker can tell how many of its writes a takeover refused.
struct FenceCounter {
    context: Arc<Context>,
    session: SessionId,
}

impl WriteLayer for FenceCounter {
    fn around<'a, T: Written + 'a>(&'a self, _write: Write<'a>, next: WriteFuture<'a, T>) -> WriteFuture<'a, T> {
        Box::pin(async move {
            let written = next.await;
            if matches!(written, Err(StoreError::Fenced(_))) {
                self.context.counters.count_fenced_write();
                self.context.report(WorkerEvent::FencedWrite {
                    session: self.session.clone(),
                });
            }
            written
        })
    }
}

/// How the session's run ended, for this worker.
enum Ending {
    /// Finish it in the queue.
    Finish(SessionEnd),
    /// Its model's provider is down: release it for a retry, or fail it when its attempts are spent.
    Outage(String),
    /// The lease is gone: another worker holds it (or it ended); leave it.
    Lost(String),
}

/// Runs a claimed session to its end in this worker.
pub(crate) async fn drive(context: Arc<Context>, held: Arc<Held>) {
    let _running = metrics::Running::start();
    let lease = held.lease();
    let session = lease.session.clone();
    let fenced = context.queue.fenced(&lease);
    let store = Arc::new(Layered::new(
        fenced,
        FenceCounter {
            context: Arc::clone(&context),
            session: session.clone(),
        },
    ));
    let guard = {
        let held = Arc::clone(&held);
        move || held.may_have_expired()
    };
    let engine = context
        .setup
        .engine(&session, store)
        .lease_guard(Arc::new(guard))
        .build();
    let ending = match engine.recover(&session, context.config.recovery).await {
        Err(error) => store_ending(&error),
        Ok(recovered) => {
            if !recovered.is_empty() {
                context.counters.count_recovered(recovered.len() as u64);
                context.report(WorkerEvent::Recovered {
                    session: session.clone(),
                    calls: recovered.len(),
                });
            }
            let (model, outage) = Watched::new(context.setup.model(&session, &held.settings), Arc::clone(&context));
            let agent = Agent::new(engine, Arc::new(model));
            let mut events = agent.resume(&session, held.cancel.clone());
            let settled = events.settled();
            let mut stop = None;
            while let Some(event) = events.next().await {
                if let AgentEvent::AgentEnd { stop: end } = event {
                    stop = Some(end);
                }
            }
            // Every admitted call has its result (or its write was fenced) before the session is finished.
            settled.await;
            stop_ending(stop, &outage)
        }
    };
    let ending = match ending {
        // A cancelled run was stopped by this worker: a lost lease, or a shutdown that releases the session.
        Ending::Finish(SessionEnd::Released) if held.lost.load(Ordering::SeqCst) => return,
        ending => ending,
    };
    match ending {
        Ending::Lost(reason) => {
            context.breaker(|breaker| {
                breaker.session_ended();
                None
            });
            lose(&context, &session, &held, &reason);
        }
        Ending::Outage(reason) => {
            let end = retry_or_fail(&context, &session, &held, reason);
            held.finishing.store(true, Ordering::SeqCst);
            finish(&context, &session, &held, end).await;
            context.breaker(|breaker| breaker.failed(tokio::time::Instant::now(), fastrand::f64()));
        }
        Ending::Finish(end) => {
            context.breaker(|breaker| {
                breaker.session_ended();
                None
            });
            held.finishing.store(true, Ordering::SeqCst);
            finish(&context, &session, &held, end).await;
        }
    }
}

/// A session stopped by its provider's outage: released with a backoff while it has attempts left ([`Held::attempts`]
/// before this one), failed with the provider's error once they are spent.
fn retry_or_fail(context: &Context, session: &SessionId, held: &Held, reason: String) -> SessionEnd {
    let config = &context.config;
    let attempt = held.attempts.saturating_add(1);
    if attempt >= config.max_attempts {
        return SessionEnd::Failed(format!(
            "the model's provider failed {attempt} attempt(s) in a row; the last: {reason}"
        ));
    }
    let after = config.session_backoff.wait(attempt, fastrand::f64());
    context.report(WorkerEvent::Retrying {
        session: session.clone(),
        attempt,
        max_attempts: config.max_attempts,
        after,
        reason: reason.clone(),
    });
    SessionEnd::Retry {
        reason: format!("attempt {attempt} of {}: {reason}", config.max_attempts),
        after,
    }
}

/// Ends the session in the queue as `end` says.
async fn finish(context: &Context, session: &SessionId, held: &Held, end: SessionEnd) {
    match context.queue.finish(&held.lease(), end.clone()).await {
        Ok(()) => {
            context.counters.count_end(&end, held.settings.queue_name());
            context.report(WorkerEvent::Finished {
                session: session.clone(),
                end,
            });
        }
        Err(StoreError::Fenced(message)) => lose(context, session, held, &message),
        Err(error) => {
            // The lease lapses and another worker (or this one) claims the session again; recovery settles
            // whatever is left.
            context.report(WorkerEvent::QueueError {
                message: format!("finish {session}: {error}"),
            });
        }
    }
}

/// A store error before the run: fenced means lost; anything else fails the session.
fn store_ending(error: &StoreError) -> Ending {
    match error {
        StoreError::Fenced(message) => Ending::Lost(message.clone()),
        other => Ending::Finish(SessionEnd::Failed(other.to_string())),
    }
}

/// How the run's stop ends the session; `outage` says whether the model's last request failed on the provider's
/// side (a run stopped by it is released for a retry, not failed).
fn stop_ending(stop: Option<AgentStop>, outage: &Outage) -> Ending {
    match stop {
        Some(AgentStop::Error(message)) if outage.last().is_some() => Ending::Outage(message),
        Some(stop) if stop.is_finished() => Ending::Finish(SessionEnd::Completed),
        Some(AgentStop::Cancelled) => Ending::Finish(SessionEnd::Released),
        Some(AgentStop::Fenced(message)) => Ending::Lost(message),
        Some(AgentStop::ResponseFailed) => {
            Ending::Finish(SessionEnd::Failed("the model's last response failed".to_owned()))
        }
        Some(AgentStop::Error(message)) => Ending::Finish(SessionEnd::Failed(message)),
        // Taken by the `is_finished` arm above; listed for the compiler.
        Some(AgentStop::Completed | AgentStop::Terminated | AgentStop::MaxRequests) => {
            Ending::Finish(SessionEnd::Completed)
        }
        None => Ending::Finish(SessionEnd::Failed("the run ended without agent_end".to_owned())),
    }
}
