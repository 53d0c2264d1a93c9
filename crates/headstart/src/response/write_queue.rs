//! The result-write queue of one response: results are written in the order they settled, one write at a time, so
//! the transcript's order is the order results settled, whatever the threads do (contract §6.5). Results of calls
//! that never ran (refused past the call cap, unknown tools, invalid arguments, calls not executed) that are queued
//! one after another go in one write (`TranscriptStore::append_tool_results`): a model that floods a response with
//! ten thousand calls gets ten thousand refusals in a handful of transactions, not ten thousand.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::FutureExt;
use headstart_core::{ToolCall, ToolResultMessage};
use headstart_store::{NewResult, RunEnd, SessionId, StoreError, TranscriptStore};

use crate::clock::Clock;

/// The most results one write carries.
const MAX_RESULTS_PER_WRITE: usize = 1024;

/// A tool result waiting to be written, and what its events need.
pub(crate) struct ResultWrite {
    pub call: Arc<ToolCall>,
    pub result: ToolResultMessage,
    pub run: Option<RunEnd>,
    /// The call never executed: its `tool_execution_start` is emitted right before its end (contract §5.7).
    pub never_started: bool,
}

/// A write that ended: the result, and its sequence number or the store's failure.
pub(crate) type Written = (ResultWrite, Result<u64, StoreError>);

/// The write in flight: its results, in order, and the future of their sequence numbers.
type InFlight = (Vec<ResultWrite>, BoxFuture<'static, Result<Vec<u64>, StoreError>>);

/// Results waiting to be written, the one write in flight, and the results of the last write not yet handed out.
pub(crate) struct WriteQueue {
    store: Arc<dyn TranscriptStore>,
    session: SessionId,
    request: u32,
    clock: Arc<dyn Clock>,
    waiting: VecDeque<ResultWrite>,
    in_flight: Option<InFlight>,
    done: VecDeque<Written>,
}

impl WriteQueue {
    /// An empty queue writing the results of request `request` of `session`, stamped with `clock`.
    pub fn new(store: Arc<dyn TranscriptStore>, session: SessionId, request: u32, clock: Arc<dyn Clock>) -> Self {
        WriteQueue {
            store,
            session,
            request,
            clock,
            waiting: VecDeque::new(),
            in_flight: None,
            done: VecDeque::new(),
        }
    }

    /// Queues a result; it is written after every result queued before it.
    pub fn push(&mut self, write: ResultWrite) {
        self.waiting.push_back(write);
    }

    /// `true` when nothing is queued, in flight, or written but not handed out.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.in_flight.is_none() && self.done.is_empty()
    }

    /// Starts the next write if none is in flight: the next queued result, with those after it while it and they
    /// never ran.
    fn start_next(&mut self) {
        if self.in_flight.is_some() {
            return;
        }
        let Some(first) = self.waiting.pop_front() else {
            return;
        };
        let batches = first.never_started;
        let mut writes = vec![first];
        while batches
            && writes.len() < MAX_RESULTS_PER_WRITE
            && self.waiting.front().is_some_and(|next| next.never_started)
        {
            writes.extend(self.waiting.pop_front());
        }
        let store = Arc::clone(&self.store);
        let session = self.session.clone();
        let at_us = self.clock.now_us();
        let request = self.request;
        let future = if let [write] = writes.as_slice() {
            let (result, run) = (write.result.clone(), write.run);
            async move { (store.append_tool_result(&session, request, &result, run, at_us).await).map(|seq| vec![seq]) }
                .boxed()
        } else {
            let results: Vec<NewResult> = (writes.iter())
                .map(|write| NewResult {
                    result: write.result.clone(),
                    run: write.run,
                })
                .collect();
            async move { store.append_tool_results(&session, request, &results, at_us).await }.boxed()
        };
        self.in_flight = Some((writes, future));
    }

    /// The next written result: one of the last write's, else from the write in flight (starting the next one first
    /// if none is).
    pub fn poll_written(&mut self, cx: &mut Context<'_>) -> Poll<Written> {
        if let Some(written) = self.done.pop_front() {
            return Poll::Ready(written);
        }
        self.start_next();
        let Some((_, future)) = &mut self.in_flight else {
            return Poll::Pending;
        };
        let Poll::Ready(outcome) = future.as_mut().poll(cx) else {
            return Poll::Pending;
        };
        if let Some((writes, _)) = self.in_flight.take() {
            self.done.extend(split(writes, outcome));
        }
        self.done.pop_front().map_or(Poll::Pending, Poll::Ready)
    }

    /// Waits for the write in flight, if any, and returns every result written and not yet handed out, for a caller
    /// that must have them before writing something else. `before_wait` runs first when there is a write to wait
    /// for.
    pub async fn finish_in_flight(&mut self, before_wait: impl FnOnce()) -> Vec<Written> {
        if let Some((writes, future)) = self.in_flight.take() {
            before_wait();
            let outcome = future.await;
            self.done.extend(split(writes, outcome));
        }
        self.done.drain(..).collect()
    }
}

/// Each result of one write with its sequence number, or the write's failure.
fn split(writes: Vec<ResultWrite>, outcome: Result<Vec<u64>, StoreError>) -> Vec<Written> {
    match outcome {
        Ok(seqs) if seqs.len() == writes.len() => writes.into_iter().zip(seqs.into_iter().map(Ok)).collect(),
        Ok(seqs) => {
            let error =
                StoreError::Backend(format!("the store wrote {} results of {}", seqs.len(), writes.len()).into());
            writes.into_iter().map(|write| (write, Err(error.clone()))).collect()
        }
        Err(error) => writes.into_iter().map(|write| (write, Err(error.clone()))).collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use headstart_store::{SqliteStore, TranscriptStore};

    use super::*;
    use crate::clock::TokioClock;
    use crate::response::fixture::result_write;

    fn queue(store: &Arc<dyn TranscriptStore>, session: &SessionId) -> WriteQueue {
        WriteQueue::new(
            Arc::clone(store),
            session.clone(),
            0,
            Arc::new(TokioClock::starting_now()),
        )
    }

    /// A result of a call that ran.
    fn executed(id: &str) -> ResultWrite {
        ResultWrite {
            never_started: false,
            ..result_write(id)
        }
    }

    async fn stored_texts(store: &Arc<dyn TranscriptStore>, session: &SessionId) -> Vec<String> {
        let log = store.load_log(session).await.expect("log");
        log.iter()
            .filter_map(|stored| match &stored.message {
                headstart_core::Message::ToolResult(result) => Some(result.text()),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn results_of_calls_that_ran_are_written_one_at_a_time_in_the_order_they_were_queued() {
        let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().expect("store"));
        let session = store.create_session(0).await.expect("session");
        let mut queue = queue(&store, &session);
        assert!(queue.is_empty());
        for id in ["c1", "c2", "c3"] {
            queue.push(executed(id));
        }
        let mut written = Vec::new();
        while !queue.is_empty() {
            let (write, seq) = std::future::poll_fn(|cx| queue.poll_written(cx)).await;
            written.push((write.call.id.clone(), seq.expect("written")));
            assert!(
                queue.in_flight.is_none(),
                "the next write starts only when the queue is polled again"
            );
        }
        assert_eq!(
            written,
            [("c1".to_owned(), 1), ("c2".to_owned(), 2), ("c3".to_owned(), 3)]
        );
        assert_eq!(
            stored_texts(&store, &session).await,
            ["result of c1", "result of c2", "result of c3"]
        );
    }

    #[tokio::test]
    async fn results_of_calls_that_never_ran_queued_together_go_in_one_write() {
        let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().expect("store"));
        let session = store.create_session(0).await.expect("session");
        let mut queue = queue(&store, &session);
        for write in [
            result_write("r1"),
            result_write("r2"),
            executed("c3"),
            result_write("r4"),
        ] {
            queue.push(write);
        }
        queue.start_next();
        let in_flight: Vec<&str> = (queue.in_flight.iter())
            .flat_map(|(writes, _)| writes.iter().map(|write| write.call.id.as_str()))
            .collect();
        assert_eq!(in_flight, ["r1", "r2"], "a result of a call that ran ends the batch");
        let mut written = Vec::new();
        while !queue.is_empty() {
            let (write, seq) = std::future::poll_fn(|cx| queue.poll_written(cx)).await;
            written.push((write.call.id.clone(), seq.expect("written")));
        }
        let ids: Vec<(&str, u64)> = written.iter().map(|(id, seq)| (id.as_str(), *seq)).collect();
        assert_eq!(ids, [("r1", 1), ("r2", 2), ("c3", 3), ("r4", 4)]);
        assert_eq!(
            stored_texts(&store, &session).await,
            ["result of r1", "result of r2", "result of c3", "result of r4"]
        );
    }

    #[tokio::test]
    async fn finishing_the_write_in_flight_hands_out_all_of_its_results() {
        let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().expect("store"));
        let session = store.create_session(0).await.expect("session");
        let mut queue = queue(&store, &session);
        let mut waited = false;
        assert!(
            queue.finish_in_flight(|| waited = true).await.is_empty(),
            "nothing in flight before a poll"
        );
        assert!(!waited);
        queue.push(result_write("r1"));
        queue.push(result_write("r2"));
        queue.start_next();
        let written = queue.finish_in_flight(|| waited = true).await;
        assert!(waited && queue.is_empty());
        let ids: Vec<(&str, bool)> = (written.iter())
            .map(|(write, seq)| (write.call.id.as_str(), seq.is_ok()))
            .collect();
        assert_eq!(ids, [("r1", true), ("r2", true)]);
    }
}
