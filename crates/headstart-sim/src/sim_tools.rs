//! Simulated tools and hooks, driven by a scenario's `behavior` and `hooks` blocks.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use headstart::core::ContentBlock;
use headstart::{
    Arguments, Decision, ResultDraft, ResultOverride, Tool, ToolCall, ToolContext, ToolError, ToolHook, ToolOutput,
    ToolSpec,
};
use serde_json::Value;
use tokio::time::Instant;

use crate::scenario::{Behavior, HooksSpec, OnCancel, Outcome, ScenarioTool};
use crate::timing::Timing;

/// A tool that behaves as its scenario says.
#[derive(Debug, Clone)]
pub struct SimTool {
    scenario: ScenarioTool,
    spec: ToolSpec,
    touch_dir: Option<PathBuf>,
    timing: Timing,
}

impl SimTool {
    /// A simulated tool; `touch_dir` enables `touch` side effects.
    pub fn new(scenario: ScenarioTool, touch_dir: Option<PathBuf>) -> Self {
        let spec = ToolSpec::new(scenario.name.clone())
            .description(scenario.description.clone())
            .parameters(scenario.parameters.clone())
            .early(scenario.early)
            .idempotent(scenario.idempotent)
            .execution_mode(scenario.execution_mode.unwrap_or_default())
            .timeout(scenario.timeout_ms.map(Duration::from_millis));
        SimTool {
            scenario,
            spec,
            touch_dir,
            timing: Timing::default(),
        }
    }

    /// The same tool, waiting for its instants with `timing`.
    pub fn with_timing(mut self, timing: Timing) -> Self {
        self.timing = timing;
        self
    }

    fn behavior(&self, call_id: &str) -> Behavior {
        let overrides = self.scenario.by_call.get(call_id).cloned().unwrap_or_default();
        self.scenario.behavior.merged(&overrides)
    }
}

/// Sleeps until `deadline`, or returns `false` early when the call is cancelled and the tool honours it.
/// The deadline is checked first, so a body due at the cancellation instant keeps its result.
async fn wait_until(timing: Timing, deadline: Instant, context: &ToolContext, on_cancel: OnCancel) -> bool {
    if on_cancel == OnCancel::Ignore {
        timing.sleep_until(deadline).await;
        return true;
    }
    tokio::select! {
        biased;
        () = timing.sleep_until(deadline) => true,
        () = context.cancel.cancelled() => false,
    }
}

#[async_trait]
impl Tool for SimTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn conflict_key(&self, arguments: &Arguments) -> Option<String> {
        let key = self.scenario.conflict_key.as_ref()?;
        arguments.get(key).map(|value| match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
    }

    async fn execute(&self, _arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let start = Instant::now();
        let behavior = self.behavior(&context.call_id);
        if behavior.touch {
            if let Some(dir) = &self.touch_dir {
                std::fs::File::create(dir.join(&context.call_id))
                    .map_err(|err| ToolError::new(format!("touch failed: {err}")))?;
            }
        }
        let returns_at = match behavior.outcome {
            Outcome::Hang => None,
            _ => Some(behavior.delay_ms),
        };
        for update in &behavior.updates {
            // An update due after the body returns is dropped.
            if returns_at.is_some_and(|end| update.at_ms > end) {
                break;
            }
            if !wait_until(
                self.timing,
                start + Duration::from_millis(update.at_ms),
                &context,
                behavior.on_cancel,
            )
            .await
            {
                return Err(ToolError::new("cancelled"));
            }
            context.updates.send(ToolOutput::text(update.text.clone()));
        }
        let Some(end) = returns_at else {
            if behavior.on_cancel == OnCancel::Stop {
                context.cancel.cancelled().await;
                return Err(ToolError::new("cancelled"));
            }
            return std::future::pending().await;
        };
        if !wait_until(
            self.timing,
            start + Duration::from_millis(end),
            &context,
            behavior.on_cancel,
        )
        .await
        {
            return Err(ToolError::new("cancelled"));
        }
        match behavior.outcome {
            Outcome::Result(result) => Ok(ToolOutput::text(result.text)
                .with_details(result.details)
                .with_terminate(result.terminate)),
            Outcome::Error(message) => Err(ToolError::new(message)),
            Outcome::Panic(message) => panic!("{message}"),
            Outcome::Hang => unreachable!("handled above"),
        }
    }
}

/// The scenario's `hooks` block as a [`ToolHook`]: blocks by call id or tool name, overrides by call id (which
/// wins) or tool name.
#[derive(Debug, Clone)]
pub struct SimHooks {
    spec: HooksSpec,
}

impl SimHooks {
    /// Hooks from a scenario.
    pub fn new(spec: HooksSpec) -> Self {
        SimHooks { spec }
    }
}

#[async_trait]
impl ToolHook for SimHooks {
    async fn before_tool_call(&self, call: &ToolCall, _arguments: &Arguments) -> Result<Decision, ToolError> {
        let reason = self
            .spec
            .block
            .get(&call.id)
            .or_else(|| self.spec.block.get(&call.name));
        Ok(match reason {
            Some(reason) if reason.is_empty() => Decision::Block(None),
            Some(reason) => Decision::Block(Some(reason.clone())),
            None => Decision::Continue,
        })
    }

    async fn after_tool_call(&self, call: &ToolCall, _result: &ResultDraft) -> Result<ResultOverride, ToolError> {
        let Some(after) = self
            .spec
            .after
            .get(&call.id)
            .or_else(|| self.spec.after.get(&call.name))
        else {
            return Ok(ResultOverride::default());
        };
        Ok(ResultOverride {
            content: after.text.clone().map(|text| vec![ContentBlock::text(text)]),
            details: after.details.clone(),
            is_error: after.is_error,
            terminate: after.terminate,
        })
    }
}
