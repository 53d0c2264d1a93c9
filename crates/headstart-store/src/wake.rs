//! Wake-ups ([`SessionQueue::wake_ups`](crate::SessionQueue::wake_ups)): how a queue tells a waiting worker that a
//! session may be ready to claim, so that it claims at once instead of at its next poll.
//!
//! A wake-up is only a hint. A worker claims on one, and still polls at its interval: a wake-up that never comes (a
//! dropped connection, a notification sent while nobody listened) costs at most one poll interval, never a session.
//!
//! The channel coalesces: however many wake-ups arrive between two looks, the receiver sees at most one
//! [`WakeUp::Work`], so a burst of submits costs one claim, not one per submit. Changes of the listener's state are
//! kept, coalesced to what the receiver must know: that wake-ups were lost ([`WakeUp::Lost`]) and that they came
//! back ([`WakeUp::Listening`]), in that order.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use futures_core::Stream;
use tokio::task::AbortHandle;

/// What a [`WakeUps`] stream says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WakeUp {
    /// A session became claimable (it was submitted, or released back to the queue) since the last look.
    Work,
    /// The listener listens (again): whatever was sent before was missed, so look for work once now.
    Listening,
    /// The listener lost its connection, or could not open it, with this reason. No wake-up comes until the next
    /// [`WakeUp::Listening`]; it reconnects on its own.
    Lost(String),
}

/// What has not been looked at yet, coalesced.
#[derive(Debug, Default)]
struct Pending {
    work: bool,
    listening: bool,
    lost: Option<String>,
    /// The receiver was dropped: posting is pointless.
    closed: bool,
    waker: Option<Waker>,
}

impl Pending {
    /// The next wake-up to hand over: a loss first, then the return that followed it, then work.
    fn take(&mut self) -> Option<WakeUp> {
        if let Some(reason) = self.lost.take() {
            return Some(WakeUp::Lost(reason));
        }
        if std::mem::take(&mut self.listening) {
            return Some(WakeUp::Listening);
        }
        std::mem::take(&mut self.work).then_some(WakeUp::Work)
    }

    fn post(&mut self, wake_up: WakeUp) {
        match wake_up {
            WakeUp::Work => self.work = true,
            WakeUp::Listening => self.listening = true,
            // A loss after a return not yet seen cancels it: the receiver must end up knowing the listener is down.
            WakeUp::Lost(reason) => {
                self.listening = false;
                self.lost = Some(reason);
            }
        }
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }
}

type Shared = Arc<Mutex<Pending>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Pending> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A new wake-up channel: the queue keeps the sender, the worker receives.
pub fn channel() -> (WakeSender, WakeUps) {
    let shared = Shared::default();
    (
        WakeSender {
            shared: Arc::clone(&shared),
        },
        WakeUps { shared, task: None },
    )
}

/// The sending end of a wake-up channel, kept by the queue (or its listener).
#[derive(Debug)]
pub struct WakeSender {
    shared: Shared,
}

impl WakeSender {
    /// Posts `wake_up` (coalesced with what the receiver has not taken yet).
    pub fn post(&self, wake_up: WakeUp) {
        lock(&self.shared).post(wake_up);
    }

    /// Whether the receiver was dropped.
    pub fn is_closed(&self) -> bool {
        lock(&self.shared).closed
    }
}

impl Drop for WakeSender {
    /// Nothing wakes the receiver any more: it is told wake-ups are lost, so its owner knows it is polling only.
    fn drop(&mut self) {
        let mut pending = lock(&self.shared);
        if !pending.closed {
            pending.post(WakeUp::Lost("the wake-up listener stopped".to_owned()));
        }
    }
}

/// A worker's wake-ups: a [`Stream`] of [`WakeUp`]s that never ends by itself. Dropping it stops what feeds it (a
/// listener's task and its connection).
#[derive(Debug)]
pub struct WakeUps {
    shared: Shared,
    /// The task that feeds the channel, stopped when the receiver goes.
    task: Option<AbortHandle>,
}

impl WakeUps {
    /// Stops `task` (the listener feeding this channel) when this receiver is dropped.
    pub fn stopping_on_drop(mut self, task: AbortHandle) -> Self {
        self.task = Some(task);
        self
    }

    /// The next wake-up if one is waiting, without waiting: a worker takes what a burst left before it claims, so
    /// that the claim answers all of it.
    pub fn try_next(&mut self) -> Option<WakeUp> {
        lock(&self.shared).take()
    }
}

impl Stream for WakeUps {
    type Item = WakeUp;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<WakeUp>> {
        let mut pending = lock(&self.shared);
        match pending.take() {
            Some(wake_up) => Poll::Ready(Some(wake_up)),
            None => {
                pending.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for WakeUps {
    fn drop(&mut self) {
        lock(&self.shared).closed = true;
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Every receiver of one store object's in-process wake-ups (the SQLite store: workers in this process that share
/// the store object hear of its submits and releases; other processes poll).
#[derive(Debug, Default)]
pub(crate) struct Subscribers {
    senders: Mutex<Vec<WakeSender>>,
}

impl Subscribers {
    /// A new receiver.
    pub(crate) fn subscribe(&self) -> WakeUps {
        let (sender, receiver) = channel();
        self.senders.lock().unwrap_or_else(PoisonError::into_inner).push(sender);
        receiver
    }

    /// Tells every receiver still there that a session became claimable; forgets the ones dropped.
    pub(crate) fn work(&self) {
        let mut senders = self.senders.lock().unwrap_or_else(PoisonError::into_inner);
        senders.retain(|sender| !sender.is_closed());
        for sender in senders.iter() {
            sender.post(WakeUp::Work);
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;

    use super::*;

    #[test]
    fn a_burst_of_work_is_one_wake_up() {
        let (sender, mut receiver) = channel();
        for _ in 0..200 {
            sender.post(WakeUp::Work);
        }
        assert_eq!(receiver.try_next(), Some(WakeUp::Work));
        assert_eq!(receiver.try_next(), None, "200 posts, one wake-up");
        sender.post(WakeUp::Work);
        assert_eq!(receiver.try_next(), Some(WakeUp::Work), "a post after the look is seen");
    }

    #[test]
    fn a_loss_comes_before_the_return_and_the_work_after_it() {
        let (sender, mut receiver) = channel();
        sender.post(WakeUp::Work);
        sender.post(WakeUp::Lost("killed".to_owned()));
        sender.post(WakeUp::Listening);
        let seen: Vec<WakeUp> = std::iter::from_fn(|| receiver.try_next()).collect();
        assert_eq!(
            seen,
            [WakeUp::Lost("killed".to_owned()), WakeUp::Listening, WakeUp::Work]
        );
    }

    #[test]
    fn a_loss_after_an_unseen_return_leaves_the_listener_down() {
        let (sender, mut receiver) = channel();
        sender.post(WakeUp::Lost("first".to_owned()));
        sender.post(WakeUp::Listening);
        sender.post(WakeUp::Lost("second".to_owned()));
        let seen: Vec<WakeUp> = std::iter::from_fn(|| receiver.try_next()).collect();
        assert_eq!(
            seen,
            [WakeUp::Lost("second".to_owned())],
            "down, with the latest reason"
        );
    }

    #[test]
    fn a_dropped_sender_says_wake_ups_are_lost_and_a_dropped_receiver_closes_the_sender() {
        let (sender, mut receiver) = channel();
        drop(sender);
        assert!(matches!(receiver.try_next(), Some(WakeUp::Lost(_))));
        let (sender, receiver) = channel();
        assert!(!sender.is_closed());
        drop(receiver);
        assert!(sender.is_closed());
    }

    #[tokio::test]
    async fn the_stream_waits_for_a_post() {
        let (sender, mut receiver) = channel();
        let waiting = tokio::spawn(async move { receiver.next().await });
        tokio::task::yield_now().await;
        sender.post(WakeUp::Work);
        assert_eq!(waiting.await.expect("task"), Some(WakeUp::Work));
    }

    #[test]
    fn subscribers_hear_of_work_until_they_leave() {
        let subscribers = Subscribers::default();
        let mut first = subscribers.subscribe();
        let second = subscribers.subscribe();
        drop(second);
        subscribers.work();
        assert_eq!(first.try_next(), Some(WakeUp::Work));
        assert_eq!(
            subscribers.senders.lock().expect("not poisoned").len(),
            1,
            "the dropped one is forgotten"
        );
    }
}
