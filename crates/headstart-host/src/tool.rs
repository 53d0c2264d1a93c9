//! [`HostTool`]: a host language's tool as an engine [`Tool`].
//!
//! Everything the scheduler asks (early, sequential, idempotent, timeout, conflict key) is read once, from the
//! tool's [`HostToolSpec`], when the engine is built, so scheduling never waits for the host. Only `execute` crosses
//! over, as an [`Ask::Call`].

use std::sync::Arc;

use async_trait::async_trait;
use headstart::{Arguments, Tool, ToolContext, ToolResult, ToolSpec};

use crate::answer::ToolAnswer;
use crate::ask::{ask, Ask, CallAsk, Host};
use crate::spec::{ConflictKey, HostToolSpec, SpecError};

/// A host's tool, as its spec describes it; its calls run on `host`.
pub struct HostTool {
    spec: ToolSpec,
    conflict_key: Option<ConflictKey>,
    host: Arc<dyn Host>,
}

impl HostTool {
    /// The tool of `spec`, run on `host`; an error naming the tool for a setting the engine cannot take.
    pub fn new(spec: HostToolSpec, host: Arc<dyn Host>) -> Result<Self, SpecError> {
        let (spec, conflict_key) = spec.into_spec()?;
        Ok(HostTool {
            spec,
            conflict_key,
            host,
        })
    }
}

#[async_trait]
impl Tool for HostTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn conflict_key(&self, arguments: &Arguments) -> Option<String> {
        self.conflict_key.as_ref()?.of(arguments)
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> ToolResult {
        let call = Ask::Call(CallAsk {
            tool: self.spec.name.clone(),
            call_id: context.call_id.clone(),
            arguments,
            session_id: context.session_id.as_ref().map(|session| session.0.clone()),
            idempotency_key: context.idempotency_key.clone(),
            updates: context.updates.clone(),
        });
        ToolAnswer::settle(ask(&*self.host, call, Some(&context.cancel)).await)
    }
}
