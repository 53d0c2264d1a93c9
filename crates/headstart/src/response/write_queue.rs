//! The result-write queue of one response: results are written one at a time, in the order they settled, so the
//! transcript's order is the order results settled, whatever the threads do (contract §6.5).

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::FutureExt;
use headstart_core::{ToolCall, ToolResultMessage};
use headstart_store::{RunEnd, SessionId, StoreError, TranscriptStore};

use crate::clock::Clock;

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

/// The write in flight.
pub(crate) type InFlight = (ResultWrite, BoxFuture<'static, Result<u64, StoreError>>);

/// Results waiting to be written, and the one write in flight.
pub(crate) struct WriteQueue {
    store: Arc<dyn TranscriptStore>,
    session: SessionId,
    request: u32,
    clock: Arc<dyn Clock>,
    waiting: VecDeque<ResultWrite>,
    in_flight: Option<InFlight>,
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
        }
    }

    /// Queues a result; it is written after every result queued before it.
    pub fn push(&mut self, write: ResultWrite) {
        self.waiting.push_back(write);
    }

    /// `true` when nothing is queued or in flight.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.in_flight.is_none()
    }

    /// Starts the next queued write if none is in flight.
    fn start_next(&mut self) {
        if self.in_flight.is_some() {
            return;
        }
        let Some(write) = self.waiting.pop_front() else {
            return;
        };
        let store = Arc::clone(&self.store);
        let session = self.session.clone();
        let result = write.result.clone();
        let run = write.run;
        let at_us = self.clock.now_us();
        let request = self.request;
        let future = async move { store.append_tool_result(&session, request, &result, run, at_us).await }.boxed();
        self.in_flight = Some((write, future));
    }

    /// Polls the write in flight (starting the next one first if none is).
    pub fn poll_written(&mut self, cx: &mut Context<'_>) -> Poll<Written> {
        self.start_next();
        let Some((_, future)) = &mut self.in_flight else {
            return Poll::Pending;
        };
        let Poll::Ready(written) = future.as_mut().poll(cx) else {
            return Poll::Pending;
        };
        match self.in_flight.take() {
            Some((write, _)) => Poll::Ready((write, written)),
            None => Poll::Pending,
        }
    }

    /// The write in flight, if any, for a caller that must wait for it before writing something else.
    pub fn take_in_flight(&mut self) -> Option<InFlight> {
        self.in_flight.take()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use headstart_store::{SqliteStore, TranscriptStore};

    use super::*;
    use crate::clock::TokioClock;
    use crate::response::fixture::result_write;

    #[tokio::test]
    async fn results_are_written_one_at_a_time_in_the_order_they_were_queued() {
        let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().expect("store"));
        let session = store.create_session(0).await.expect("session");
        let mut queue = WriteQueue::new(
            Arc::clone(&store),
            session.clone(),
            0,
            Arc::new(TokioClock::starting_now()),
        );
        assert!(queue.is_empty());
        for id in ["c1", "c2", "c3"] {
            queue.push(result_write(id));
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
        let log = store.load_log(&session).await.expect("log");
        let texts: Vec<String> = log
            .iter()
            .filter_map(|stored| match &stored.message {
                headstart_core::Message::ToolResult(result) => Some(result.text()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, ["result of c1", "result of c2", "result of c3"]);
    }

    #[tokio::test]
    async fn a_write_taken_in_flight_is_left_to_its_taker() {
        let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().expect("store"));
        let session = store.create_session(0).await.expect("session");
        let mut queue = WriteQueue::new(store, session, 0, Arc::new(TokioClock::starting_now()));
        assert!(queue.take_in_flight().is_none(), "nothing in flight before a poll");
        queue.push(result_write("c1"));
        queue.start_next();
        let (write, future) = queue.take_in_flight().expect("c1 is in flight");
        assert!(queue.is_empty());
        assert_eq!(write.call.id, "c1");
        assert!(future.await.is_ok());
    }
}
