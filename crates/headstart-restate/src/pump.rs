//! The journal pump's engine side: a store layer and a tool layer that hand the engine's durable steps to the
//! invocation that owns the Restate context, and wait for its answer.
//!
//! The engine runs unchanged on a task of its own. Only the invocation may touch the context (one operation at a
//! time, in its own task), so the two layers send it [`Ask`]s:
//! - [`JournalLayer`] asks for the seal's journal entry before every fragment commit, and lets the commit reach the
//!   store only once the entry is acknowledged; the engine admits the fragment's calls after both.
//! - [`RestateCalls`] turns a call's `execute` into a durable call to the `Tools` service, issued by the
//!   invocation, and waits for its outcome.

use async_trait::async_trait;
use headstart::layer::ToolMiddleware;
use headstart::store::{StoreError, Write, WriteFuture, WriteLayer, Written};
use headstart::{Arguments, BodyEnd, Tool, ToolContext, ToolError, ToolResult};
use tokio::sync::{mpsc, oneshot};

use crate::journal::{CallSpec, Seal};

/// What the engine's side asks of the invocation.
#[derive(Debug)]
pub(crate) enum Ask {
    /// Journal this seal; answer once the entry is acknowledged (`false`: the journal refused it).
    Seal(Seal, oneshot::Sender<bool>),
    /// Journal the call and issue it to `Tools`; answer with its outcome.
    Call(CallSpec, oneshot::Sender<BodyEnd>),
}

/// The store layer of the pump: a fragment commit is durable in the journal, then in the store, before it returns.
pub(crate) struct JournalLayer {
    pub(crate) asks: mpsc::Sender<Ask>,
}

/// What a commit returns when the invocation is gone: this attempt no longer owns the session (Restate retries the
/// invocation elsewhere), so the engine stops without retrying, as a fenced fleet worker does.
fn gone(what: &str) -> StoreError {
    StoreError::Fenced(format!(
        "{what}: the Restate invocation that owned this session ended (its attempt was aborted or replaced)"
    ))
}

impl WriteLayer for JournalLayer {
    fn around<'a, T: Written + 'a>(&'a self, write: Write<'a>, next: WriteFuture<'a, T>) -> WriteFuture<'a, T> {
        let Write::CommitFragment {
            request,
            fragment,
            admitted,
            ..
        } = write
        else {
            return Box::pin(async move { counted(next.await) });
        };
        // The journal first: an attempt Restate has replaced can no longer write it, so a stale deployment's
        // commit stops here, before the store. A crash between the two leaves the seal in the journal only; no call
        // of it was admitted, and the replay's recovery works from the store.
        let seal = Seal {
            request,
            fragment: fragment.clone(),
            admitted: admitted.iter().map(|call| call.call_id.clone()).collect(),
        };
        Box::pin(async move {
            let (reply, acknowledged) = oneshot::channel();
            if self.asks.send(Ask::Seal(seal, reply)).await.is_err() {
                crate::metrics::stale_write_refused("journal");
                return Err(gone("commit a fragment"));
            }
            match acknowledged.await {
                Ok(true) => counted(next.await),
                _ => {
                    crate::metrics::stale_write_refused("journal");
                    Err(gone("journal a seal"))
                }
            }
        })
    }
}

/// `written`, counted when the store's fence refused it (a later attempt holds the session).
fn counted<T>(written: Result<T, StoreError>) -> Result<T, StoreError> {
    if let Err(StoreError::Fenced(_)) = &written {
        crate::metrics::stale_write_refused("store");
    }
    written
}

/// The tool layer of the pump: the body runs in the `Tools` service, reached by a durable call the invocation
/// issues. The layered tool keeps its name, schema and flags, so the engine schedules it as before.
pub(crate) struct RestateCalls {
    pub(crate) asks: mpsc::Sender<Ask>,
}

#[async_trait]
impl ToolMiddleware for RestateCalls {
    async fn execute(&self, next: &dyn Tool, arguments: Arguments, context: ToolContext) -> ToolResult {
        let spec = CallSpec {
            session: context.session_id.map(|session| session.0).unwrap_or_default(),
            call_id: context.call_id,
            tool: next.spec().name.clone(),
            arguments,
            idempotency_key: context.idempotency_key,
            // The invocation fills it in from the seal it journaled.
            sealed_at_us: None,
        };
        let (reply, outcome) = oneshot::channel();
        let gone = || ToolError::new("the Restate invocation that owned this call ended before its result came back");
        self.asks.send(Ask::Call(spec, reply)).await.map_err(|_| gone())?;
        outcome.await.map_err(|_| gone())?.into_result()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use headstart::core::model::{AssistantMessage, ContentBlock, StopReason, Usage};
    use headstart::store::{Layered, SessionQueue, StoreError};
    use headstart::{SessionId, SqliteStore, TranscriptStore};
    use tokio::sync::mpsc;

    use super::{Ask, JournalLayer};

    /// The one stale write the journal cannot stop: an attempt whose seal was acknowledged just before Restate
    /// replaced it, and whose commit reaches the store after the next attempt took the session over. The store's
    /// fence refuses it, and nothing is written.
    #[tokio::test]
    async fn a_seal_acknowledged_before_a_take_over_is_refused_by_the_store() {
        let store = Arc::new(SqliteStore::open_in_memory().expect("a store"));
        let session = SessionId("0193-zombie".to_owned());
        store.create_session_with_id(&session, 1).await.expect("create");
        let held = Duration::from_secs(3600);
        let first = store
            .take_over(&session, "attempt 1", held)
            .await
            .expect("take over")
            .lease;
        let (asks, mut asked) = mpsc::channel(4);
        let zombie = Layered::new(SessionQueue::fenced(store.as_ref(), &first), JournalLayer { asks });
        // Its journal acknowledges every seal: the entry was written before the abort.
        tokio::spawn(async move {
            while let Some(ask) = asked.recv().await {
                if let Ask::Seal(_, reply) = ask {
                    let _ = reply.send(true);
                }
            }
        });
        store
            .take_over(&session, "attempt 2", held)
            .await
            .expect("the next attempt");
        let fragment = AssistantMessage {
            turn_id: "r1".to_owned(),
            stop_reason: StopReason::Stop,
            content: vec![ContentBlock::text("late")],
            usage: Usage::default(),
            model: None,
            error_message: None,
        };
        let refused = zombie
            .commit_fragment(&session, 0, &fragment, &[], 2)
            .await
            .expect_err("the store fences the stale commit");
        assert!(matches!(refused, StoreError::Fenced(_)), "{refused:?}");
        assert!(
            store.load_log(&session).await.expect("log").is_empty(),
            "nothing was written"
        );
    }
}
