//! A [`TranscriptStore`] decorator that counts writes and lets a benchmark wait until no write is in flight.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use headstart::core::{AssistantMessage, Message, ToolResultMessage, UserMessage};
use headstart::store::{
    AdmittedCall, RunEnd, SessionId, SessionInfo, StoreError, StoredMessage, ToolRun, TranscriptStore, UnfinishedCall,
};
use tokio::sync::Notify;

/// Wraps a store; counts its durable writes (every write method is one transaction) and tracks the writes in
/// flight, so a benchmark can measure one admission at a time without the engine's background writes (the
/// `started` mark, tool results) queueing in front of it.
pub struct InstrumentedStore {
    inner: Arc<dyn TranscriptStore>,
    writes: AtomicU64,
    in_flight: AtomicUsize,
    idle: Notify,
    fragment_commits: Mutex<Vec<Duration>>,
}

impl std::fmt::Debug for InstrumentedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstrumentedStore")
            .field("writes", &self.writes())
            .field("in_flight", &self.in_flight.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

/// Decrements the in-flight count when a write ends (or its future is dropped).
struct InFlight<'a>(&'a InstrumentedStore);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl InstrumentedStore {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn TranscriptStore>) -> Self {
        InstrumentedStore {
            inner,
            writes: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            idle: Notify::new(),
            fragment_commits: Mutex::new(Vec::new()),
        }
    }

    /// Durable writes completed successfully so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// How long each successful `commit_fragment` took, as its caller awaited it (hand-off to the blocking pool,
    /// the transaction and the way back), since the last call; clears the list.
    pub fn take_fragment_commit_times(&self) -> Vec<Duration> {
        self.fragment_commits
            .lock()
            .map(|mut times| std::mem::take(&mut *times))
            .unwrap_or_default()
    }

    /// Waits until no write is in flight. Yields first, so that tasks the engine has just spawned (its `started`
    /// marks) get to issue their writes before the check.
    pub async fn wait_idle(&self) {
        loop {
            tokio::task::yield_now().await;
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.in_flight.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
                if self.in_flight.load(Ordering::SeqCst) == 0 {
                    return;
                }
                continue;
            }
            notified.await;
        }
    }

    async fn write<T>(&self, write: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let _guard = InFlight(self);
        let result = write.await;
        if result.is_ok() {
            self.writes.fetch_add(1, Ordering::SeqCst);
        }
        result
    }
}

#[async_trait]
impl TranscriptStore for InstrumentedStore {
    async fn create_session(&self, at_us: i64) -> Result<SessionId, StoreError> {
        self.write(self.inner.create_session(at_us)).await
    }

    async fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        self.inner.sessions().await
    }

    async fn append_user(&self, session: &SessionId, message: &UserMessage, at_us: i64) -> Result<u64, StoreError> {
        self.write(self.inner.append_user(session, message, at_us)).await
    }

    async fn commit_fragment(
        &self,
        session: &SessionId,
        request: u32,
        fragment: &AssistantMessage,
        admitted: &[AdmittedCall],
        at_us: i64,
    ) -> Result<u64, StoreError> {
        let started = Instant::now();
        let written = self
            .write(self.inner.commit_fragment(session, request, fragment, admitted, at_us))
            .await;
        if written.is_ok() {
            if let Ok(mut times) = self.fragment_commits.lock() {
                times.push(started.elapsed());
            }
        }
        written
    }

    async fn mark_started(&self, session: &SessionId, call_id: &str, at_us: i64) -> Result<(), StoreError> {
        self.write(self.inner.mark_started(session, call_id, at_us)).await
    }

    async fn append_tool_result(
        &self,
        session: &SessionId,
        result: &ToolResultMessage,
        run: Option<RunEnd>,
        at_us: i64,
    ) -> Result<u64, StoreError> {
        self.write(self.inner.append_tool_result(session, result, run, at_us))
            .await
    }

    async fn load_log(&self, session: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        self.inner.load_log(session).await
    }

    async fn tool_runs(&self, session: &SessionId) -> Result<Vec<ToolRun>, StoreError> {
        self.inner.tool_runs(session).await
    }

    async fn unfinished_calls(&self, session: &SessionId) -> Result<Vec<UnfinishedCall>, StoreError> {
        self.inner.unfinished_calls(session).await
    }

    async fn model_context(&self, session: &SessionId) -> Result<Vec<Message>, StoreError> {
        self.inner.model_context(session).await
    }
}
