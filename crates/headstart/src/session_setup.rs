//! [`SessionSetup`]: how a host that runs sessions it did not create (a fleet's worker, a Restate deployment) builds
//! each one's engine and model.

use std::sync::Arc;

use headstart_core::Model;
use headstart_store::{SessionId, SessionSettings, TranscriptStore};

use crate::engine::EngineBuilder;

/// How an application runs its sessions: the engine (tools, hooks, configuration) and the model of each session a
/// host runs for it. The host sets the builder's store (a handle that is its own: a lease's fenced handle on a
/// fleet, passed in) and anything else it owns (a lease guard).
pub trait SessionSetup: Send + Sync {
    /// The engine of `session`, built on `store` (`Engine::builder(store)` plus the application's tools).
    fn engine(&self, session: &SessionId, store: Arc<dyn TranscriptStore>) -> EngineBuilder;

    /// The model that answers `session`'s requests. `settings` are what the session was submitted with
    /// ([`SessionQueue::submit_with`](headstart_store::SessionQueue::submit_with)): its own model name or system
    /// prompt, to use instead of the application's own where given. A session continued after a takeover resumes
    /// from its stored context, so the model should answer from the context it is given.
    fn model(&self, session: &SessionId, settings: &SessionSettings) -> Arc<dyn Model>;
}
