//! [`TranscriptStore`] and [`SessionQueue`] on the SQLite store: each method names its operation, refuses a write
//! through a read-only handle, encodes its arguments on the caller's side and hands the operation of `ops.rs` to
//! the connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use headstart_core::model::{AssistantMessage, ToolResultMessage, UserMessage};

use super::{claims, listing, ops, SqliteStore};
use crate::backend::{self, encode_results, EncodedMessage, Op};
use crate::layer::Write;
use crate::lease::{Claim, Lease, SessionEnd, SessionQueue};
use crate::types::{
    AdmittedCall, CallKey, NewResult, RunEnd, SessionId, SessionInfo, SessionSettings, StoredMessage, ToolRun,
    UnfinishedCall,
};
use crate::wake::WakeUps;
use crate::{QueueName, SessionsPage, SessionsQuery, StoreError, TranscriptStore};

impl SqliteStore {
    /// Creates a session: `unqueued`, or `pending` with a prompt as its first message and its settings
    /// (`SessionQueue::submit_with`).
    async fn insert_session(
        &self,
        id: Option<&SessionId>,
        submitted: Option<(&UserMessage, &SessionSettings)>,
        at_us: i64,
    ) -> Result<SessionId, StoreError> {
        let what = match submitted {
            Some(_) => Op::Submit.to_string(),
            None => Op::Write(Write::CreateSession).to_string(),
        };
        self.writable(&what)?;
        if let Some(lease) = self.lease() {
            return Err(StoreError::Conflict(
                format!(
                    "{what}: this handle holds the lease on session {} and writes nothing else",
                    lease.session
                )
                .into(),
            ));
        }
        let id = id.map_or_else(|| uuid::Uuid::now_v7().to_string(), |id| id.0.clone());
        let session = id.clone();
        let submitted = submitted
            .map(|(prompt, settings)| Ok::<_, StoreError>((EncodedMessage::user(prompt, &what)?, settings.clone())))
            .transpose()?;
        self.write(what, move |conn, what| {
            let submitted = submitted.as_ref().map(|(prompt, settings)| (prompt, settings));
            ops::create_session(conn, what, &session, submitted, at_us)
        })
        .await?;
        Ok(SessionId(id))
    }
}

#[async_trait]
impl TranscriptStore for SqliteStore {
    async fn create_session(&self, at_us: i64) -> Result<SessionId, StoreError> {
        self.insert_session(None, None, at_us).await
    }

    async fn create_session_with_id(&self, session: &SessionId, at_us: i64) -> Result<(), StoreError> {
        self.insert_session(Some(session), None, at_us).await.map(drop)
    }

    async fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        self.run(listing::sessions).await
    }

    async fn sessions_page(&self, query: &SessionsQuery) -> Result<SessionsPage, StoreError> {
        let query = *query;
        self.run(move |conn| listing::sessions_page(conn, &query)).await
    }

    async fn session(&self, session: &SessionId) -> Result<Option<SessionInfo>, StoreError> {
        let session = session.0.clone();
        self.run(move |conn| listing::session(conn, &session)).await
    }

    async fn append_user(&self, session: &SessionId, message: &UserMessage, at_us: i64) -> Result<u64, StoreError> {
        let what = Op::Write(Write::AppendUser { session }).to_string();
        self.writable(&what)?;
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let message = EncodedMessage::user(message, &what)?;
        self.write(what, move |conn, what| {
            ops::append_user(conn, what, fence.as_deref(), &session, &message, at_us)
        })
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
        let what = Op::Write(Write::CommitFragment {
            session,
            request,
            fragment,
            admitted,
        })
        .to_string();
        self.writable(&what)?;
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let invalid = backend::check_admissions(&what, fragment, admitted).err();
        let fragment = EncodedMessage::assistant(fragment, &what)?;
        let admitted = admitted.to_vec();
        self.write(what, move |conn, what| {
            ops::commit_fragment(
                conn,
                what,
                fence.as_deref(),
                &session,
                request,
                &fragment,
                &admitted,
                invalid.as_ref(),
                at_us,
            )
        })
        .await
    }

    async fn mark_started(&self, session: &SessionId, call: &CallKey, at_us: i64) -> Result<(), StoreError> {
        let what = Op::Write(Write::MarkStarted { session, call }).to_string();
        self.writable(&what)?;
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let call = call.clone();
        self.write(what, move |conn, what| {
            ops::mark_started(conn, what, fence.as_deref(), &session, &call, at_us)
        })
        .await
    }

    async fn append_tool_result(
        &self,
        session: &SessionId,
        request: u32,
        result: &ToolResultMessage,
        run: Option<RunEnd>,
        at_us: i64,
    ) -> Result<u64, StoreError> {
        let what = Op::Write(Write::AppendToolResult {
            session,
            request,
            result,
        })
        .to_string();
        self.writable(&what)?;
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let call = CallKey::new(request, &*result.tool_call_id);
        let result = EncodedMessage::tool_result(result, &what)?;
        self.write(what, move |conn, what| {
            ops::append_tool_result(conn, what, fence.as_deref(), &session, &call, &result, run, at_us)
        })
        .await
    }

    async fn append_tool_results(
        &self,
        session: &SessionId,
        request: u32,
        results: &[NewResult],
        at_us: i64,
    ) -> Result<Vec<u64>, StoreError> {
        let what = Op::Write(Write::AppendToolResults {
            session,
            request,
            results,
        })
        .to_string();
        self.writable(&what)?;
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let encoded = encode_results(request, results, &what)?;
        // One job, so one transaction (the job's savepoint inside a group): all of the results or none.
        self.write(what, move |conn, what| {
            (encoded.iter())
                .map(|(call, result, run)| {
                    ops::append_tool_result(conn, what, fence.as_deref(), &session, call, result, *run, at_us)
                })
                .collect()
        })
        .await
    }

    async fn load_log_after(&self, session: &SessionId, seq: u64) -> Result<Vec<StoredMessage>, StoreError> {
        let session = session.clone();
        self.run(move |conn| ops::load_log(conn, &session, seq)).await
    }

    async fn tool_runs_from(&self, session: &SessionId, request: u32) -> Result<Vec<ToolRun>, StoreError> {
        let session = session.clone();
        self.run(move |conn| ops::tool_runs(conn, &session, request)).await
    }

    async fn unfinished_calls(&self, session: &SessionId) -> Result<Vec<UnfinishedCall>, StoreError> {
        let session = session.clone();
        self.run(move |conn| ops::unfinished_calls(conn, &session)).await
    }
}

#[async_trait]
impl SessionQueue for SqliteStore {
    async fn submit_with(
        &self,
        prompt: &UserMessage,
        settings: &SessionSettings,
        at_us: i64,
    ) -> Result<SessionId, StoreError> {
        let session = self.insert_session(None, Some((prompt, settings)), at_us).await?;
        self.inner.wake.work();
        Ok(session)
    }

    async fn claim_from(
        &self,
        owner: &str,
        queues: &[QueueName],
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<Claim>, StoreError> {
        crate::backend::check_owner(owner)?;
        let what = Op::Claim(owner).to_string();
        self.writable(&what)?;
        if limit == 0 || queues.is_empty() {
            return Ok(Vec::new());
        }
        let sent = Instant::now();
        let owner = owner.to_owned();
        let queues = queues.to_vec();
        self.write(what, move |conn, what| {
            claims::claim(conn, what, &owner, &queues, lease, limit, sent)
        })
        .await
    }

    async fn take_over(&self, session: &SessionId, owner: &str, lease: Duration) -> Result<Claim, StoreError> {
        crate::backend::check_owner(owner)?;
        let what = Op::TakeOver(session, owner).to_string();
        self.writable(&what)?;
        let sent = Instant::now();
        let (session, owner) = (session.clone(), owner.to_owned());
        self.write(what, move |conn, what| {
            claims::take_over(conn, what, &session, &owner, lease, sent)
        })
        .await
    }

    async fn renew(&self, leases: &[Lease], lease: Duration) -> Result<Vec<Lease>, StoreError> {
        let what = Op::Renew(leases).to_string();
        self.writable(&what)?;
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let sent = Instant::now();
        let leases = leases.to_vec();
        self.write(what, move |conn, what| claims::renew(conn, what, &leases, lease, sent))
            .await
    }

    async fn finish(&self, lease: &Lease, end: SessionEnd) -> Result<(), StoreError> {
        let what = Op::Finish(lease, &end).to_string();
        self.writable(&what)?;
        let lease = lease.clone();
        // A retried session is not claimable before its backoff: waking anyone for it now would claim nothing.
        let released = end == SessionEnd::Released;
        self.write(what, move |conn, what| claims::finish(conn, what, &lease, &end))
            .await?;
        if released {
            self.inner.wake.work();
        }
        Ok(())
    }

    fn fenced(&self, lease: &Lease) -> Arc<dyn TranscriptStore> {
        Arc::new(SqliteStore::fenced(self, lease))
    }

    /// In-process only: the submits and releases made through this store object (or its clones), once committed,
    /// whatever their queue (a worker whose queues have none claims nothing). `None` for a read-only handle, which
    /// never claims.
    fn wake_ups(&self, _queues: &[QueueName]) -> Option<WakeUps> {
        (!self.inner.read_only).then(|| self.inner.wake.subscribe())
    }
}
