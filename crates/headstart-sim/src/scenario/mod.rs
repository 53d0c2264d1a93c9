//! Scenario files (`docs/scenario-format.md`): parsing, with every unknown key an error naming the key and its path
//! (every spec type denies unknown fields; `serde_path_to_error` says where).
//!
//! # Limits on hostile input
//!
//! Loading never panics and never reads without bound; every malformed input is a [`ScenarioError`] that says what is
//! wrong and where (`headstart replay` reports it as a run-level error with exit status 2):
//!
//! - a scenario file is at most [`MAX_SCENARIO_BYTES`] (16 MiB);
//! - the delta logs a scenario reads are at most [`MAX_DELTA_LOG_BYTES`] (64 MiB) in total, counting a log once per
//!   turn that names it; a single line is at most
//!   [`MAX_LINE_BYTES`](headstart::core::delta_log::MAX_LINE_BYTES) (8 MiB), refused without being buffered whole;
//! - JSON nested deeper than `serde_json`'s recursion limit (128) is an error ("recursion limit exceeded"), never a
//!   stack overflow;
//! - a turn whose events go on after its terminal event (`done`/`error`) is refused: the engine stops reading a
//!   response at its terminal event, so those events could never be replayed;
//! - a tool call id used by two turns is refused (docs/scenario-format.md: ids are unique across all turns);
//! - every time in a scenario (`at_ms`, `cancel_at_ms`, `delay_ms`, `updates[].at_ms`, `timeout_ms`) is at most
//!   [`MAX_TIME_MS`] (365 days): far larger values would keep the virtual clock stepping through its timer wheel
//!   for hours, and no real scenario needs them.
//!
//! What a loaded scenario streams is bounded further by the accumulator's limits on one response
//! ([`headstart::core::accumulator`]: 16 MiB per block, 64 MiB per response), which end the response with an error.
//!
//! One idea a file: `spec` (the blocks as written), `turns` (each turn's delta events), `limits`, `error`; this file
//! reads a scenario and puts it together.

mod error;
mod limits;
mod spec;
#[cfg(test)]
mod tests;
mod turns;

use std::io::Read;
use std::path::Path;

use headstart::core::delta_log::TimedDelta;
use serde::Deserialize;
use serde_json::Value;

use error::schema_error;
pub use error::ScenarioError;
use limits::check_time;
pub use limits::{MAX_DELTA_LOG_BYTES, MAX_SCENARIO_BYTES, MAX_TIME_MS};
use spec::validate_behavior;
pub use spec::{
    AfterSpec, Behavior, BehaviorSpec, ConfigSpec, HooksSpec, OnCancel, Outcome, ResultSpec, ScenarioTool, UpdateSpec,
};
use turns::{resolve_turn, unique_ids_across_turns, TurnSpec};

/// A scenario file as written, before its turns are resolved.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    #[serde(default)]
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default = "default_prompt")]
    prompt: String,
    #[serde(default)]
    config: ConfigSpec,
    #[serde(default)]
    tools: Vec<ScenarioTool>,
    #[serde(default)]
    hooks: HooksSpec,
    cancel_at_ms: Option<u64>,
    #[serde(default)]
    turns: Vec<TurnSpec>,
    #[serde(default)]
    expect: Value,
}

fn default_prompt() -> String {
    "go".to_owned()
}

/// A loaded scenario, with every turn's delta events resolved.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name.
    pub name: String,
    /// Free text.
    pub description: String,
    /// First user message.
    pub prompt: String,
    /// Engine settings.
    pub config: ConfigSpec,
    /// Simulated tools.
    pub tools: Vec<ScenarioTool>,
    /// Simulated hooks.
    pub hooks: HooksSpec,
    /// External cancellation time.
    pub cancel_at_ms: Option<u64>,
    /// One delta log per model request.
    pub turns: Vec<Vec<TimedDelta>>,
    /// The `expect` block (read by tests, ignored by replay).
    pub expect: Value,
}

impl Scenario {
    /// Loads a scenario file; delta logs are resolved relative to it.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ScenarioError> {
        let path = path.as_ref();
        let read_error = |message: String| ScenarioError::Read {
            path: path.display().to_string(),
            message,
        };
        let file = std::fs::File::open(path).map_err(|err| read_error(err.to_string()))?;
        let too_large = || read_error(format!("the file is larger than the {MAX_SCENARIO_BYTES}-byte limit"));
        if file.metadata().is_ok_and(|meta| meta.len() > MAX_SCENARIO_BYTES) {
            return Err(too_large());
        }
        // Read at most one byte past the limit, so a file that grows (or a device) cannot be read without bound.
        let mut bytes = Vec::new();
        file.take(MAX_SCENARIO_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|err| read_error(err.to_string()))?;
        if bytes.len() as u64 > MAX_SCENARIO_BYTES {
            return Err(too_large());
        }
        let text = String::from_utf8(bytes).map_err(|err| read_error(format!("not valid UTF-8: {err}")))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse(&text, &base).map_err(|err| match err {
            ScenarioError::Json { message, .. } => ScenarioError::Json {
                path: path.display().to_string(),
                message,
            },
            other => other,
        })
    }

    /// Parses scenario text; `base` is the folder delta-log paths are relative to.
    pub fn parse(text: &str, base: &Path) -> Result<Self, ScenarioError> {
        let value: Value = serde_json::from_str(text).map_err(|err| ScenarioError::Json {
            path: "scenario".to_owned(),
            message: err.to_string(),
        })?;
        if !value.is_object() {
            return Err(ScenarioError::Invalid {
                path: "the top level".to_owned(),
                message: "a scenario must be a JSON object".to_owned(),
            });
        }
        let file: ScenarioFile = serde_path_to_error::deserialize(value).map_err(schema_error)?;
        let mut log_budget = MAX_DELTA_LOG_BYTES;
        let turns = file
            .turns
            .iter()
            .enumerate()
            .map(|(turn, spec)| resolve_turn(turn, spec, base, &mut log_budget))
            .collect::<Result<Vec<_>, _>>()?;
        unique_ids_across_turns(&turns)?;
        check_time(file.cancel_at_ms, "cancel_at_ms")?;
        for (i, tool) in file.tools.iter().enumerate() {
            check_time(tool.timeout_ms, &format!("tools[{i}].timeout_ms"))?;
            validate_behavior(&tool.behavior, &format!("tools[{i}].behavior"))?;
            for (call, spec) in &tool.by_call {
                validate_behavior(spec, &format!("tools[{i}].by_call.{call}"))?;
            }
        }
        Ok(Scenario {
            name: file.name,
            description: file.description,
            prompt: file.prompt,
            config: file.config,
            tools: file.tools,
            hooks: file.hooks,
            cancel_at_ms: file.cancel_at_ms,
            turns,
            expect: file.expect,
        })
    }
}
