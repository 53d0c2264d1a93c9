//! The `Tools` service: one invocation runs one call's body, on whichever deployment Restate sends it to.
//!
//! A durable call from a `Session` invocation starts it, so the call is in Restate's log before the body begins.
//! Restate may run an invocation again after a crash; a journaled `started` marker keeps a body to at most one run:
//! when the marker comes back from the journal instead of being written now, an earlier attempt may have run the
//! body, and the call ends interrupted (contract §7.4). Whether an interrupted idempotent call runs again is then the
//! session's recovery policy, not Restate's retry.
//!
//! The body's outcome is journaled as an entry of its own (`outcome`), and the handler returns what that entry holds.
//! An attempt that finds the entry in the journal returns the outcome an earlier attempt journaled, whatever the
//! marker says: the marker never contradicts a result the journal has. (Returning "interrupted" on a replayed marker
//! alone did, when an attempt died after its output was journaled and before the invocation ended: its replay
//! returned another value than the journal's, and Restate retried it forever with `[570 Journal mismatch]`, issue
//! 45.)

use std::sync::Arc;

use headstart::{BodyEnd, SessionId, ToolContext, ToolError};
use restate_sdk::prelude::*;

use crate::deployment::Deployment;
use crate::flagged::Ran;
use crate::journal::CallSpec;

/// The `Tools` service, bound to a deployment's tools.
pub struct Tools {
    pub(crate) deployment: Arc<Deployment>,
}

#[restate_sdk::service(name = "Tools")]
impl Tools {
    /// Runs one call's body at most once and returns its outcome.
    #[handler]
    async fn run_call(&self, ctx: Context<'_>, spec: Json<CallSpec>) -> HandlerResult<Json<BodyEnd>> {
        let spec = spec.into_inner();
        #[cfg(feature = "testing")]
        if crate::faults::named(crate::faults::Point::FailRunCall) {
            return Err(crate::faults::failure("run_call fails on purpose"));
        }
        let started = Ran::default();
        ctx.run(started.wrap(|| async {
            crate::metrics::journaled("started");
            Ok(())
        }))
        .name("started")
        .await?;
        let fresh = started.now();
        let deployment = Arc::clone(&self.deployment);
        let journaled = Ran::default();
        let outcome = ctx
            .run(journaled.wrap(move || async move {
                crate::metrics::journaled("outcome");
                Ok(Json(deployment.outcome(spec, fresh).await))
            }))
            .name("outcome")
            .await?;
        #[cfg(feature = "testing")]
        if journaled.now() {
            crate::faults::hit(crate::faults::Point::AfterOutcome);
        }
        Ok(outcome)
    }
}

impl Deployment {
    /// The outcome of `spec`'s call in an attempt that journals it: its body's, when this attempt wrote the `started`
    /// marker (`fresh`); interrupted when the marker came from the journal, since an earlier attempt may have run
    /// the body and did not journal its outcome.
    async fn outcome(&self, spec: CallSpec, fresh: bool) -> BodyEnd {
        if !fresh {
            tracing::warn!(call = %spec.call_id, "an earlier attempt of this call may have run its body: interrupted");
            return BodyEnd::Interrupted;
        }
        if let Some(sealed_at_us) = spec.sealed_at_us {
            crate::metrics::body_started(self.clock.now_us() - sealed_at_us);
        }
        self.run_call(spec).await
    }

    /// Runs `spec`'s body with the session's own tools, through the engine's body runner ([`headstart::run_body`]:
    /// its timeout, panics caught, how a body stopped), as the session's engine would run it, minus the scheduling
    /// the engine already did.
    pub(crate) async fn run_call(&self, spec: CallSpec) -> BodyEnd {
        let session = SessionId(spec.session.clone());
        let store: Arc<dyn headstart::TranscriptStore> = Arc::clone(&self.store) as _;
        let engine = self.setup.engine(&session, store).build();
        let Some(tool) = engine.toolbox().get(&spec.tool).cloned() else {
            return BodyEnd::Returned(Err(ToolError::new(format!(
                "unknown tool `{}` on this deployment",
                spec.tool
            ))));
        };
        let mut context = ToolContext::detached(spec.call_id.clone());
        context.session_id = Some(session);
        context.idempotency_key = spec.idempotency_key;
        headstart::run_body(tool.as_ref(), spec.arguments, context).await.into()
    }
}
