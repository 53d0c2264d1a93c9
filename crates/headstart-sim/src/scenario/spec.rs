//! The blocks of a scenario as written (`docs/scenario-format.md`): tools and their behaviors, hooks, the engine
//! settings. Every type denies unknown keys.

use std::collections::BTreeMap;

use headstart::{EngineConfig, ExecutionMode};
use serde::Deserialize;
use serde_json::Value;

use super::error::ScenarioError;
use super::limits::check_time;

/// A tool's simulated result.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultSpec {
    /// Result text.
    #[serde(default)]
    pub text: String,
    /// Result details.
    #[serde(default)]
    pub details: Value,
    /// Ask the loop to stop.
    #[serde(default)]
    pub terminate: bool,
}

/// A partial result due at `at_ms` after the call's start.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateSpec {
    /// Milliseconds after start.
    pub at_ms: u64,
    /// Update text.
    #[serde(default)]
    pub text: String,
}

/// What a cancelled simulated tool does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnCancel {
    /// Return the error "cancelled".
    #[default]
    Stop,
    /// Finish normally despite cancellation.
    Ignore,
}

/// A `behavior` block as written (every field optional, so `by_call` entries can be merged field by field).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BehaviorSpec {
    /// Body duration.
    pub delay_ms: Option<u64>,
    /// Partial results.
    pub updates: Option<Vec<UpdateSpec>>,
    /// Normal result.
    pub result: Option<ResultSpec>,
    /// Return this error.
    pub error: Option<String>,
    /// Panic with this message.
    pub panic: Option<String>,
    /// Never return unless cancelled.
    pub hang: Option<bool>,
    /// Reaction to cancellation.
    pub on_cancel: Option<OnCancel>,
    /// Create `<touch-dir>/<call id>` when the body starts.
    pub touch: Option<bool>,
}

/// How a simulated body ends.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Returns this result.
    Result(ResultSpec),
    /// Returns an error.
    Error(String),
    /// Panics.
    Panic(String),
    /// Never returns unless cancelled.
    Hang,
}

/// A fully resolved behavior.
#[derive(Debug, Clone, PartialEq)]
pub struct Behavior {
    /// Body duration.
    pub delay_ms: u64,
    /// Partial results, in time order.
    pub updates: Vec<UpdateSpec>,
    /// How it ends.
    pub outcome: Outcome,
    /// Reaction to cancellation.
    pub on_cancel: OnCancel,
    /// Real side effect.
    pub touch: bool,
}

impl BehaviorSpec {
    fn outcome(&self) -> Option<Outcome> {
        if self.hang == Some(true) {
            return Some(Outcome::Hang);
        }
        if let Some(message) = &self.panic {
            return Some(Outcome::Panic(message.clone()));
        }
        if let Some(message) = &self.error {
            return Some(Outcome::Error(message.clone()));
        }
        self.result.clone().map(Outcome::Result)
    }

    /// This behavior with `overrides` merged field by field; naming any outcome replaces the base outcome.
    pub fn merged(&self, overrides: &BehaviorSpec) -> Behavior {
        let outcome = overrides
            .outcome()
            .or_else(|| self.outcome())
            .unwrap_or(Outcome::Result(ResultSpec::default()));
        let mut updates = overrides
            .updates
            .clone()
            .or_else(|| self.updates.clone())
            .unwrap_or_default();
        updates.sort_by_key(|update| update.at_ms);
        Behavior {
            delay_ms: overrides.delay_ms.or(self.delay_ms).unwrap_or(0),
            updates,
            outcome,
            on_cancel: overrides.on_cancel.or(self.on_cancel).unwrap_or_default(),
            touch: overrides.touch.or(self.touch).unwrap_or(false),
        }
    }
}

/// A simulated tool.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioTool {
    /// Tool name.
    pub name: String,
    /// Description for the model.
    #[serde(default)]
    pub description: String,
    /// Early: its calls may start before the stream ends (`"async"` in scenario files).
    #[serde(default, rename = "async")]
    pub early: bool,
    /// Per-tool execution mode.
    pub execution_mode: Option<ExecutionMode>,
    /// JSON Schema of the arguments.
    #[serde(default = "default_parameters")]
    pub parameters: Value,
    /// The argument whose value is the conflict key.
    pub conflict_key: Option<String>,
    /// Timeout from start.
    pub timeout_ms: Option<u64>,
    /// Safe to re-execute on recovery.
    #[serde(default)]
    pub idempotent: bool,
    /// Base behavior.
    #[serde(default)]
    pub behavior: BehaviorSpec,
    /// Per-call overrides.
    #[serde(default)]
    pub by_call: BTreeMap<String, BehaviorSpec>,
}

fn default_parameters() -> Value {
    serde_json::json!({"type": "object"})
}

/// An `after_tool_call` override.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AfterSpec {
    /// Replace `is_error`.
    pub is_error: Option<bool>,
    /// Replace the content with this text.
    pub text: Option<String>,
    /// Replace `terminate`.
    pub terminate: Option<bool>,
    /// Replace `details`.
    pub details: Option<Value>,
}

/// Scenario hooks.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksSpec {
    /// Call ids or tool names to block, with the reason.
    #[serde(default)]
    pub block: BTreeMap<String, String>,
    /// Result overrides by call id or tool name.
    #[serde(default)]
    pub after: BTreeMap<String, AfterSpec>,
}

/// The `config` block.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSpec {
    /// Parallel or sequential.
    #[serde(default)]
    pub tool_execution: ExecutionMode,
    /// Bound on executing calls.
    #[serde(default)]
    pub max_in_flight: Option<usize>,
    /// Bound on model requests (`"max_turns"` in scenario files).
    #[serde(default = "default_max_requests", rename = "max_turns")]
    pub max_requests: u32,
}

impl Default for ConfigSpec {
    fn default() -> Self {
        ConfigSpec {
            tool_execution: ExecutionMode::Parallel,
            max_in_flight: None,
            max_requests: default_max_requests(),
        }
    }
}

fn default_max_requests() -> u32 {
    8
}

impl ConfigSpec {
    /// The engine configuration this block describes.
    pub fn engine_config(&self) -> EngineConfig {
        EngineConfig::default()
            .tool_execution(self.tool_execution)
            .max_in_flight(self.max_in_flight)
            .max_requests(self.max_requests)
            .early_execution(true)
    }
}

pub(super) fn validate_behavior(spec: &BehaviorSpec, path: &str) -> Result<(), ScenarioError> {
    let outcomes = [
        spec.result.is_some(),
        spec.error.is_some(),
        spec.panic.is_some(),
        spec.hang == Some(true),
    ];
    if outcomes.iter().filter(|named| **named).count() > 1 {
        return Err(ScenarioError::Invalid {
            path: path.to_owned(),
            message: "name at most one of result, error, panic, hang".to_owned(),
        });
    }
    check_time(spec.delay_ms, &format!("{path}.delay_ms"))?;
    for (i, update) in spec.updates.iter().flatten().enumerate() {
        check_time(Some(update.at_ms), &format!("{path}.updates[{i}].at_ms"))?;
    }
    Ok(())
}
