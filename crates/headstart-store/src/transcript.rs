//! The transcript store's trait: what every backend does, in transcript terms.

use async_trait::async_trait;
use headstart_core::model::{AssistantMessage, Message, ToolResultMessage, UserMessage};

use crate::listing::{SessionsPage, SessionsQuery};
use crate::types::{
    AdmittedCall, CallKey, NewResult, RunEnd, SessionId, SessionInfo, StoredMessage, ToolRun, UnfinishedCall,
};
use crate::StoreError;

/// Durable storage of transcripts (contract §7).
///
/// Times are microseconds on the caller's clock (`at_us`): the engine passes wall-clock time since the Unix epoch
/// in production and virtual time in replays, so the store never reads a clock itself.
#[async_trait]
pub trait TranscriptStore: Send + Sync {
    /// Creates a new, empty session and returns its id.
    async fn create_session(&self, at_us: i64) -> Result<SessionId, StoreError>;

    /// Creates a new, empty session under the caller's id: for a runtime that names sessions itself (a Restate
    /// Virtual Object's key). An id already taken is refused ([`StoreError::Conflict`]) and nothing is written.
    async fn create_session_with_id(&self, session: &SessionId, at_us: i64) -> Result<(), StoreError>;

    /// Lists the stored sessions, oldest first.
    async fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError>;

    /// One page of the listing, newest first, filtered by state, with the number of matching sessions: a viewer
    /// of a store with many sessions reads one page, not every session. The default selects from
    /// [`sessions`](Self::sessions); the database backends page in SQL.
    async fn sessions_page(&self, query: &SessionsQuery) -> Result<SessionsPage, StoreError> {
        Ok(query.select(self.sessions().await?))
    }

    /// The listing's entry of one session, `None` when there is no such session. The default searches
    /// [`sessions`](Self::sessions); the database backends read the one row.
    async fn session(&self, session: &SessionId) -> Result<Option<SessionInfo>, StoreError> {
        Ok(self.sessions().await?.into_iter().find(|info| &info.id == session))
    }

    /// Appends a user prompt; returns its sequence number.
    async fn append_user(&self, session: &SessionId, message: &UserMessage, at_us: i64) -> Result<u64, StoreError>;

    /// Writes an assistant fragment of model request `request` together with the `admitted` run records of
    /// `admitted` (a subset of the fragment's calls, in admission order), in one transaction. Returns the
    /// fragment's sequence number once it is durable. On error nothing was written.
    async fn commit_fragment(
        &self,
        session: &SessionId,
        request: u32,
        fragment: &AssistantMessage,
        admitted: &[AdmittedCall],
        at_us: i64,
    ) -> Result<u64, StoreError>;

    /// Records that an admitted call's `execute` began (`admitted → started`). A no-op for a run that already
    /// ended, so a late write can never move a run backwards.
    async fn mark_started(&self, session: &SessionId, call: &CallKey, at_us: i64) -> Result<(), StoreError>;

    /// Appends a tool result for the call `result.tool_call_id` of request `request` (the call's [`CallKey`]) and,
    /// when `run` is given, ends the call's run record with it, in one transaction. Calls that were never admitted
    /// ("not executed", contract §3.5) have no run and pass `None`.
    async fn append_tool_result(
        &self,
        session: &SessionId,
        request: u32,
        result: &ToolResultMessage,
        run: Option<RunEnd>,
        at_us: i64,
    ) -> Result<u64, StoreError>;

    /// Appends several results of request `request`, in order, each as
    /// [`append_tool_result`](Self::append_tool_result) would, in one transaction: all of them or, on error, none.
    /// Returns their sequence numbers. The engine writes a response's refused calls this way (thousands of them
    /// when a model floods the call cap), not one transaction each. The default writes them one at a time (not
    /// atomic); the SQLite and PostgreSQL stores use one transaction.
    async fn append_tool_results(
        &self,
        session: &SessionId,
        request: u32,
        results: &[NewResult],
        at_us: i64,
    ) -> Result<Vec<u64>, StoreError> {
        let mut seqs = Vec::with_capacity(results.len());
        for new in results {
            seqs.push(
                self.append_tool_result(session, request, &new.result, new.run, at_us)
                    .await?,
            );
        }
        Ok(seqs)
    }

    /// The session's durable log, in write order.
    async fn load_log(&self, session: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        self.load_log_after(session, 0).await
    }

    /// The session's messages after sequence number `seq`, in write order: what a reader that has read the log up to
    /// `seq` has not seen yet (sequence numbers are per session, from 1, without gaps). The agent loop reads this
    /// before each request, so its cost follows what changed, not the history.
    async fn load_log_after(&self, session: &SessionId, seq: u64) -> Result<Vec<StoredMessage>, StoreError>;

    /// The session's tool runs, in admission order.
    async fn tool_runs(&self, session: &SessionId) -> Result<Vec<ToolRun>, StoreError> {
        self.tool_runs_from(session, 0).await
    }

    /// The session's tool runs of requests `request` and later, in admission order: the runs [`tool_runs`]
    /// returns, read from a range of the run key, so a reader of the last response's runs pays for those, not for
    /// the session's history.
    ///
    /// [`tool_runs`]: TranscriptStore::tool_runs
    async fn tool_runs_from(&self, session: &SessionId, request: u32) -> Result<Vec<ToolRun>, StoreError>;

    /// Calls admitted but without a result (contract §7.4), in admission order.
    async fn unfinished_calls(&self, session: &SessionId) -> Result<Vec<UnfinishedCall>, StoreError>;

    /// The canonical model context for the next request (contract §7.3): each result follows the call of its own
    /// request, so a call id repeated by later responses is paired with the right result.
    async fn model_context(&self, session: &SessionId) -> Result<Vec<Message>, StoreError> {
        let log = self.load_log(session).await?;
        Ok(headstart_core::context::model_context_by_request(
            log.iter().map(|stored| (stored.request, &stored.message)),
        ))
    }
}
