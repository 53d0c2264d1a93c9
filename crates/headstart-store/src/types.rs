//! The store's record types, shared by every backend.

use std::fmt;

use headstart_core::model::{Message, ToolCall, ToolResultMessage};
use serde::{Deserialize, Serialize};

use crate::QueueName;

/// Identifies a session (a UUIDv7 string for sessions the store creates).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionId(pub String);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for SessionId {
    fn from(id: &str) -> Self {
        SessionId(id.to_owned())
    }
}

/// How durable a write is when the store returns (contract §7.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Flushed to stable storage on every commit: survives power loss. The default.
    #[default]
    Full,
    /// Survives a crash of the process, not necessarily of the machine.
    Normal,
}

/// A stored session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The session id.
    pub id: SessionId,
    /// When it was created (caller's clock, µs).
    pub created_at_us: i64,
    /// How many messages it holds.
    pub messages: u64,
    /// Where it stands in the work queue of a fleet (contract §7.5); [`SessionState::Unqueued`] for sessions made
    /// with [`TranscriptStore::create_session`](crate::TranscriptStore::create_session).
    pub state: SessionState,
    /// The worker that holds it (state `running`), finished it (`completed`, `failed`), or `None`.
    pub owner: Option<String>,
    /// How many times a worker claimed it: the fencing token of its current or last owner (0: never claimed).
    pub epoch: u64,
    /// When the current lease ends, on the database's clock (µs since the Unix epoch); only while `running`.
    pub lease_expires_at_us: Option<i64>,
    /// Why the session failed (state `failed`); for a session a worker released because its model's provider was
    /// down ([`SessionEnd::Retry`](crate::SessionEnd::Retry)), that last error, until the session completes.
    pub failure: Option<String>,
    /// What it was submitted with beyond its prompt ([`SessionQueue::submit_with`](crate::SessionQueue::submit_with)),
    /// its queue included.
    pub settings: SessionSettings,
    /// How many times a worker released it because its model's provider was down
    /// ([`SessionEnd::Retry`](crate::SessionEnd::Retry)).
    pub attempts: u32,
    /// While `pending` after such a release: no worker claims it before this instant, on the database's clock (µs
    /// since the Unix epoch).
    pub not_before_us: Option<i64>,
}

/// What a session was submitted with beyond its prompt (`headstart submit --system … --model … --queue …`): a
/// worker that runs it uses each one given instead of its own, and only a worker serving its queue claims it.
/// Stored with the session; every field `None` by default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionSettings {
    /// The system prompt, instead of the worker's.
    pub system: Option<String>,
    /// The model to ask, instead of the worker's.
    pub model: Option<String>,
    /// The queue it waits in; `None` is the default queue ([`QueueName::DEFAULT`]), and a store reads the default
    /// queue back as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueName>,
}

impl SessionSettings {
    /// Whether nothing is set: the worker's own settings apply, and the session waits in the default queue.
    pub fn is_empty(&self) -> bool {
        self.system.is_none() && self.model.is_none() && self.queue_name() == QueueName::DEFAULT
    }

    /// The name of the queue the session waits in.
    pub fn queue_name(&self) -> &str {
        self.queue.as_ref().map_or(QueueName::DEFAULT, QueueName::as_str)
    }

    /// The queue as stored settings hold it: `None` for the default one. For a store reading its column back.
    pub fn stored_queue(name: String) -> Result<Option<QueueName>, crate::QueueNameError> {
        let queue = QueueName::new(name)?;
        Ok((!queue.is_default()).then_some(queue))
    }
}

/// Where a session stands in the work queue of a fleet of workers (contract §7.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Not in the queue: made with [`TranscriptStore::create_session`](crate::TranscriptStore::create_session)
    /// and driven by the process that made it. Never claimed by a worker.
    Unqueued,
    /// Submitted ([`SessionQueue::submit`](crate::SessionQueue::submit)) or released, waiting for a worker.
    Pending,
    /// Held by a worker under a lease (which may have expired: then any worker may claim it).
    Running,
    /// Its worker finished its agent loop.
    Completed,
    /// Its worker gave up on it, with a reason.
    Failed,
}

impl SessionState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Unqueued => "unqueued",
            SessionState::Pending => "pending",
            SessionState::Running => "running",
            SessionState::Completed => "completed",
            SessionState::Failed => "failed",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "unqueued" => SessionState::Unqueued,
            "pending" => SessionState::Pending,
            "running" => SessionState::Running,
            "completed" => SessionState::Completed,
            "failed" => SessionState::Failed,
            _ => return None,
        })
    }
}

/// One message of the durable log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// Per-session sequence number, from 1, gapless.
    pub seq: u64,
    /// The 0-based model request it belongs to: for an assistant fragment the request that produced it, for a tool
    /// result the request whose response holds its call. `None` for user prompts, and for a result stored before
    /// schema version 3 (SQLite; 2 on PostgreSQL) whose call was never admitted (ids were unique per session then).
    pub request: Option<u32>,
    /// When it became durable (caller's clock, µs).
    pub at_us: i64,
    /// The message.
    pub message: Message,
}

/// Identifies a call within a session (contract §7.2.2): a call id is unique within its response, not within the
/// session (some providers number their calls `call_0`, `call_1`, … in every response), so the store names a call
/// by the model request whose response holds it together with its id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CallKey {
    /// The 0-based model request whose response holds the call.
    pub request: u32,
    /// The call id, exactly as the model sent it.
    pub call_id: String,
}

impl CallKey {
    /// The key of call `call_id` of request `request`.
    pub fn new(request: u32, call_id: impl Into<String>) -> Self {
        CallKey {
            request,
            call_id: call_id.into(),
        }
    }
}

impl fmt::Display for CallKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (request {})", self.call_id, self.request)
    }
}

/// A call admitted with a fragment commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmittedCall {
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub tool_name: String,
    /// When the call was sealed (µs, the engine's clock; contract §7.2): its arguments could no longer change.
    /// `None` when no seal time is known (a caller that does not track it).
    pub sealed_at_us: Option<i64>,
}

/// The state of a tool run (contract §7.2): `admitted → started → finished | cancelled | skipped`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Committed and handed to the scheduler; `execute` has not begun.
    Admitted,
    /// `execute` began.
    Started,
    /// The call ran and has its result.
    Finished,
    /// The call was running when it was cancelled; it has its result.
    Cancelled,
    /// The call never started (immediate outcome, or cancelled before start); it has its result.
    Skipped,
}

impl RunState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Admitted => "admitted",
            RunState::Started => "started",
            RunState::Finished => "finished",
            RunState::Cancelled => "cancelled",
            RunState::Skipped => "skipped",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "admitted" => RunState::Admitted,
            "started" => RunState::Started,
            "finished" => RunState::Finished,
            "cancelled" => RunState::Cancelled,
            "skipped" => RunState::Skipped,
            _ => return None,
        })
    }
}

/// How a call ended, in the report's vocabulary (`docs/scenario-format.md`, `tool_runs[].outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// Executed and returned a result.
    Finished,
    /// Executed and returned an error (or a finalize hook turned it into one).
    Error,
    /// Executed and panicked.
    Panicked,
    /// Was running when cancelled.
    Cancelled,
    /// Blocked by a `before_tool_call` hook (or the hook failed).
    Blocked,
    /// Arguments were not valid JSON or failed schema validation.
    Invalid,
    /// No tool of that name.
    NotFound,
    /// Ran past its timeout.
    TimedOut,
    /// Never started: cancelled before start.
    Skipped,
    /// The process stopped while the call was admitted or running; recovery gave it an error result (contract §7.4).
    Interrupted,
}

impl RunOutcome {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Finished => "finished",
            RunOutcome::Error => "error",
            RunOutcome::Panicked => "panicked",
            RunOutcome::Cancelled => "cancelled",
            RunOutcome::Blocked => "blocked",
            RunOutcome::Invalid => "invalid",
            RunOutcome::NotFound => "not_found",
            RunOutcome::TimedOut => "timed_out",
            RunOutcome::Skipped => "skipped",
            RunOutcome::Interrupted => "interrupted",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "finished" => RunOutcome::Finished,
            "error" => RunOutcome::Error,
            "panicked" => RunOutcome::Panicked,
            "cancelled" => RunOutcome::Cancelled,
            "blocked" => RunOutcome::Blocked,
            "invalid" => RunOutcome::Invalid,
            "not_found" => RunOutcome::NotFound,
            "timed_out" => RunOutcome::TimedOut,
            "skipped" => RunOutcome::Skipped,
            "interrupted" => RunOutcome::Interrupted,
            _ => return None,
        })
    }
}

/// How a run ends, written together with its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnd {
    /// The final state (`finished`, `cancelled` or `skipped`).
    pub state: RunState,
    /// The outcome.
    pub outcome: RunOutcome,
    /// When `execute` began, if it did. Written with the result so the record is complete even when the
    /// separate [`TranscriptStore::mark_started`](crate::TranscriptStore::mark_started) write (which the engine
    /// issues off the critical path) lands late or not at all; an existing `started_at_us` is kept.
    pub started_at_us: Option<i64>,
}

/// One result of [`TranscriptStore::append_tool_results`](crate::TranscriptStore::append_tool_results): the result,
/// and how it ends the call's run (`None` for a call never admitted), as
/// [`append_tool_result`](crate::TranscriptStore::append_tool_result) takes them.
#[derive(Debug, Clone, PartialEq)]
pub struct NewResult {
    /// The result; `tool_call_id` names the call.
    pub result: ToolResultMessage,
    /// How the call's run ends, if it has one.
    pub run: Option<RunEnd>,
}

/// A tool run record (contract §7.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRun {
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub tool_name: String,
    /// The 0-based model request whose response holds the call.
    pub request: u32,
    /// Sequence number of the fragment that owns the call.
    pub fragment_seq: u64,
    /// Current state.
    pub state: RunState,
    /// Outcome, once ended.
    pub outcome: Option<RunOutcome>,
    /// When the call was sealed (µs), as its admission recorded it; `None` when it was not recorded (a run written
    /// before the schema stored it, or admitted without a seal time).
    pub sealed_at_us: Option<i64>,
    /// When admitted (µs).
    pub admitted_at_us: i64,
    /// When `execute` began (µs), if it did.
    pub started_at_us: Option<i64>,
    /// When the result was written (µs), if it was.
    pub ended_at_us: Option<i64>,
    /// Sequence number of the result message, if written.
    pub result_seq: Option<u64>,
}

impl ToolRun {
    /// The call's identity in its session: its request and id.
    pub fn key(&self) -> CallKey {
        CallKey::new(self.request, self.call_id.clone())
    }
}

/// A call admitted but without a result (contract §7.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnfinishedCall {
    /// Its run record (state `admitted` or `started`).
    pub run: ToolRun,
    /// The call as stored in its owning fragment.
    pub call: ToolCall,
}
