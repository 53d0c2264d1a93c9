//! Admission as a type (contract §1, §3.3): the only way to hand calls to the runner is an [`Admission`], and the only
//! way to get one is a successful fragment commit. The central invariant — no call starts before the fragment that
//! owns it is durable — is held by the compiler, here, instead of by the order of statements in the driver.

use headstart_core::{AssistantMessage, ToolCall};
use headstart_store::{AdmittedCall, SessionId, StoreError, TranscriptStore};

/// Calls whose owning fragment is durably committed, with their `admitted` rows. Private fields: only
/// [`commit_fragment`] makes one.
#[derive(Debug)]
pub(crate) struct Admission {
    calls: Vec<ToolCall>,
}

impl Admission {
    /// The admitted calls, in source order.
    pub fn into_calls(self) -> Vec<ToolCall> {
        self.calls
    }

    /// No call was admitted with the fragment.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }
}

/// Writes `fragment` and the `admitted` rows of `calls` in one transaction, each with its seal time as
/// `sealed_at_us` knows it; on success, the fragment's sequence number and the admission of its calls.
pub(crate) async fn commit_fragment(
    store: &dyn TranscriptStore,
    session: &SessionId,
    request: u32,
    fragment: &AssistantMessage,
    calls: Vec<ToolCall>,
    sealed_at_us: impl Fn(&ToolCall) -> Option<i64>,
    at_us: i64,
) -> Result<(u64, Admission), StoreError> {
    let records: Vec<AdmittedCall> = calls
        .iter()
        .map(|call| AdmittedCall {
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            sealed_at_us: sealed_at_us(call),
        })
        .collect();
    let seq = store
        .commit_fragment(session, request, fragment, &records, at_us)
        .await?;
    Ok((seq, Admission { calls }))
}
