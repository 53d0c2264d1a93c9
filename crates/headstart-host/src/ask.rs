//! What the engine asks a host ([`Ask`]), the [`Host`] trait a language package implements to reach its language,
//! and [`ask()`], the protocol around it: the answer awaited, the host told to abort when the work is cancelled, and
//! the work abandoned when the engine stops waiting (a timeout dropped the call).

use headstart::{Arguments, CancellationToken, ResultDraft, ToolCall, UpdateSink};
use serde_json::Value;
use tokio::sync::oneshot;

/// A tool call for the host to run.
#[derive(Debug, Clone)]
pub struct CallAsk {
    /// The tool's name (the host finds its function by it).
    pub tool: String,
    /// The call's id.
    pub call_id: String,
    /// The call's arguments, as the engine prepared them.
    pub arguments: Arguments,
    /// The session's id (`None` only outside an engine run).
    pub session_id: Option<String>,
    /// The call's idempotency key (contract §7.5).
    pub idempotency_key: String,
    /// Where the running call's partial results go.
    pub updates: UpdateSink,
}

/// What the engine asks a host for.
#[derive(Debug, Clone)]
pub enum Ask {
    /// Run a tool call.
    Call(CallAsk),
    /// Ask the `before_tool_call` hook about a call, with its prepared arguments.
    Before {
        /// The call.
        call: ToolCall,
        /// Its arguments, validated.
        arguments: Arguments,
    },
    /// Ask the `after_tool_call` hook about a call's result.
    After {
        /// The call.
        call: ToolCall,
        /// Its result as the hook may change it.
        result: ResultDraft,
    },
}

/// Why a host gave no answer the engine can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostFailure {
    /// The host's function raised (threw, or its promise rejected): its message.
    Raised(String),
    /// What the host's function gave cannot cross to the engine (a JavaScript symbol, a Python object JSON cannot
    /// hold): a description of it. The reader names what was expected.
    Unreadable(String),
    /// The host is gone (its process is exiting, no event loop watches it) or ended without an answer.
    Gone(String),
}

impl std::fmt::Display for HostFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostFailure::Raised(message) | HostFailure::Gone(message) => f.write_str(message),
            HostFailure::Unreadable(what) => write!(f, "an answer that cannot be read ({what})"),
        }
    }
}

/// What a host answers: the JSON value its function gave, or why there is none.
pub type HostAnswer = Result<Value, HostFailure>;

/// Where a host sends its one answer to an [`Ask`]; cheap to move to any thread.
#[derive(Debug)]
pub struct Reply(oneshot::Sender<HostAnswer>);

impl Reply {
    /// A reply, and the receiver of its answer.
    pub fn channel() -> (Reply, oneshot::Receiver<HostAnswer>) {
        let (sender, receiver) = oneshot::channel();
        (Reply(sender), receiver)
    }

    /// Sends the answer (ignored when the engine no longer waits for it).
    pub fn send(self, answer: HostAnswer) {
        let _ = self.0.send(answer);
    }
}

/// A host language, as a language package reaches it.
pub trait Host: Send + Sync + 'static {
    /// Starts `ask` on the host; the host answers through `reply`, once, from any thread. Returns the work's number
    /// (for [`abort`](Host::abort)); an error when the host is gone, and nothing was started.
    fn start(&self, ask: Ask, reply: Reply) -> Result<u64, HostFailure>;

    /// Asks the host to abort work `id` (a call's `AbortSignal` fires, its task is cancelled); its answer still
    /// comes, and is awaited.
    fn abort(&self, id: u64);

    /// The engine no longer waits for work `id` (a timeout dropped it): the host aborts it and may forget it; a
    /// later answer is ignored. By default, [`abort`](Host::abort).
    fn abandon(&self, id: u64) {
        self.abort(id);
    }
}

/// Aborts the host's work when the engine stops waiting for it, unless disarmed first.
struct AbandonOnDrop<'a> {
    host: &'a dyn Host,
    id: u64,
    armed: bool,
}

impl Drop for AbandonOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.host.abandon(self.id);
        }
    }
}

/// Asks `host` for `ask` and waits for its answer. When `cancel` fires, the host is told to abort the work and its
/// answer is still awaited (a cancelled call's result is what its tool made of the abort); dropping the returned
/// future abandons the work.
pub async fn ask(host: &dyn Host, ask: Ask, cancel: Option<&CancellationToken>) -> HostAnswer {
    let (reply, mut receiver) = Reply::channel();
    let id = host.start(ask, reply)?;
    let mut held = AbandonOnDrop { host, id, armed: true };
    let answer = match cancel {
        Some(cancel) => tokio::select! {
            answer = &mut receiver => answer,
            () = cancel.cancelled() => {
                host.abort(id);
                receiver.await
            }
        },
        None => receiver.await,
    };
    held.armed = false;
    answer.unwrap_or_else(|_| Err(HostFailure::Gone("the host ended without an answer".into())))
}
