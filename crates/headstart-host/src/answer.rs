//! The host's answers as serde types, one for each thing asked: a tool's result ([`ToolAnswer`]), the before hook's
//! decision ([`BeforeAnswer`]), the after hook's changes ([`AfterAnswer`]). Each language's spellings read the same
//! (JavaScript's `isError` and Python's `is_error`; content as a string or as text blocks). An answer that does not
//! read becomes an error that says what was given and what was expected.

use headstart::core::model::ContentBlock;
use headstart::{Decision, ResultOverride, ToolError, ToolOutput, ToolResult};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::ask::{HostAnswer, HostFailure};

/// What a tool's answer may be, for the error that names it.
const EXPECTED_RESULT: &str =
    "a string, or {content: a string or [{type: \"text\", text}], details?, isError?, terminate?}";
/// What the before hook's answer may be.
const EXPECTED_DECISION: &str =
    "nothing (the call runs), false or a reason string (it is blocked), or {block: true, reason?}";
/// What the after hook's answer may be.
const EXPECTED_CHANGES: &str = "nothing (the result stays), or {content?, details?, isError?, terminate?}";

/// Reads `value` as a `T`, or `None`. An array never reads: serde would take one as a struct's fields in order, and
/// no answer is one.
fn read_as<T: serde::de::DeserializeOwned>(value: Value) -> Option<T> {
    if value.is_array() {
        return None;
    }
    serde_json::from_value(value).ok()
}

/// A value as an error message shows it: its JSON, cut short.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// The value a host answered, or the error of a failure: `Unreadable` names what was given and what was expected
/// (`unreadable(given)`), the others say what happened.
fn answered(answer: HostAnswer, unreadable: impl FnOnce(&str) -> String) -> Result<Value, String> {
    match answer {
        Ok(value) => Ok(value),
        Err(HostFailure::Unreadable(given)) => Err(unreadable(&given)),
        Err(failure) => Err(failure.to_string()),
    }
}

/// Content as a host gives it: a string, or blocks of which the text ones are read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// The text itself.
    Text(String),
    /// Content blocks: `{type: "text", text}` (others, such as images, are not kept).
    Blocks(Vec<Block>),
}

/// One content block.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Block {
    /// Its type (`text`, `image`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// A text block's text.
    #[serde(default)]
    pub text: Option<String>,
}

impl Content {
    /// The engine's content: one text block, the text blocks joined with newlines. An error for a text block
    /// without its text.
    fn into_blocks(self) -> Result<Vec<ContentBlock>, String> {
        let text = match self {
            Content::Text(text) => text,
            Content::Blocks(blocks) => {
                let mut texts = Vec::new();
                for block in blocks {
                    match (block.kind.as_str(), block.text) {
                        ("text", Some(text)) => texts.push(text),
                        ("text", None) => return Err("a text block without its text".into()),
                        _ => {}
                    }
                }
                texts.join("\n")
            }
        };
        Ok(vec![ContentBlock::text(text)])
    }
}

/// A field that is `Some` whenever present, `null` included.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// A tool's result with its fields.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultAnswer {
    /// What the model sees.
    pub content: Content,
    /// Structured data for the application.
    #[serde(default)]
    pub details: Value,
    /// The result reports an error.
    #[serde(default, alias = "is_error")]
    pub is_error: Option<bool>,
    /// Ask the loop to stop after this call's batch.
    #[serde(default)]
    pub terminate: Option<bool>,
}

/// What a host's tool answers: a string (its text), or a result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ToolAnswer {
    /// The result's text.
    Text(String),
    /// A result with its fields.
    Result(ResultAnswer),
}

impl ToolAnswer {
    /// The error of a tool's answer that is not a result: what was `given`, and what was expected.
    fn not_a_result(given: &str) -> String {
        format!("the tool answered {given}, which is not a result: expected {EXPECTED_RESULT}")
    }

    /// Reads a tool's answer; an error that names what was given and what was expected.
    pub fn read(value: Value) -> Result<ToolAnswer, String> {
        let given = shown(&value);
        read_as(value).ok_or_else(|| Self::not_a_result(&given))
    }

    /// The result of a call whose host answered `answer`: its output, or the error it reports, or the error of a
    /// host that raised, gave what does not read, or is gone.
    pub fn settle(answer: HostAnswer) -> ToolResult {
        answered(answer, Self::not_a_result)
            .and_then(Self::read)
            .map_err(ToolError::new)?
            .into_result()
    }

    /// The answer as the engine's output (a partial result's, or a result that is not an error), and whether it
    /// reports an error.
    fn into_parts(self) -> Result<(ToolOutput, bool), String> {
        match self {
            ToolAnswer::Text(text) => Ok((ToolOutput::text(text), false)),
            ToolAnswer::Result(result) => {
                let content = result
                    .content
                    .into_blocks()
                    .map_err(|why| format!("the tool's result has {why}: expected {EXPECTED_RESULT}"))?;
                let output = ToolOutput {
                    content,
                    details: result.details,
                    terminate: result.terminate.unwrap_or(false),
                };
                Ok((output, result.is_error.unwrap_or(false)))
            }
        }
    }

    /// The call's result: its output, or the error it reports (`isError`), whose text is the result's.
    pub fn into_result(self) -> ToolResult {
        match self.into_parts() {
            Ok((output, false)) => Ok(output),
            Ok((output, true)) => Err(ToolError::new(headstart::core::model::joined_text(&output.content))),
            Err(message) => Err(ToolError::new(message)),
        }
    }

    /// A partial result (`onUpdate`): the output, whatever `isError` says; `None` when it does not read.
    pub fn into_update(self) -> Option<ToolOutput> {
        self.into_parts().ok().map(|(output, _)| output)
    }
}

/// The before hook's `{block, reason}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BlockDecision {
    /// Whether to block the call.
    #[serde(default)]
    pub block: Option<bool>,
    /// Why, for the call's error result.
    #[serde(default)]
    pub reason: Option<String>,
}

/// What the before hook answers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum BeforeAnswer {
    /// Nothing (`undefined`, `None`): the call runs.
    Nothing(()),
    /// `true` runs the call; `false` blocks it.
    Flag(bool),
    /// A reason: the call is blocked with it.
    Reason(String),
    /// `{block, reason}`.
    Decision(BlockDecision),
}

impl BeforeAnswer {
    /// The error of an answer that is not a decision.
    fn not_a_decision(given: &str) -> String {
        format!("the before-call hook answered {given}, which is not a decision: expected {EXPECTED_DECISION}")
    }

    /// The engine's decision of the hook's answer; an error that names what was given and what was expected.
    pub fn read(value: Value) -> Result<Decision, String> {
        let given = shown(&value);
        let answer = read_as(value).ok_or_else(|| Self::not_a_decision(&given))?;
        Ok(match answer {
            BeforeAnswer::Nothing(()) | BeforeAnswer::Flag(true) => Decision::Continue,
            BeforeAnswer::Flag(false) => Decision::Block(None),
            BeforeAnswer::Reason(reason) => Decision::Block(Some(reason)),
            BeforeAnswer::Decision(BlockDecision {
                block: Some(true),
                reason,
            }) => Decision::Block(reason),
            BeforeAnswer::Decision(_) => Decision::Continue,
        })
    }

    /// The decision of a hook whose host answered `answer`, or the error that fails the call.
    pub fn settle(answer: HostAnswer) -> Result<Decision, ToolError> {
        answered(answer, Self::not_a_decision)
            .and_then(Self::read)
            .map_err(hook_failed)
    }
}

/// The error of a hook that failed: the call's error result says so.
fn hook_failed(message: String) -> ToolError {
    ToolError::new(format!("a hook failed: {message}"))
}

/// The after hook's changes to a result; absent fields stay.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AfterChanges {
    /// Replaces the content.
    #[serde(default)]
    pub content: Option<Content>,
    /// Replaces the details (`null` included).
    #[serde(default, deserialize_with = "present")]
    pub details: Option<Value>,
    /// Replaces whether it is an error.
    #[serde(default, alias = "is_error")]
    pub is_error: Option<bool>,
    /// Replaces whether it ends the loop.
    #[serde(default)]
    pub terminate: Option<bool>,
}

/// What the after hook answers.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum AfterAnswer {
    /// Nothing: the result stays.
    Nothing(()),
    /// The fields to replace.
    Changes(AfterChanges),
}

impl AfterAnswer {
    /// The error of an answer that is not a change.
    fn not_a_change(given: &str) -> String {
        format!("the after-call hook answered {given}, which is not a change: expected {EXPECTED_CHANGES}")
    }

    /// The engine's override of the hook's answer; an error that names what was given and what was expected.
    pub fn read(value: Value) -> Result<ResultOverride, String> {
        let given = shown(&value);
        let unreadable = || Self::not_a_change(&given);
        let changes = match read_as(value).ok_or_else(unreadable)? {
            AfterAnswer::Nothing(()) => return Ok(ResultOverride::default()),
            AfterAnswer::Changes(changes) => changes,
        };
        let content = match changes.content {
            Some(content) => Some(content.into_blocks().map_err(|_| unreadable())?),
            None => None,
        };
        Ok(ResultOverride {
            content,
            details: changes.details,
            is_error: changes.is_error,
            terminate: changes.terminate,
        })
    }

    /// The override of a hook whose host answered `answer`, or the error that fails the call.
    pub fn settle(answer: HostAnswer) -> Result<ResultOverride, ToolError> {
        answered(answer, Self::not_a_change)
            .and_then(Self::read)
            .map_err(hook_failed)
    }
}
