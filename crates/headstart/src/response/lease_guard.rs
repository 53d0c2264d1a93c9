//! What the engine does for a worker of a fleet (contract §7.5): every call's [`ToolContext`] carries the call's
//! stable idempotency key, and, when the engine runs a leased session, no call's `execute` starts once the lease
//! may have expired (§7.5.4).
//!
//! Single-process use configures no [`LeaseGuard`](crate::LeaseGuard) and nothing changes for it.

use std::sync::Arc;

use headstart_store::{idempotency_key, CallKey, RunOutcome, SessionId};
use tokio_util::sync::CancellationToken;

use crate::lease::LeaseGuard;
use crate::response::execute::Executed;
use crate::tools::tool::ToolContext;
use crate::tools::updates::UpdateSink;

/// The reason given to a call the engine did not start because the lease may have expired (contract §7.5.4): its
/// result reads `cancelled before start: <this>`, like every call that could not start (§5.5).
pub const LEASE_MAY_HAVE_EXPIRED: &str = "the worker's lease on this session may have expired";

/// One session's gate in front of `execute`: builds each call's context and refuses to start calls once the
/// lease may have expired. The one place both the live path and recovery ask.
#[derive(Clone)]
pub(crate) struct CallGate {
    session: SessionId,
    /// The model request whose calls pass this gate: with the call id, a call's identity (contract §7.2.2).
    request: u32,
    guard: Option<Arc<dyn LeaseGuard>>,
}

impl CallGate {
    pub fn new(session: SessionId, request: u32, guard: Option<Arc<dyn LeaseGuard>>) -> Self {
        CallGate {
            session,
            request,
            guard,
        }
    }

    /// The context of call `call_id` of this gate's request.
    pub fn context(&self, call_id: &str, cancel: CancellationToken, updates: UpdateSink) -> ToolContext {
        ToolContext {
            call_id: call_id.to_owned(),
            session_id: Some(self.session.clone()),
            idempotency_key: idempotency_key(&self.session, &CallKey::new(self.request, call_id)),
            cancel,
            updates,
        }
    }

    /// `Some(result)` when the call must not start: the lease may have expired.
    pub fn refusal(&self) -> Option<Executed> {
        let expired = self.guard.as_ref().is_some_and(|guard| guard.may_have_expired());
        expired.then(|| {
            Executed::error(
                RunOutcome::Skipped,
                format!("cancelled before start: {LEASE_MAY_HAVE_EXPIRED}"),
            )
        })
    }
}
