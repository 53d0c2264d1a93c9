//! [`HostToolSpec`]: a host tool's settings as data, the same for every host language, read into the engine's
//! [`ToolSpec`] and the tool's [`ConflictKey`].

use std::time::Duration;

use headstart::{ExecutionMode, ToolSpec};
use serde::Deserialize;
use serde_json::Value;

/// A host tool's settings, as the host gives them (JSON; camelCase, with Python's snake_case names accepted too).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostToolSpec {
    /// The name the model calls it by (not empty).
    pub name: String,
    /// What it does, for the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments (an object); `{"type": "object"}` when absent.
    #[serde(default)]
    pub parameters: Option<Value>,
    /// Its calls may start at their seal.
    #[serde(default)]
    pub early: bool,
    /// Declared to the provider as async (OpenAI Responses); early too.
    #[serde(default, alias = "provider_async")]
    pub provider_async: bool,
    /// Recovery may run an interrupted call again.
    #[serde(default)]
    pub idempotent: bool,
    /// Its calls fence their batch and run one at a time.
    #[serde(default)]
    pub sequential: bool,
    /// Milliseconds before a call's body is cancelled and the call fails (JavaScript's unit); none when absent.
    #[serde(default, alias = "timeout_ms")]
    pub timeout_ms: Option<Amount>,
    /// The same in seconds (Python's unit); at most one of the two.
    #[serde(default)]
    pub timeout: Option<Amount>,
    /// Calls with equal keys run in source order (contract §4.5): the name of an argument (one the parameters list
    /// under `properties`), whose value is the key, or else a fixed key every call has.
    #[serde(default, alias = "conflict_key")]
    pub conflict_key: Option<String>,
}

/// A number of a spec: a JSON number, or the text of one JSON cannot hold (`inf`, `nan`, as Python writes them),
/// which the reader refuses by name.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Amount {
    /// A number.
    Number(f64),
    /// The text of a number.
    Text(String),
}

impl Amount {
    /// The duration of this many `unit`s (a negative amount is no time at all), or how it is shown when it is not
    /// a finite number, or too large.
    fn duration(&self, unit: f64) -> Result<Duration, String> {
        let (number, shown) = match self {
            Amount::Number(number) => (*number, format!("{number:?}")),
            Amount::Text(text) => (text.trim().parse().unwrap_or(f64::NAN), text.clone()),
        };
        if !number.is_finite() {
            return Err(shown);
        }
        Duration::try_from_secs_f64(number.max(0.0) * unit).map_err(|_| shown)
    }
}

/// How a tool's calls are keyed for conflicts (contract §4.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConflictKey {
    /// Every call has this key.
    Fixed(String),
    /// The call's argument of this name (its text, or its JSON) is the key.
    Argument(String),
}

impl ConflictKey {
    /// The key of a call with `arguments` (none when the argument is absent).
    pub fn of(&self, arguments: &headstart::Arguments) -> Option<String> {
        match self {
            ConflictKey::Fixed(key) => Some(key.clone()),
            ConflictKey::Argument(name) => arguments.get(name).map(|value| match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            }),
        }
    }
}

/// A spec the engine cannot take, naming the tool and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(pub String);

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

impl HostToolSpec {
    /// Reads a spec from the host's JSON.
    pub fn from_json(value: Value) -> Result<Self, SpecError> {
        let shown = value.to_string();
        serde_json::from_value(value)
            .map_err(|error| SpecError(format!("a tool spec that does not read ({error}): {shown}")))
    }

    /// The engine's spec of the tool, and its conflict key; an error naming the tool for a setting it cannot take.
    pub fn into_spec(self) -> Result<(ToolSpec, Option<ConflictKey>), SpecError> {
        let name = self.name;
        if name.is_empty() {
            return Err(SpecError("a tool needs a name (a non-empty string)".into()));
        }
        let parameters = self.parameters.unwrap_or_else(|| serde_json::json!({"type": "object"}));
        if !parameters.is_object() {
            return Err(SpecError(format!(
                "tool {name}: parameters must be a JSON Schema object, not {parameters}"
            )));
        }
        // An infinite, NaN or out-of-range timeout is the caller's error, named in the caller's unit.
        let timeout = match (self.timeout_ms, self.timeout) {
            (None, None) => None,
            (Some(ms), None) => Some(ms.duration(0.001).map_err(|shown| {
                SpecError(format!(
                    "tool {name}: timeoutMs must be a finite number of milliseconds, not {shown}"
                ))
            })?),
            (None, Some(seconds)) => Some(seconds.duration(1.0).map_err(|shown| {
                SpecError(format!(
                    "tool {name}: timeout must be a finite number of seconds, not {shown}"
                ))
            })?),
            (Some(_), Some(_)) => {
                return Err(SpecError(format!(
                    "tool {name}: a timeout in milliseconds or in seconds, not both"
                )))
            }
        };
        let conflict_key = self.conflict_key.map(|key| {
            let is_argument = parameters
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|properties| properties.contains_key(&key));
            if is_argument {
                ConflictKey::Argument(key)
            } else {
                ConflictKey::Fixed(key)
            }
        });
        let spec = ToolSpec::new(name)
            .description(self.description)
            .parameters(parameters)
            .early(self.early || self.provider_async)
            .provider_async(self.provider_async)
            .idempotent(self.idempotent)
            .execution_mode(ExecutionMode::sequential_if(self.sequential))
            .timeout(timeout);
        Ok((spec, conflict_key))
    }
}
