//! The real agent of `headstart worker --provider … --model …`: every session gets an engine with the worker's
//! tools (the MCP servers started once, shared by all its sessions) and the worker's model, asked with the
//! session's own model name and system prompt when it was submitted with them.

use std::sync::Arc;

use headstart::store::SessionSettings;
use headstart::{EngineBuilder, Model, SessionId, TranscriptStore};
use headstart_fleet::SessionSetup;

use crate::agent::AgentParts;

impl SessionSetup for AgentParts {
    fn engine(&self, _session: &SessionId, store: Arc<dyn TranscriptStore>) -> EngineBuilder {
        AgentParts::engine(self, store)
    }

    fn model(&self, _session: &SessionId, settings: &SessionSettings) -> Arc<dyn Model> {
        if settings.is_empty() {
            return Arc::clone(&self.model) as Arc<dyn Model>;
        }
        Arc::new(
            self.model
                .with_overrides(settings.model.as_deref(), settings.system.as_deref()),
        )
    }
}
