//! Behaviour around a store's writes, added without re-implementing the store (tower's idea of a layer).
//!
//! A [`WriteLayer`] sees every write as a [`Write`] description and the future that performs it, and returns the
//! future to run instead: it can trace a commit after it became durable, fail a write before it happens (fault
//! injection), or count writes in flight. [`Layered`] applies a layer to any [`TranscriptStore`]; reads pass
//! straight through.

use std::sync::Arc;

use async_trait::async_trait;
use headstart_core::model::{AssistantMessage, Message, ToolResultMessage, UserMessage};

use crate::types::{
    AdmittedCall, CallKey, NewResult, RunEnd, SessionId, SessionInfo, StoredMessage, ToolRun, UnfinishedCall,
};
use crate::{SessionsPage, SessionsQuery, StoreError, TranscriptStore};

/// A write about to be performed.
#[derive(Debug, Clone, Copy)]
pub enum Write<'a> {
    /// [`TranscriptStore::create_session`].
    CreateSession,
    /// [`TranscriptStore::append_user`].
    AppendUser {
        /// The session.
        session: &'a SessionId,
    },
    /// [`TranscriptStore::commit_fragment`].
    CommitFragment {
        /// The session.
        session: &'a SessionId,
        /// The model request.
        request: u32,
        /// The fragment.
        fragment: &'a AssistantMessage,
        /// The calls admitted with it.
        admitted: &'a [AdmittedCall],
    },
    /// [`TranscriptStore::mark_started`].
    MarkStarted {
        /// The session.
        session: &'a SessionId,
        /// The call.
        call: &'a CallKey,
    },
    /// [`TranscriptStore::append_tool_result`].
    AppendToolResult {
        /// The session.
        session: &'a SessionId,
        /// The model request whose response holds the call.
        request: u32,
        /// The result.
        result: &'a ToolResultMessage,
    },
    /// [`TranscriptStore::append_tool_results`].
    AppendToolResults {
        /// The session.
        session: &'a SessionId,
        /// The model request whose response holds the calls.
        request: u32,
        /// The results, in order.
        results: &'a [NewResult],
    },
}

/// A write in progress, resolving to what the write returns.
pub type WriteFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// What a write returns, as a layer may look at it.
pub trait Written: Send {
    /// The sequence number of the message written, for writes that append one.
    fn seq(&self) -> Option<u64>;
}

impl Written for u64 {
    fn seq(&self) -> Option<u64> {
        Some(*self)
    }
}

/// The last of the messages written.
impl Written for Vec<u64> {
    fn seq(&self) -> Option<u64> {
        self.last().copied()
    }
}

impl Written for () {
    fn seq(&self) -> Option<u64> {
        None
    }
}

impl Written for SessionId {
    fn seq(&self) -> Option<u64> {
        None
    }
}

/// Behaviour around every write of a store.
pub trait WriteLayer: Send + Sync {
    /// Returns the future to run for `write`; `next` performs the write itself. Returning `next` unchanged adds
    /// nothing.
    fn around<'a, T: Written + 'a>(&'a self, write: Write<'a>, next: WriteFuture<'a, T>) -> WriteFuture<'a, T>;
}

/// A store with a [`WriteLayer`] around its writes.
pub struct Layered<L> {
    inner: Arc<dyn TranscriptStore>,
    layer: L,
}

impl<L> Layered<L> {
    /// Applies `layer` to `inner`.
    pub fn new(inner: Arc<dyn TranscriptStore>, layer: L) -> Self {
        Layered { inner, layer }
    }

    /// The layer.
    pub fn layer(&self) -> &L {
        &self.layer
    }

    /// The wrapped store.
    pub fn inner(&self) -> &Arc<dyn TranscriptStore> {
        &self.inner
    }
}

#[async_trait]
impl<L: WriteLayer> TranscriptStore for Layered<L> {
    async fn create_session(&self, at_us: i64) -> Result<SessionId, StoreError> {
        self.layer
            .around(Write::CreateSession, self.inner.create_session(at_us))
            .await
    }

    async fn create_session_with_id(&self, session: &SessionId, at_us: i64) -> Result<(), StoreError> {
        let next = self.inner.create_session_with_id(session, at_us);
        self.layer
            .around(Write::CreateSession, Box::pin(async move { next.await.map(|()| 0) }))
            .await
            .map(|_| ())
    }

    async fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        self.inner.sessions().await
    }

    async fn sessions_page(&self, query: &SessionsQuery) -> Result<SessionsPage, StoreError> {
        self.inner.sessions_page(query).await
    }

    async fn session(&self, session: &SessionId) -> Result<Option<SessionInfo>, StoreError> {
        self.inner.session(session).await
    }

    async fn append_user(&self, session: &SessionId, message: &UserMessage, at_us: i64) -> Result<u64, StoreError> {
        let write = Write::AppendUser { session };
        self.layer
            .around(write, self.inner.append_user(session, message, at_us))
            .await
    }

    async fn commit_fragment(
        &self,
        session: &SessionId,
        request: u32,
        fragment: &AssistantMessage,
        admitted: &[AdmittedCall],
        at_us: i64,
    ) -> Result<u64, StoreError> {
        let write = Write::CommitFragment {
            session,
            request,
            fragment,
            admitted,
        };
        let next = self.inner.commit_fragment(session, request, fragment, admitted, at_us);
        self.layer.around(write, next).await
    }

    async fn mark_started(&self, session: &SessionId, call: &CallKey, at_us: i64) -> Result<(), StoreError> {
        let write = Write::MarkStarted { session, call };
        let next = self.inner.mark_started(session, call, at_us);
        self.layer
            .around(write, Box::pin(async move { next.await.map(|()| 0) }))
            .await
            .map(|_| ())
    }

    async fn append_tool_result(
        &self,
        session: &SessionId,
        request: u32,
        result: &ToolResultMessage,
        run: Option<RunEnd>,
        at_us: i64,
    ) -> Result<u64, StoreError> {
        let write = Write::AppendToolResult {
            session,
            request,
            result,
        };
        let next = self.inner.append_tool_result(session, request, result, run, at_us);
        self.layer.around(write, next).await
    }

    async fn append_tool_results(
        &self,
        session: &SessionId,
        request: u32,
        results: &[NewResult],
        at_us: i64,
    ) -> Result<Vec<u64>, StoreError> {
        let write = Write::AppendToolResults {
            session,
            request,
            results,
        };
        let next = self.inner.append_tool_results(session, request, results, at_us);
        self.layer.around(write, next).await
    }

    async fn load_log_after(&self, session: &SessionId, seq: u64) -> Result<Vec<StoredMessage>, StoreError> {
        self.inner.load_log_after(session, seq).await
    }

    async fn tool_runs_from(&self, session: &SessionId, request: u32) -> Result<Vec<ToolRun>, StoreError> {
        self.inner.tool_runs_from(session, request).await
    }

    async fn unfinished_calls(&self, session: &SessionId) -> Result<Vec<UnfinishedCall>, StoreError> {
        self.inner.unfinished_calls(session).await
    }

    async fn model_context(&self, session: &SessionId) -> Result<Vec<Message>, StoreError> {
        self.inner.model_context(session).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::SqliteStore;

    /// Fails the second fragment commit and counts the writes that reached the store.
    #[derive(Default)]
    struct FailSecondCommit {
        commits: AtomicUsize,
        writes: AtomicUsize,
    }

    impl WriteLayer for FailSecondCommit {
        fn around<'a, T: Written + 'a>(&'a self, write: Write<'a>, next: WriteFuture<'a, T>) -> WriteFuture<'a, T> {
            if matches!(write, Write::CommitFragment { .. }) && self.commits.fetch_add(1, Ordering::SeqCst) == 1 {
                return Box::pin(async { Err(StoreError::Full("injected".into())) });
            }
            Box::pin(async move {
                let written = next.await;
                self.writes.fetch_add(1, Ordering::SeqCst);
                written
            })
        }
    }

    fn fragment(text: &str) -> AssistantMessage {
        AssistantMessage {
            turn_id: "t".into(),
            stop_reason: headstart_core::StopReason::Stop,
            content: vec![headstart_core::ContentBlock::text(text)],
            usage: headstart_core::Usage::default(),
            model: None,
            error_message: None,
        }
    }

    #[tokio::test]
    async fn a_layer_sees_writes_and_can_fail_one_without_it_reaching_the_store() {
        let inner: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().unwrap());
        let store = Layered::new(Arc::clone(&inner), FailSecondCommit::default());
        let session = store.create_session(0).await.unwrap();
        store.append_user(&session, &UserMessage::new("go"), 1).await.unwrap();
        assert_eq!(
            store
                .commit_fragment(&session, 0, &fragment("a"), &[], 2)
                .await
                .unwrap(),
            2
        );
        let failed = store.commit_fragment(&session, 0, &fragment("b"), &[], 3).await;
        assert_eq!(failed, Err(StoreError::Full("injected".into())));
        assert_eq!(
            store
                .commit_fragment(&session, 0, &fragment("c"), &[], 4)
                .await
                .unwrap(),
            3
        );
        // The session, the prompt and two commits: the failed commit never reached the store.
        assert_eq!(store.layer().writes.load(Ordering::SeqCst), 4);
        let log = inner.load_log(&session).await.unwrap();
        assert_eq!(log.len(), 3, "the failed commit wrote nothing");
    }
}
