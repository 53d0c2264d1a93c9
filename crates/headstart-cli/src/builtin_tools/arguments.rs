//! The arguments the built-in tools read, and the error a missing one gives.

use headstart::{Arguments, ToolError};
use serde_json::Value;

/// A required argument is missing or not a string.
#[derive(Debug, thiserror::Error)]
#[error("the argument {0:?} is required and must be a string")]
pub struct MissingArgument(&'static str);

impl From<MissingArgument> for ToolError {
    fn from(error: MissingArgument) -> Self {
        ToolError::new(error.to_string())
    }
}

pub(super) fn string_argument<'a>(arguments: &'a Arguments, name: &'static str) -> Result<&'a str, MissingArgument> {
    arguments.get(name).and_then(Value::as_str).ok_or(MissingArgument(name))
}
