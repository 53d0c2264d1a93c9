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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::io::Read;

use headstart::core::delta_log::{parse_timed_delta, read_delta_log, TimedDelta};
use headstart::core::DeltaEvent;
use headstart::{EngineConfig, ExecutionMode};
use serde::Deserialize;
use serde_json::Value;
use serde_path_to_error::Segment;

use crate::json_path;

/// The largest scenario file [`Scenario::load`] reads: 16 MiB.
pub const MAX_SCENARIO_BYTES: u64 = 16 * 1024 * 1024;

/// The most delta-log bytes one scenario reads over all its turns (a log named by several turns counts once per
/// turn): 64 MiB.
pub const MAX_DELTA_LOG_BYTES: u64 = 64 * 1024 * 1024;

/// The largest time a scenario may name, in milliseconds: 365 days.
pub const MAX_TIME_MS: u64 = 365 * 24 * 3600 * 1000;

/// Why a scenario could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The file is not valid JSON.
    #[error("{path} is not valid JSON: {message}")]
    Json {
        /// The file.
        path: String,
        /// The parser's message.
        message: String,
    },
    /// A key the format does not define.
    #[error("unknown key {key} at {path}")]
    UnknownKey {
        /// The key.
        key: String,
        /// Where it is (`tools[0].behavior`).
        path: String,
    },
    /// A value of the wrong type or out of range.
    #[error("invalid scenario at {path}: {message}")]
    Invalid {
        /// Where.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A delta log is missing or malformed.
    #[error("turn {turn}: {message}")]
    Turn {
        /// 0-based turn.
        turn: usize,
        /// What is wrong.
        message: String,
    },
}

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
pub struct ToolSpec {
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnSpec {
    log: Option<String>,
    events: Option<Vec<Value>>,
}

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
    tools: Vec<ToolSpec>,
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
    pub tools: Vec<ToolSpec>,
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

/// A departure from the schema as a [`ScenarioError`]: an unknown key names the key and the object it is in
/// (`unknown key delay at tools[0].behavior`), anything else the value's path.
fn schema_error(error: serde_path_to_error::Error<serde_json::Error>) -> ScenarioError {
    let segments: Vec<&Segment> = error.path().iter().collect();
    let message = error.inner().to_string();
    // serde reports a key refused by `deny_unknown_fields` as "unknown field `<key>`, …" (`de::Error::unknown_field`),
    // and the path then ends at that key.
    if let (true, Some((Segment::Map { key }, parent))) =
        (message.starts_with("unknown field `"), segments.split_last())
    {
        return ScenarioError::UnknownKey {
            key: key.clone(),
            path: json_path::text(parent.iter().copied()),
        };
    }
    ScenarioError::Invalid {
        path: json_path::text(segments),
        message,
    }
}

fn validate_behavior(spec: &BehaviorSpec, path: &str) -> Result<(), ScenarioError> {
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

/// Refuses a time over [`MAX_TIME_MS`].
fn check_time(ms: Option<u64>, path: &str) -> Result<(), ScenarioError> {
    match ms {
        Some(ms) if ms > MAX_TIME_MS => Err(ScenarioError::Invalid {
            path: path.to_owned(),
            message: time_over_limit(ms),
        }),
        _ => Ok(()),
    }
}

fn time_over_limit(ms: u64) -> String {
    format!("{ms} ms is more than the longest time a scenario may name, {MAX_TIME_MS} ms (365 days)")
}

/// Resolves one turn's events; `log_budget` is what remains of [`MAX_DELTA_LOG_BYTES`] for this scenario.
fn resolve_turn(
    turn: usize,
    spec: &TurnSpec,
    base: &Path,
    log_budget: &mut u64,
) -> Result<Vec<TimedDelta>, ScenarioError> {
    let fail = |message: String| ScenarioError::Turn { turn, message };
    let events = match (&spec.log, &spec.events) {
        (Some(log), None) => {
            let path: PathBuf = base.join(log);
            let shown = path.display();
            let file = std::fs::File::open(&path).map_err(|err| fail(format!("cannot read {shown}: {err}")))?;
            let over_budget = || {
                fail(format!(
                    "{shown}: the scenario's delta logs are larger than the {MAX_DELTA_LOG_BYTES}-byte limit"
                ))
            };
            if file.metadata().is_ok_and(|meta| meta.len() > *log_budget) {
                return Err(over_budget());
            }
            // Never read more than the budget allows, whatever the file claims to be (a device, a growing file).
            let mut reader = std::io::BufReader::new(file.take(*log_budget + 1));
            let events = read_delta_log(&mut reader);
            let unread = reader.get_ref().limit();
            if unread == 0 {
                return Err(over_budget());
            }
            *log_budget -= *log_budget + 1 - unread;
            events.map_err(|err| fail(format!("{shown}: {err}")))?
        }
        (None, Some(events)) => {
            let mut previous = 0;
            events
                .iter()
                .enumerate()
                .map(|(i, event)| {
                    let timed = parse_timed_delta(event.clone(), previous)
                        .map_err(|message| fail(format!("events[{i}]: {message}")))?;
                    previous = timed.at_ms;
                    Ok(timed)
                })
                .collect::<Result<_, _>>()?
        }
        _ => return Err(fail("name exactly one of log, events".to_owned())),
    };
    if let Some((i, timed)) = events.iter().enumerate().find(|(_, timed)| timed.at_ms > MAX_TIME_MS) {
        return Err(fail(format!("event {i} at_ms: {}", time_over_limit(timed.at_ms))));
    }
    ends_at_terminal(&events).map_err(fail)?;
    Ok(events)
}

/// Refuses a tool call id used by two turns (docs/scenario-format.md: ids are unique across all turns). A repeat within one turn
/// is left to the engine, which rejects it as a protocol violation (contract §2).
fn unique_ids_across_turns(turns: &[Vec<TimedDelta>]) -> Result<(), ScenarioError> {
    let mut first_turn: BTreeMap<&str, usize> = BTreeMap::new();
    for (turn, events) in turns.iter().enumerate() {
        for timed in events {
            if let DeltaEvent::ToolcallStart { id, .. } = &timed.event {
                let first = *first_turn.entry(id).or_insert(turn);
                if first != turn {
                    return Err(ScenarioError::Turn {
                        turn,
                        message: format!(
                            "tool call id {id:?} is already used by turn {first}; ids must be unique across turns"
                        ),
                    });
                }
            }
        }
    }
    Ok(())
}

/// Refuses events after a terminal event: the engine stops reading a response at `done`/`error`, so they could
/// never be replayed. Positions are 0-based event numbers within the turn.
fn ends_at_terminal(events: &[TimedDelta]) -> Result<(), String> {
    let Some(terminal) = events.iter().position(|timed| timed.event.is_terminal()) else {
        return Ok(());
    };
    match events.get(terminal + 1) {
        None => Ok(()),
        Some(next) => Err(format!(
            "event {} ({}) follows the terminal event {terminal} ({}); a response ends at its terminal event",
            terminal + 1,
            next.event.type_name(),
            events[terminal].event.type_name()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(text, Path::new("."))
    }

    #[test]
    fn unknown_keys_name_the_key_and_path() {
        let cases = [
            (r#"{"nmae": "x"}"#, "unknown key nmae at the top level"),
            (
                r#"{"tools": [{"name": "t", "behavior": {"delay": 3}}]}"#,
                "unknown key delay at tools[0].behavior",
            ),
            (
                r#"{"tools": [{"name": "t", "by_call": {"c1": {"reslt": {}}}}]}"#,
                "unknown key reslt at tools[0].by_call.c1",
            ),
            (r#"{"config": {"parallel": true}}"#, "unknown key parallel at config"),
            (
                r#"{"turns": [{"log": "a", "evnts": []}]}"#,
                "unknown key evnts at turns[0]",
            ),
        ];
        for (text, message) in cases {
            assert_eq!(parse(text).unwrap_err().to_string(), message);
        }
    }

    #[test]
    fn type_errors_name_the_value_path() {
        let cases = [
            (
                r#"{"tools": [{"name": 3}]}"#,
                "invalid scenario at tools[0].name: invalid type: integer `3`, expected a string",
            ),
            (
                r#"{"hooks": {"after": {"c1": {"is_error": "yes"}}}}"#,
                "invalid scenario at hooks.after.c1.is_error: invalid type: string \"yes\", expected a boolean",
            ),
            (
                r#"{"tools": [{"name": "t", "behavior": {"updates": [{"text": "x"}]}}]}"#,
                "invalid scenario at tools[0].behavior.updates[0]: missing field `at_ms`",
            ),
        ];
        for (text, message) in cases {
            assert_eq!(parse(text).unwrap_err().to_string(), message);
        }
    }

    #[test]
    fn type_errors_and_bad_turns_are_errors_not_panics() {
        assert!(parse(r#"{"tools": [{"name": 3}]}"#).is_err());
        assert!(parse(r#"{"turns": [{}]}"#)
            .unwrap_err()
            .to_string()
            .contains("exactly one"));
        assert!(parse(r#"{"turns": [{"log": "does-not-exist.jsonl"}]}"#)
            .unwrap_err()
            .to_string()
            .contains("cannot read"));
        assert!(parse(r#"{"turns": [{"events": [{"type": "bogus"}]}]}"#)
            .unwrap_err()
            .to_string()
            .contains("events[0]"));
        assert!(parse("[]").is_err());
        assert!(parse(r#"{"tools": [{"name": "t", "behavior": {"error": "a", "panic": "b"}}]}"#).is_err());
    }

    #[test]
    fn by_call_overrides_merge_field_by_field() {
        let scenario = parse(
            r#"{"tools": [{"name": "t", "behavior": {"delay_ms": 300, "result": {"text": "found"}},
                "by_call": {"c2": {"delay_ms": 100}, "c3": {"error": "no"}}}]}"#,
        )
        .unwrap();
        let tool = &scenario.tools[0];
        let c2 = tool.behavior.merged(&tool.by_call["c2"]);
        assert_eq!(c2.delay_ms, 100);
        assert_eq!(
            c2.outcome,
            Outcome::Result(ResultSpec {
                text: "found".into(),
                ..ResultSpec::default()
            })
        );
        let c3 = tool.behavior.merged(&tool.by_call["c3"]);
        assert_eq!((c3.delay_ms, c3.outcome), (300, Outcome::Error("no".into())));
    }
}
