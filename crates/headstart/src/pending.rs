//! [`PendingCalls`]: provider-async calls whose response ended before their results (contract §3.7.5). Each result
//! is written the moment it is ready, so the first request built after it carries it; the agent loop shows it and
//! decides when a request is worth making for it alone.

use std::sync::Arc;

use futures::StreamExt;
use headstart_core::{ToolCall, ToolResultMessage};
use headstart_store::{RunOutcome, SessionId, StoreError, TranscriptStore};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::Clock;
use crate::events::outbox::Outbox;
use crate::response::results::push_result_events;
use crate::response::runner::DetachedCalls;

/// A pending call's result, written (or not: `seq` is the store's failure).
pub(crate) struct Delivered {
    call: Arc<ToolCall>,
    result: ToolResultMessage,
    outcome: RunOutcome,
    seq: Result<u64, StoreError>,
}

impl Delivered {
    /// Shows the result; returns the store's failure, if its write failed.
    pub fn show(self, out: &mut Outbox) -> Option<StoreError> {
        let (seq, failure) = match self.seq {
            Ok(seq) => (Some(seq), None),
            Err(error) => (None, Some(error)),
        };
        push_result_events(out, &self.call, self.result, Some(self.outcome), seq, false);
        failure
    }
}

/// The request whose response is streaming, if one is: a result written meanwhile says so (`ready_during`), so
/// the context places it after that response, which never saw it (contract §3.7.5). Results are written under
/// the lock, and the loop reads a request's context and marks it streaming under it too: a result is either in
/// the request's context or marked, never both, never neither.
pub(crate) type Streaming = Arc<tokio::sync::Mutex<Option<u32>>>;

/// The provider-async calls of one run still running after their responses ended.
pub(crate) struct PendingCalls {
    streaming: Streaming,
    store: Arc<dyn TranscriptStore>,
    clock: Arc<dyn Clock>,
    session: SessionId,
    sender: mpsc::UnboundedSender<Delivered>,
    delivered: mpsc::UnboundedReceiver<Delivered>,
    /// Calls handed over whose result has not been taken from `delivered`.
    outstanding: usize,
    /// The call tokens of the responses they came from.
    cancels: Vec<CancellationToken>,
}

impl PendingCalls {
    /// None yet, for `session`'s run.
    pub fn new(store: Arc<dyn TranscriptStore>, clock: Arc<dyn Clock>, session: SessionId) -> Self {
        let (sender, delivered) = mpsc::unbounded_channel();
        PendingCalls {
            streaming: Streaming::default(),
            store,
            clock,
            session,
            sender,
            delivered,
            outstanding: 0,
            cancels: Vec::new(),
        }
    }

    /// The lock result writes take, holding the request being streamed.
    pub fn streaming(&self) -> &Streaming {
        &self.streaming
    }

    /// No call is pending.
    pub fn is_empty(&self) -> bool {
        self.outstanding == 0
    }

    /// How many calls are pending (adopted, their results not yet taken).
    pub fn len(&self) -> usize {
        self.outstanding
    }

    /// Takes over the calls request `request`'s response ended without: a task on `tasks` writes each result as it
    /// comes, in the order they come.
    pub fn adopt(&mut self, detached: DetachedCalls, request: u32, tasks: &TaskTracker) {
        if detached.is_empty() {
            return;
        }
        let DetachedCalls {
            calls,
            mut returns,
            cancel,
        } = detached;
        self.outstanding += calls.len();
        self.cancels.push(cancel);
        let (store, clock, session) = (Arc::clone(&self.store), Arc::clone(&self.clock), self.session.clone());
        let streaming = Arc::clone(&self.streaming);
        let sender = self.sender.clone();
        tasks.spawn(async move {
            while let Some((slot, executed)) = returns.next().await {
                let Some((call, started_at_us)) = calls.get(&slot).cloned() else {
                    continue;
                };
                let outcome = executed.outcome;
                let (mut result, run) = executed.settle(&call, started_at_us);
                let streaming = streaming.lock().await;
                result.ready_during = *streaming;
                let seq = store
                    .append_tool_result(&session, request, &result, Some(run), clock.now_us())
                    .await;
                drop(streaming);
                tracing::info!(request, call_id = %call.id, written = seq.is_ok(), "provider-async result ready");
                // The loop holds the receiver until the run ends, and waits for every call it adopted first.
                let _ = sender.send(Delivered {
                    call,
                    result,
                    outcome,
                    seq,
                });
            }
        });
    }

    /// The results written since the last call, without waiting.
    pub fn ready(&mut self) -> Vec<Delivered> {
        let mut ready = Vec::new();
        while let Ok(delivered) = self.delivered.try_recv() {
            ready.push(delivered);
        }
        self.outstanding -= ready.len();
        ready
    }

    /// Waits for the next result; `None` when no call is pending.
    pub async fn next(&mut self) -> Option<Delivered> {
        if self.outstanding == 0 {
            return None;
        }
        let delivered = self.delivered.recv().await;
        if delivered.is_some() {
            self.outstanding -= 1;
        }
        delivered
    }

    /// Cancels every pending call: each returns (cancelled, or whatever it had) and its result is written.
    pub fn cancel(&self) {
        for cancel in &self.cancels {
            cancel.cancel();
        }
    }
}
