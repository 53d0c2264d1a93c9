//! [`HostHook`]: a host language's `before` and `after` hooks as the engine's [`ToolHook`].

use std::sync::Arc;

use async_trait::async_trait;
use headstart::{Arguments, Decision, ResultDraft, ResultOverride, ToolCall, ToolError, ToolHook};

use crate::answer::{AfterAnswer, BeforeAnswer};
use crate::ask::{ask, Ask, Host};

/// Which of the two hooks the host has, and the host they run on. A hook that raises, or answers what does not
/// read, fails the call with its message.
pub struct HostHook {
    /// The host has a before hook.
    pub before: bool,
    /// The host has an after hook.
    pub after: bool,
    /// Where they run.
    pub host: Arc<dyn Host>,
}

#[async_trait]
impl ToolHook for HostHook {
    async fn before_tool_call(&self, call: &ToolCall, arguments: &Arguments) -> Result<Decision, ToolError> {
        if !self.before {
            return Ok(Decision::Continue);
        }
        let before = Ask::Before {
            call: call.clone(),
            arguments: arguments.clone(),
        };
        BeforeAnswer::settle(ask(&*self.host, before, None).await)
    }

    async fn after_tool_call(&self, call: &ToolCall, result: &ResultDraft) -> Result<ResultOverride, ToolError> {
        if !self.after {
            return Ok(ResultOverride::default());
        }
        let after = Ask::After {
            call: call.clone(),
            result: result.clone(),
        };
        AfterAnswer::settle(ask(&*self.host, after, None).await)
    }
}
