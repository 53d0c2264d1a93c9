//! A store operation in words, as every backend names it in its errors.

use std::fmt;

use crate::layer::Write;
use crate::lease::{Lease, SessionEnd};
use crate::types::SessionId;
use crate::StoreError;

/// A store operation, named in its errors ("commit a fragment of request 0 to session …"): every backend describes
/// an operation the same way.
#[derive(Debug, Clone, Copy)]
pub enum Op<'a> {
    /// A write of [`TranscriptStore`](crate::TranscriptStore).
    Write(Write<'a>),
    /// [`TranscriptStore::sessions`](crate::TranscriptStore::sessions).
    Sessions,
    /// [`TranscriptStore::load_log`](crate::TranscriptStore::load_log) (after message 0) and
    /// [`TranscriptStore::load_log_after`](crate::TranscriptStore::load_log_after).
    LoadLog(&'a SessionId, u64),
    /// [`TranscriptStore::tool_runs`](crate::TranscriptStore::tool_runs) (from request 0) and
    /// [`TranscriptStore::tool_runs_from`](crate::TranscriptStore::tool_runs_from).
    ToolRuns(&'a SessionId, u32),
    /// [`TranscriptStore::unfinished_calls`](crate::TranscriptStore::unfinished_calls).
    UnfinishedCalls(&'a SessionId),
    /// [`SessionQueue::submit`](crate::SessionQueue::submit).
    Submit,
    /// [`SessionQueue::claim`](crate::SessionQueue::claim) by this worker.
    Claim(&'a str),
    /// [`SessionQueue::take_over`](crate::SessionQueue::take_over) of this session by this owner.
    TakeOver(&'a SessionId, &'a str),
    /// [`SessionQueue::renew`](crate::SessionQueue::renew).
    Renew(&'a [Lease]),
    /// [`SessionQueue::finish`](crate::SessionQueue::finish).
    Finish(&'a Lease, &'a SessionEnd),
}

impl fmt::Display for Op<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Write(Write::CreateSession) => f.write_str("create a session"),
            Op::Write(Write::AppendUser { session }) => write!(f, "append a user message to session {session}"),
            Op::Write(Write::CommitFragment { session, request, .. }) => {
                write!(f, "commit a fragment of request {request} to session {session}")
            }
            Op::Write(Write::MarkStarted { session, call }) => {
                write!(f, "mark call {call} of session {session} started")
            }
            Op::Write(Write::AppendToolResult {
                session,
                request,
                result,
            }) => {
                write!(
                    f,
                    "append the result of call {} (request {request}) to session {session}",
                    result.tool_call_id
                )
            }
            Op::Write(Write::AppendToolResults {
                session,
                request,
                results,
            }) => write!(
                f,
                "append {} results (request {request}) to session {session}",
                results.len()
            ),
            Op::Sessions => f.write_str("list sessions"),
            Op::LoadLog(session, 0) => write!(f, "load the log of session {session}"),
            Op::LoadLog(session, seq) => write!(f, "load the log of session {session} after message {seq}"),
            Op::ToolRuns(session, 0) => write!(f, "list the tool runs of session {session}"),
            Op::ToolRuns(session, request) => {
                write!(f, "list the tool runs of session {session} from request {request}")
            }
            Op::UnfinishedCalls(session) => write!(f, "list the unfinished calls of session {session}"),
            Op::Submit => f.write_str("submit a session"),
            Op::Claim(owner) => write!(f, "claim sessions for worker {owner}"),
            Op::TakeOver(session, owner) => write!(f, "take session {session} over for {owner}"),
            Op::Renew([lease]) => write!(
                f,
                "renew the lease of worker {} on session {}",
                lease.owner, lease.session
            ),
            Op::Renew(leases) => write!(f, "renew {} leases", leases.len()),
            Op::Finish(lease, end) => {
                let action = match end {
                    SessionEnd::Completed => "complete",
                    SessionEnd::Failed(_) => "fail",
                    SessionEnd::Released => "release",
                    SessionEnd::Retry { .. } => "release for a retry",
                };
                write!(
                    f,
                    "{action} session {} (worker {}, epoch {})",
                    lease.session, lease.owner, lease.epoch
                )
            }
        }
    }
}

/// The error for a write through a handle opened for reading only; `label` names the store.
pub fn read_only(label: &str, what: &str) -> StoreError {
    StoreError::ReadOnly(format!("{label}: cannot {what}: the store was opened read-only").into())
}
