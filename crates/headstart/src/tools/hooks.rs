//! Hooks around the tool lifecycle (contract §5.2, §5.4): behaviour added around the engine, never inside it.
//!
//! A [`ToolHook`] may veto a call before it runs (`before_tool_call`) and override a result field by field after
//! it ran (`after_tool_call`). [`Hooks`] is an ordered list: `before` hooks run in order until one blocks;
//! `after` hooks run in order, each seeing the result as the previous ones left it.

use std::sync::Arc;

use async_trait::async_trait;
use headstart_core::model::ContentBlock;
use headstart_core::ToolCall;
use serde_json::Value;

use crate::tools::error::ToolError;
use crate::tools::tool::Arguments;

/// What a `before_tool_call` hook decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Let the call run.
    Continue,
    /// Do not run it; the call gets an error result with the reason, or "tool execution was blocked".
    Block(Option<String>),
}

/// A result as the `after_tool_call` hooks see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultDraft {
    /// What the model will see.
    pub content: Vec<ContentBlock>,
    /// Structured data for the application.
    pub details: Value,
    /// Whether the call failed.
    pub is_error: bool,
    /// Whether the result asks the loop to stop.
    pub terminate: bool,
}

/// Field-by-field changes an `after_tool_call` hook makes; `None` keeps the field.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResultOverride {
    /// Replaces the content.
    pub content: Option<Vec<ContentBlock>>,
    /// Replaces the details.
    pub details: Option<Value>,
    /// Replaces `is_error`.
    pub is_error: Option<bool>,
    /// Replaces `terminate`.
    pub terminate: Option<bool>,
}

impl ResultOverride {
    /// Applies the override to a draft.
    pub fn apply(self, draft: &mut ResultDraft) {
        if let Some(content) = self.content {
            draft.content = content;
        }
        if let Some(details) = self.details {
            draft.details = details;
        }
        if let Some(is_error) = self.is_error {
            draft.is_error = is_error;
        }
        if let Some(terminate) = self.terminate {
            draft.terminate = terminate;
        }
    }
}

/// A hook around tool calls. Both methods default to doing nothing.
#[async_trait]
pub trait ToolHook: Send + Sync {
    /// Runs during preparation, after validation, one call at a time in source order (contract §4.1), so it may have
    /// side effects (approval prompts, auth refresh, rate limits).
    async fn before_tool_call(&self, _call: &ToolCall, _arguments: &Arguments) -> Result<Decision, ToolError> {
        Ok(Decision::Continue)
    }

    /// Runs after an executed call's body returned; only executed calls reach it.
    async fn after_tool_call(&self, _call: &ToolCall, _result: &ResultDraft) -> Result<ResultOverride, ToolError> {
        Ok(ResultOverride::default())
    }
}

/// An ordered list of hooks.
#[derive(Clone, Default)]
pub struct Hooks {
    hooks: Vec<Arc<dyn ToolHook>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks").field("len", &self.hooks.len()).finish()
    }
}

impl Hooks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a hook; it runs after the ones already added.
    pub fn push(&mut self, hook: impl ToolHook + 'static) -> &mut Self {
        self.hooks.push(Arc::new(hook));
        self
    }

    /// Builder-style [`Hooks::push`].
    pub fn with(mut self, hook: impl ToolHook + 'static) -> Self {
        self.push(hook);
        self
    }

    /// Runs the `before` hooks in order; the first block or error ends the chain.
    pub async fn before(&self, call: &ToolCall, arguments: &Arguments) -> Result<Decision, ToolError> {
        for hook in &self.hooks {
            if let Decision::Block(reason) = hook.before_tool_call(call, arguments).await? {
                return Ok(Decision::Block(reason));
            }
        }
        Ok(Decision::Continue)
    }

    /// Runs the `after` hooks in order, applying each override before the next hook sees the draft.
    pub async fn after(&self, call: &ToolCall, mut draft: ResultDraft) -> Result<ResultDraft, ToolError> {
        for hook in &self.hooks {
            hook.after_tool_call(call, &draft).await?.apply(&mut draft);
        }
        Ok(draft)
    }
}
