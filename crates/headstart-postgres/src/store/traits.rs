//! [`TranscriptStore`] and [`SessionQueue`] on the PostgreSQL store: each method names its operation, encodes its
//! arguments on the caller's side and runs the operation of `ops.rs` in a transaction of its kind.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use headstart_core::model::{AssistantMessage, ToolResultMessage, UserMessage};
use headstart_store::backend::{self, encode_results, EncodedMessage, Op};
use headstart_store::{
    AdmittedCall, CallKey, Claim, Lease, NewResult, QueueName, RunEnd, SessionEnd, SessionId, SessionInfo,
    SessionQueue, SessionSettings, SessionState, SessionsPage, SessionsQuery, StoreError, StoredMessage, ToolRun,
    TranscriptStore, UnfinishedCall, WakeUps, Write,
};

use super::PgStore;
use crate::claims;
use crate::listing;
use crate::ops::{self, Access};

impl PgStore {
    /// Refuses to create sessions through a fenced handle (it writes only its leased session).
    fn unfenced(&self, what: &str) -> Result<(), StoreError> {
        match self.lease() {
            Some(lease) => Err(StoreError::Conflict(
                format!(
                    "{what}: this handle holds the lease on session {} and writes nothing else",
                    lease.session
                )
                .into(),
            )),
            None => Ok(()),
        }
    }

    /// Creates a session: `unqueued`, or `pending` with a prompt as its first message and its settings
    /// (`SessionQueue::submit_with`).
    async fn insert_session(
        &self,
        id: Option<&SessionId>,
        submitted: Option<(&UserMessage, &SessionSettings)>,
        at_us: i64,
    ) -> Result<SessionId, StoreError> {
        let (what, access) = match submitted {
            Some(_) => (Op::Submit.to_string(), Access::Write),
            None => (Op::Write(Write::CreateSession).to_string(), Access::WriteRelaxable),
        };
        self.unfenced(&what)?;
        let id = id.map_or_else(|| uuid::Uuid::now_v7().to_string(), |id| id.0.clone());
        let session = id.clone();
        let submitted = submitted
            .map(|(prompt, settings)| Ok::<_, StoreError>((EncodedMessage::user(prompt, &what)?, settings.clone())))
            .transpose()?;
        // A submitted session is announced to the workers waiting for one.
        let announcement = submitted
            .as_ref()
            .map(|(_, settings)| submitted_announcement(&id, settings.queue_name()));
        self.run_announcing(what, access, announcement, move |tx, what| {
            Box::pin(async move {
                let submitted = submitted.as_ref().map(|(prompt, settings)| (prompt, settings));
                ops::create_session(tx, what, &session, submitted, at_us).await
            })
        })
        .await?;
        Ok(SessionId(id))
    }
}

/// The payload announcing that `session` is now `state` ([`NOTIFY_CHANNEL`](crate::NOTIFY_CHANNEL)).
fn announcement(state: SessionState, session: &str) -> String {
    format!("{} {session}", state.as_str())
}

/// The payload announcing that `session` was submitted to `queue`: only the workers of that queue wake.
fn submitted_announcement(session: &str, queue: &str) -> String {
    format!("{} {session} {queue}", SessionState::Pending.as_str())
}

#[async_trait]
impl TranscriptStore for PgStore {
    async fn create_session(&self, at_us: i64) -> Result<SessionId, StoreError> {
        self.insert_session(None, None, at_us).await
    }

    async fn create_session_with_id(&self, session: &SessionId, at_us: i64) -> Result<(), StoreError> {
        self.insert_session(Some(session), None, at_us).await.map(drop)
    }

    async fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        self.run(Op::Sessions.to_string(), Access::Read, |tx, what| {
            Box::pin(listing::sessions(tx, what))
        })
        .await
    }

    async fn sessions_page(&self, query: &SessionsQuery) -> Result<SessionsPage, StoreError> {
        let query = *query;
        self.run(Op::Sessions.to_string(), Access::Read, move |tx, what| {
            Box::pin(listing::sessions_page(tx, what, query))
        })
        .await
    }

    async fn session(&self, session: &SessionId) -> Result<Option<SessionInfo>, StoreError> {
        let session = session.0.clone();
        self.run(Op::Sessions.to_string(), Access::Read, move |tx, what| {
            Box::pin(listing::session(tx, what, session))
        })
        .await
    }

    async fn append_user(&self, session: &SessionId, message: &UserMessage, at_us: i64) -> Result<u64, StoreError> {
        let what = Op::Write(Write::AppendUser { session }).to_string();
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let message = EncodedMessage::user(message, &what)?;
        self.run(what, Access::WriteRelaxable, move |tx, what| {
            Box::pin(async move { ops::append_user(tx, what, fence.as_deref(), &session, &message, at_us).await })
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
        // contract §7.5: a commit that admits calls is never relaxed below `synchronous_commit = on`.
        let access = if admitted.is_empty() {
            Access::WriteRelaxable
        } else {
            Access::Write
        };
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let invalid = backend::check_admissions(&what, fragment, admitted).err();
        let fragment = EncodedMessage::assistant(fragment, &what)?;
        let admitted = admitted.to_vec();
        self.run(what, access, move |tx, what| {
            Box::pin(async move {
                ops::commit_fragment(
                    tx,
                    what,
                    fence.as_deref(),
                    &session,
                    request,
                    &fragment,
                    &admitted,
                    invalid,
                    at_us,
                )
                .await
            })
        })
        .await
    }

    async fn mark_started(&self, session: &SessionId, call: &CallKey, at_us: i64) -> Result<(), StoreError> {
        let what = Op::Write(Write::MarkStarted { session, call }).to_string();
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let call = call.clone();
        self.run(what, Access::WriteRelaxable, move |tx, what| {
            Box::pin(async move { ops::mark_started(tx, what, fence.as_deref(), &session, &call, at_us).await })
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
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let call = CallKey::new(request, &*result.tool_call_id);
        let result = EncodedMessage::tool_result(result, &what)?;
        self.run(what, Access::WriteRelaxable, move |tx, what| {
            Box::pin(async move {
                ops::append_tool_result(tx, what, fence.as_deref(), &session, &call, &result, run, at_us).await
            })
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
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let encoded = encode_results(request, results, &what)?;
        // One transaction: all of the results or none.
        self.run(what, Access::WriteRelaxable, move |tx, what| {
            Box::pin(async move {
                let mut seqs = Vec::with_capacity(encoded.len());
                for (call, result, run) in &encoded {
                    let seq = ops::append_tool_result(tx, what, fence.as_deref(), &session, call, result, *run, at_us);
                    seqs.push(seq.await?);
                }
                Ok(seqs)
            })
        })
        .await
    }

    async fn load_log_after(&self, session: &SessionId, seq: u64) -> Result<Vec<StoredMessage>, StoreError> {
        let what = Op::LoadLog(session, seq).to_string();
        let session = session.0.clone();
        let after = i64::try_from(seq).unwrap_or(i64::MAX);
        self.run(what, Access::Read, move |tx, what| {
            Box::pin(async move { ops::load_log(tx, what, &session, after).await })
        })
        .await
    }

    async fn tool_runs_from(&self, session: &SessionId, request: u32) -> Result<Vec<ToolRun>, StoreError> {
        let what = Op::ToolRuns(session, request).to_string();
        let session = session.0.clone();
        self.run(what, Access::Read, move |tx, what| {
            Box::pin(async move { ops::tool_runs(tx, what, &session, i64::from(request)).await })
        })
        .await
    }

    async fn unfinished_calls(&self, session: &SessionId) -> Result<Vec<UnfinishedCall>, StoreError> {
        let what = Op::UnfinishedCalls(session).to_string();
        let session = session.0.clone();
        self.run(what, Access::Read, move |tx, what| {
            Box::pin(async move { ops::unfinished_calls(tx, what, &session).await })
        })
        .await
    }
}

#[async_trait]
impl SessionQueue for PgStore {
    async fn submit_with(
        &self,
        prompt: &UserMessage,
        settings: &SessionSettings,
        at_us: i64,
    ) -> Result<SessionId, StoreError> {
        self.insert_session(None, Some((prompt, settings)), at_us).await
    }

    async fn claim_from(
        &self,
        owner: &str,
        queues: &[QueueName],
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<Claim>, StoreError> {
        backend::check_owner(owner)?;
        if limit == 0 || queues.is_empty() {
            return Ok(Vec::new());
        }
        let what = Op::Claim(owner).to_string();
        let owner = owner.to_owned();
        let queues: Vec<String> = queues.iter().map(|queue| queue.as_str().to_owned()).collect();
        let sent = Instant::now();
        self.run(what, Access::Write, move |tx, what| {
            Box::pin(async move { claims::claim(tx, what, &owner, &queues, lease, limit, sent).await })
        })
        .await
    }

    async fn take_over(&self, session: &SessionId, owner: &str, lease: Duration) -> Result<Claim, StoreError> {
        backend::check_owner(owner)?;
        let what = Op::TakeOver(session, owner).to_string();
        let (session, owner) = (session.clone(), owner.to_owned());
        let sent = Instant::now();
        self.run(what, Access::Write, move |tx, what| {
            Box::pin(async move { claims::take_over(tx, what, &session, &owner, lease, sent).await })
        })
        .await
    }

    async fn renew(&self, leases: &[Lease], lease: Duration) -> Result<Vec<Lease>, StoreError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let what = Op::Renew(leases).to_string();
        let leases = leases.to_vec();
        let sent = Instant::now();
        self.run(what, Access::Write, move |tx, what| {
            Box::pin(async move { claims::renew(tx, what, &leases, lease, sent).await })
        })
        .await
    }

    async fn finish(&self, lease: &Lease, end: SessionEnd) -> Result<(), StoreError> {
        let what = Op::Finish(lease, &end).to_string();
        // A retried session is not claimable before its backoff: waking workers for it now would claim nothing.
        let announcement = match &end {
            SessionEnd::Retry { .. } => None,
            end => Some(announcement(backend::end_state(end).state, &lease.session.0)),
        };
        let lease = lease.clone();
        self.run_announcing(what, Access::Write, announcement, move |tx, what| {
            Box::pin(async move { claims::finish(tx, what, &lease, &end).await })
        })
        .await
    }

    fn fenced(&self, lease: &Lease) -> Arc<dyn TranscriptStore> {
        Arc::new(PgStore::fenced(self, lease))
    }

    /// A new listening connection per call, closed when the stream is dropped (see `listener.rs`). `None` when
    /// [`PgOptions::listen`](crate::PgOptions::listen) is off, for a read-only store, or outside a tokio runtime.
    fn wake_ups(&self, queues: &[QueueName]) -> Option<WakeUps> {
        self.inner.listener.as_ref().and_then(|listener| listener.spawn(queues))
    }
}
