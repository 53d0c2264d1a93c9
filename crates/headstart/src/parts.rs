//! What every response of an [`Engine`](crate::Engine) shares: store, tools, hooks, configuration and clock.

use std::sync::Arc;

use headstart_store::TranscriptStore;

use crate::clock::Clock;
use crate::config::EngineConfig;
use crate::context_cache::ContextCache;
use crate::lease::LeaseGuard;
use crate::tools::hooks::Hooks;
use crate::tools::toolbox::Toolbox;

/// Generates a `turn_id` for a response whose provider gave no response id.
pub type TurnIdSource = Arc<dyn Fn(u32) -> String + Send + Sync>;

/// The parts of an [`Engine`](crate::Engine), shared by its clones and by every response it drives.
pub(crate) struct EngineParts {
    pub store: Arc<dyn TranscriptStore>,
    pub toolbox: Arc<Toolbox>,
    pub hooks: Hooks,
    pub config: EngineConfig,
    pub clock: Arc<dyn Clock>,
    pub turn_ids: TurnIdSource,
    /// Asked before each call's `execute` when the engine runs a leased session (contract §7.5.4).
    pub lease_guard: Option<Arc<dyn LeaseGuard>>,
    /// The model contexts of the sessions run last.
    pub contexts: ContextCache,
}
