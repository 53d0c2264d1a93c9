//! The queue between the engine's task and its consumer (contract §6): the engine pushes events as it produces them and
//! never waits for the consumer; the consumer takes them in order at its own pace.
//!
//! One lock guards the queue. Both sides move events in batches (the engine flushes what one step produced, the
//! consumer swaps the whole queue out when its local buffer runs dry), so a delta costs two short critical
//! sections per batch, not per event. What the queue holds is bounded by the response's own limits (§2): one event
//! per accepted delta, plus the tool events; partial updates of a call are coalesced when the consumer lags (a newer
//! update replaces an undelivered older one, so the last is always delivered).

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use futures::Stream;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use crate::events::event::AgentEvent;

/// An agent event with the engine's clock reading when the engine emitted it.
#[derive(Debug, Clone)]
pub struct Emitted {
    /// When the engine emitted the event ([`Clock::now_us`](crate::Clock::now_us)), whenever it was taken.
    pub at_us: i64,
    /// The event.
    pub event: AgentEvent,
}

/// What the queue holds. Each batch is led by the time the engine handed it over: one clock reading per batch, not
/// a stamp on every event, so a text delta costs nothing but its event.
pub(crate) enum Entry {
    /// The engine's clock when it handed over the events that follow.
    Stamp(i64),
    Event(AgentEvent),
    /// An update superseded by a newer one of the same call (coalescing).
    Superseded,
}

/// Entries in order, as the engine hands them over and the consumer takes them.
pub(crate) type Entries = VecDeque<Entry>;

/// The queue's contents and both sides' flags, under its lock.
#[derive(Default)]
struct QueueState {
    /// Undelivered entries.
    entries: Entries,
    /// Position of `entries[0]` in the run's entries.
    head: u64,
    /// Per call id, the position of its undelivered update, if any.
    pending_update: HashMap<String, u64>,
    consumer: Option<Waker>,
    /// The engine pushes nothing more.
    closed: bool,
    /// The consumer is gone: pushes are dropped.
    abandoned: bool,
}

/// The queue itself, shared by the engine's [`EventSink`] and the consumer's [`EventStream`].
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // A panic while holding this lock cannot leave the queue half-updated in a way that matters (every
        // critical section is a few plain pushes and pops), so a poisoned lock is used as is.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The engine's end of the queue.
#[derive(Clone)]
pub(crate) struct EventSink {
    queue: Arc<Queue>,
}

impl EventSink {
    /// Appends a batch (leaving `batch` empty) and wakes the consumer. Never waits. When the consumer has taken
    /// everything, the batch's storage is handed over whole instead of moved entry by entry. `tool_events` says
    /// whether the batch holds a tool call's event: only then can an update be coalesced.
    pub(crate) fn push_batch(&self, batch: &mut Entries, tool_events: bool) {
        let waker = {
            let mut state = self.queue.lock();
            if state.abandoned {
                batch.clear();
                return;
            }
            if tool_events {
                state.note_updates(batch);
            }
            if state.entries.is_empty() {
                std::mem::swap(&mut state.entries, batch);
            } else {
                state.entries.append(batch);
            }
            state.consumer.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// No more events: the consumer's stream ends once it has taken what is queued.
    pub fn close(&self) {
        let waker = {
            let mut state = self.queue.lock();
            state.closed = true;
            state.consumer.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl QueueState {
    /// Coalesces updates: a call's update that the consumer has not taken yet (queued, or earlier in `batch`) is
    /// superseded by a newer one of the same call; any other event of the call closes that window.
    fn note_updates(&mut self, batch: &mut Entries) {
        let base = self.head + self.entries.len() as u64;
        for position in 0..batch.len() {
            let at = base + position as u64;
            let older = match &batch[position] {
                Entry::Event(AgentEvent::ToolExecutionUpdate { tool_call_id, .. }) => {
                    self.pending_update.insert(tool_call_id.clone(), at)
                }
                Entry::Event(other) => {
                    if let Some(id) = other.tool_call_id() {
                        self.pending_update.remove(id);
                    }
                    None
                }
                Entry::Stamp(_) | Entry::Superseded => None,
            };
            let Some(older) = older else { continue };
            let slot = if older >= base {
                usize::try_from(older - base).ok().and_then(|i| batch.get_mut(i))
            } else {
                usize::try_from(older - self.head)
                    .ok()
                    .and_then(|i| self.entries.get_mut(i))
            };
            if let Some(slot) = slot {
                *slot = Entry::Superseded;
            }
        }
    }

    /// Hands everything queued to the consumer, whose empty buffer (with its capacity) takes the queue's place.
    fn take_all(&mut self, into: &mut Entries) {
        self.head += self.entries.len() as u64;
        self.pending_update.clear();
        std::mem::swap(&mut self.entries, into);
    }
}

/// The events of one run or one wrapped response, as the engine emits them (contract §6).
///
/// The engine runs on its own task and never waits for this stream: the model stream is read, prefixes are
/// committed and calls start and finish whatever the consumer's pace; events queue here in order. Dropping the
/// stream before its end is cancellation by the caller (contract §6.7): the engine cancels running calls, gives every
/// admitted call its one stored result, and then ends its tasks; [`EventStream::settled`] waits for that.
#[must_use = "streams do nothing unless polled; dropping this one cancels the run"]
pub struct EventStream {
    queue: Arc<Queue>,
    /// Entries already taken out of the shared queue.
    local: Entries,
    /// The stamp of the batch the next event belongs to.
    at_us: i64,
    done: bool,
    tasks: TaskTracker,
    /// Cancels the run when the stream is dropped.
    _cancel_on_drop: DropGuard,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("buffered", &self.local.len())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl EventStream {
    /// A stream fed by the returned sink; `cancel` is cancelled when the stream is dropped; `tasks` tracks every
    /// task of the run.
    pub(crate) fn channel(cancel: CancellationToken, tasks: TaskTracker) -> (EventSink, EventStream) {
        let queue = Arc::new(Queue::default());
        let sink = EventSink {
            queue: Arc::clone(&queue),
        };
        let stream = EventStream {
            queue,
            local: VecDeque::new(),
            at_us: 0,
            done: false,
            tasks,
            _cancel_on_drop: cancel.drop_guard(),
        };
        (sink, stream)
    }

    /// The next event; `self.at_us` is then the time the engine emitted it. The per-event part is inlined (it
    /// runs once per event, across the crate boundary); taking a batch from the shared queue is not.
    #[inline]
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        loop {
            match self.local.pop_front() {
                Some(Entry::Event(event)) => return Poll::Ready(Some(event)),
                Some(Entry::Stamp(at_us)) => self.at_us = at_us,
                Some(Entry::Superseded) => {}
                None => match self.take_batch(cx) {
                    Poll::Ready(true) => {}
                    Poll::Ready(false) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                },
            }
        }
    }

    /// Takes everything queued into the local buffer: `Ready(true)` when something was taken, `Ready(false)` when
    /// the stream has ended, `Pending` (the consumer's waker registered) when the engine has nothing new yet.
    #[inline(never)]
    fn take_batch(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        if self.done {
            return Poll::Ready(false);
        }
        let mut state = self.queue.lock();
        if state.entries.is_empty() {
            if state.closed {
                self.done = true;
                return Poll::Ready(false);
            }
            state.consumer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        state.take_all(&mut self.local);
        Poll::Ready(true)
    }

    /// The next event with the time the engine emitted it (the report of a replay uses this time, not the time
    /// the event was taken).
    pub fn poll_next_emitted(&mut self, cx: &mut Context<'_>) -> Poll<Option<Emitted>> {
        self.poll_event(cx).map(|event| {
            event.map(|event| Emitted {
                at_us: self.at_us,
                event,
            })
        })
    }

    /// [`EventStream::poll_next_emitted`] as a future.
    pub async fn next_emitted(&mut self) -> Option<Emitted> {
        std::future::poll_fn(|cx| self.poll_next_emitted(cx)).await
    }

    /// A future that resolves once every task the engine started for this stream has ended: after the last
    /// event, or, when the stream was dropped early, once every admitted call has its stored result. Take it
    /// before dropping the stream.
    pub fn settled(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let tasks = self.tasks.clone();
        async move { tasks.wait().await }
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        // Nothing more is taken: later events are dropped instead of queued for nobody.
        let mut state = self.queue.lock();
        state.abandoned = true;
        state.entries.clear();
        state.pending_update.clear();
    }
}

impl Stream for EventStream {
    type Item = AgentEvent;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        self.get_mut().poll_event(cx)
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::tools::output::ToolOutput;

    fn update(call: &str, text: &str) -> AgentEvent {
        AgentEvent::ToolExecutionUpdate {
            tool_call_id: call.to_owned(),
            update: ToolOutput::text(text),
        }
    }

    fn end(call: &str) -> AgentEvent {
        AgentEvent::ToolExecutionEnd {
            tool_call_id: call.to_owned(),
            is_error: false,
            outcome: None,
        }
    }

    fn push(sink: &EventSink, events: Vec<AgentEvent>) {
        let mut batch: Entries = events.into_iter().map(Entry::Event).collect();
        sink.push_batch(&mut batch, true);
        assert!(batch.is_empty(), "a pushed batch is emptied");
    }

    /// What the consumer sees: update texts as `call:text`, other events by name.
    fn taken(stream: EventStream) -> Vec<String> {
        futures::executor::block_on(stream.collect::<Vec<_>>())
            .into_iter()
            .map(|event| match event {
                AgentEvent::ToolExecutionUpdate { tool_call_id, update } => {
                    let text = update
                        .content
                        .iter()
                        .filter_map(|block| block.as_text())
                        .collect::<String>();
                    format!("{tool_call_id}:{text}")
                }
                other => other.type_name().to_owned(),
            })
            .collect()
    }

    fn channel() -> (EventSink, EventStream) {
        EventStream::channel(CancellationToken::new(), TaskTracker::new())
    }

    #[test]
    fn a_lagging_consumer_gets_the_last_update_of_each_call_and_every_other_event() {
        let (sink, stream) = channel();
        push(&sink, vec![update("a", "1"), update("b", "1"), update("a", "2")]);
        push(&sink, vec![update("a", "3"), end("b"), update("b", "2")]);
        sink.close();
        assert_eq!(taken(stream), ["b:1", "a:3", "tool_execution_end", "b:2"]);
    }

    #[test]
    fn an_update_followed_by_another_event_of_its_call_is_never_replaced() {
        let (sink, stream) = channel();
        push(&sink, vec![update("a", "1"), end("a"), update("a", "2")]);
        sink.close();
        assert_eq!(taken(stream), ["a:1", "tool_execution_end", "a:2"]);
    }

    #[test]
    fn an_update_the_consumer_took_is_not_replaced() {
        let (sink, mut stream) = channel();
        push(&sink, vec![update("a", "1")]);
        let first = futures::executor::block_on(stream.next());
        assert!(matches!(first, Some(AgentEvent::ToolExecutionUpdate { .. })));
        push(&sink, vec![update("a", "2")]);
        sink.close();
        assert_eq!(taken(stream), ["a:2"]);
    }

    #[test]
    fn a_dropped_stream_cancels_the_run_and_takes_nothing_more() {
        let cancel = CancellationToken::new();
        let (sink, stream) = EventStream::channel(cancel.clone(), TaskTracker::new());
        drop(stream);
        assert!(
            cancel.is_cancelled(),
            "dropping the stream is cancellation by the caller"
        );
        push(&sink, vec![update("a", "1")]);
        assert!(sink.queue.lock().entries.is_empty(), "events for nobody are not queued");
    }
}
