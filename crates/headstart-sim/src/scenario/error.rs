//! Why a scenario could not be loaded, and where: a departure from the schema names its JSON path.

use headstart_timeline::json_path;
use serde_path_to_error::Segment;

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

/// A departure from the schema as a [`ScenarioError`]: an unknown key names the key and the object it is in
/// (`unknown key delay at tools[0].behavior`), anything else the value's path.
pub(super) fn schema_error(error: serde_path_to_error::Error<serde_json::Error>) -> ScenarioError {
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
