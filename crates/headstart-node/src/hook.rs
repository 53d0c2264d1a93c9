//! [`JsHook`]: JavaScript's `beforeToolCall` / `afterToolCall` as the engine's [`ToolHook`], over the bridge.
//!
//! `beforeToolCall({toolCall, args})` answers `undefined` (run it), `{block: true, reason?}` (block it);
//! `afterToolCall({toolCall, args, result, isError})` answers `undefined` (keep the result) or the fields to replace
//! (`content`, `details`, `isError`, `terminate`). A hook that throws fails the call with its message (the package
//! turns the throw into an `error` answer).

use std::sync::Arc;

use async_trait::async_trait;
use headstart::core::model::{joined_text, ContentBlock};
use headstart::{Arguments, Decision, ResultDraft, ResultOverride, ToolCall, ToolError, ToolHook};
use serde_json::{json, Value};

use crate::bridge::Bridge;
use crate::result::text_of;

/// Which of the two hooks JavaScript gave, and the bridge they are asked through.
pub struct JsHook {
    /// `beforeToolCall` was given.
    pub before: bool,
    /// `afterToolCall` was given.
    pub after: bool,
    /// The engine's bridge.
    pub bridge: Arc<Bridge>,
}

impl JsHook {
    async fn ask(&self, letter: Value) -> Result<Value, ToolError> {
        self.bridge
            .ask(letter, None, None)
            .await
            .map_err(|message| ToolError::new(format!("a hook failed: {message}")))
    }
}

#[async_trait]
impl ToolHook for JsHook {
    async fn before_tool_call(&self, call: &ToolCall, arguments: &Arguments) -> Result<Decision, ToolError> {
        if !self.before {
            return Ok(Decision::Continue);
        }
        let answer = self
            .ask(json!({"kind": "before", "toolCall": call, "args": Value::Object(arguments.clone())}))
            .await?;
        if answer.get("block").and_then(Value::as_bool) == Some(true) {
            let reason = answer.get("reason").and_then(Value::as_str).map(str::to_owned);
            return Ok(Decision::Block(reason));
        }
        Ok(Decision::Continue)
    }

    async fn after_tool_call(&self, call: &ToolCall, result: &ResultDraft) -> Result<ResultOverride, ToolError> {
        if !self.after {
            return Ok(ResultOverride::default());
        }
        let draft = json!({
            "content": [{"type": "text", "text": joined_text(&result.content)}],
            "details": result.details,
            "terminate": result.terminate,
        });
        let answer = self
            .ask(json!({"kind": "after", "toolCall": call, "result": draft, "isError": result.is_error}))
            .await?;
        if !answer.is_object() {
            return Ok(ResultOverride::default());
        }
        Ok(ResultOverride {
            content: answer
                .get("content")
                .filter(|content| !content.is_null())
                .map(|content| vec![ContentBlock::text(text_of(Some(content)))]),
            details: answer.get("details").cloned(),
            is_error: answer.get("isError").and_then(Value::as_bool),
            terminate: answer.get("terminate").and_then(Value::as_bool),
        })
    }
}
