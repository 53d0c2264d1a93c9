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
