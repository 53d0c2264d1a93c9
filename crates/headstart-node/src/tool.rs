//! [`JsTool`]: a JavaScript tool as an engine [`Tool`].
//!
//! Everything the scheduler asks (early, sequential, idempotent, timeout) is read once, from the tool's spec, when
//! the engine is built, so scheduling never waits for JavaScript. Only `execute` crosses over, as a `call` letter
//! through the engine's [`Bridge`].

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use headstart::{Arguments, ExecutionMode, Tool, ToolContext, ToolError, ToolResult, ToolSpec};
use serde_json::{json, Value};

use crate::bridge::Bridge;
use crate::result::{output_of, text_of};

/// A JavaScript tool, as its spec describes it.
pub struct JsTool {
    spec: ToolSpec,
    bridge: Arc<Bridge>,
}

impl JsTool {
    /// Reads a tool spec (`{name, description, parameters, early, providerAsync, idempotent, sequential,
    /// timeoutMs}`, all but `name` optional); its calls go through `bridge`.
    pub fn from_spec(spec: &Value, bridge: Arc<Bridge>) -> Result<Self, String> {
        let name = spec
            .get("name")
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
            .ok_or_else(|| format!("a tool needs a name (a non-empty string): {spec}"))?;
        let flag = |key: &str| spec.get(key).and_then(Value::as_bool).unwrap_or(false);
        let parameters = spec
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"}));
        if !parameters.is_object() {
            return Err(format!("tool {name}: parameters must be a JSON Schema object"));
        }
        let timeout = match spec.get("timeoutMs") {
            None | Some(Value::Null) => None,
            Some(ms) => Some(Duration::from_millis(ms.as_u64().ok_or_else(|| {
                format!("tool {name}: timeoutMs must be a whole number of milliseconds, not {ms}")
            })?)),
        };
        let spec = ToolSpec::new(name)
            .description(spec.get("description").and_then(Value::as_str).unwrap_or(""))
            .parameters(parameters)
            .early(flag("early") || flag("providerAsync"))
            .provider_async(flag("providerAsync"))
            .idempotent(flag("idempotent"))
            .execution_mode(ExecutionMode::sequential_if(flag("sequential")))
            .timeout(timeout);
        Ok(JsTool { spec, bridge })
    }
}

#[async_trait]
impl Tool for JsTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> ToolResult {
        let letter = json!({
            "kind": "call",
            "tool": self.spec.name,
            "callId": context.call_id,
            "arguments": Value::Object(arguments),
            "sessionId": context.session_id.as_ref().map(|session| session.0.clone()),
            "idempotencyKey": context.idempotency_key,
        });
        let answer = self
            .bridge
            .ask(letter, Some(context.updates.clone()), Some(&context.cancel))
            .await
            .map_err(ToolError::new)?;
        if answer.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(ToolError::new(text_of(answer.get("content"))));
        }
        Ok(output_of(&answer))
    }
}
