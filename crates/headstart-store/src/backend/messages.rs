//! Messages as rows: the encoding every backend stores a message's body in, and the checks of a message row read
//! back.

use headstart_core::model::{AssistantMessage, Message, ToolResultMessage, UserMessage};
use serde::Serialize;

use crate::types::{CallKey, NewResult, RunEnd, StoredMessage};
use crate::StoreError;

/// The stored text of a message: its serde JSON, stored as text (never re-encoded by the database) so that it
/// reads back byte for byte.
pub fn encode(message: &Message, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(message).map_err(|err| encode_failed(what, &err))
}

fn encode_failed(what: &str, err: &serde_json::Error) -> StoreError {
    StoreError::Backend(format!("{what}: cannot encode the message: {err}").into())
}

/// Decodes the stored body of message `seq` of `session`.
pub fn decode(session: &str, seq: i64, body: &str) -> Result<Message, StoreError> {
    serde_json::from_str(body).map_err(|err| {
        StoreError::Decode(
            format!("session {session}, message seq {seq}: the stored body is not a valid message: {err}").into(),
        )
    })
}

/// A stored integer that must be a sequence number or a count (not negative).
pub fn seq_u64(value: i64, session: &str, column: &str) -> Result<u64, StoreError> {
    u64::try_from(value)
        .map_err(|_| StoreError::Decode(format!("session {session}: {column} {value} is not a sequence number").into()))
}

/// A message encoded for its row. A backend encodes it on the caller's side, before the write is queued, so the
/// write carries the row's columns rather than a copy of the message.
#[derive(Debug, Clone)]
pub struct EncodedMessage {
    /// `role`: `user`, `assistant` or `tool_result`.
    pub role: &'static str,
    /// `turn_id`: an assistant fragment's response id (`None` for other messages).
    pub turn_id: Option<String>,
    /// `body`: the message as [`encode`] writes it.
    pub body: String,
}

impl EncodedMessage {
    /// A user prompt; `what` names the write in errors.
    pub fn user(message: &UserMessage, what: &str) -> Result<Self, StoreError> {
        Self::encode(MessageRef::User(message), None, what)
    }

    /// An assistant fragment; `what` names the write in errors.
    pub fn assistant(fragment: &AssistantMessage, what: &str) -> Result<Self, StoreError> {
        Self::encode(MessageRef::Assistant(fragment), Some(fragment.turn_id.clone()), what)
    }

    /// A tool result; `what` names the write in errors.
    pub fn tool_result(result: &ToolResultMessage, what: &str) -> Result<Self, StoreError> {
        Self::encode(MessageRef::ToolResult(result), None, what)
    }

    fn encode(message: MessageRef<'_>, turn_id: Option<String>, what: &str) -> Result<Self, StoreError> {
        Ok(Self {
            role: message.role(),
            turn_id,
            body: serde_json::to_string(&message).map_err(|err| encode_failed(what, &err))?,
        })
    }
}

/// A [`Message`] by reference: serializes as the `Message` holding the same value does (the same tag and variant
/// names; a test holds them equal), so a message is encoded without being cloned into a `Message`.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum MessageRef<'a> {
    User(&'a UserMessage),
    Assistant(&'a AssistantMessage),
    ToolResult(&'a ToolResultMessage),
}

impl MessageRef<'_> {
    /// [`Message::role`].
    fn role(&self) -> &'static str {
        match self {
            Self::User(_) => "user",
            Self::Assistant(_) => "assistant",
            Self::ToolResult(_) => "tool_result",
        }
    }
}

/// A result of [`TranscriptStore::append_tool_results`](crate::TranscriptStore::append_tool_results), ready for the
/// transaction: its call's key, its encoded body, and how it ends the run.
pub type EncodedResult = (CallKey, EncodedMessage, Option<RunEnd>);

/// Encodes the results of one `append_tool_results` of request `request` before its transaction begins (a body
/// that does not encode fails the whole write, with nothing stored).
pub fn encode_results(request: u32, results: &[NewResult], what: &str) -> Result<Vec<EncodedResult>, StoreError> {
    results
        .iter()
        .map(|new| {
            let call = CallKey::new(request, &*new.result.tool_call_id);
            Ok((call, EncodedMessage::tool_result(&new.result, what)?, new.run))
        })
        .collect()
}

/// One row of the message log, as stored.
#[derive(Debug, Clone)]
pub struct MessageRow {
    /// `seq`.
    pub seq: i64,
    /// `role`.
    pub role: String,
    /// `request`.
    pub request: Option<i64>,
    /// `at_us`.
    pub at_us: i64,
    /// `body`.
    pub body: String,
}

impl MessageRow {
    /// Decodes and checks the row (its body must be a message of the stored role).
    pub fn decode(self, session: &str) -> Result<StoredMessage, StoreError> {
        let MessageRow {
            seq,
            role,
            request,
            at_us,
            body,
        } = self;
        let message = decode(session, seq, &body)?;
        if message.role() != role {
            return Err(StoreError::Decode(
                format!(
                    "session {session}, message seq {seq}: stored with role {role} but its body is a {} message",
                    message.role()
                )
                .into(),
            ));
        }
        let request = request
            .map(|request| {
                u32::try_from(request).map_err(|_| {
                    StoreError::Decode(
                        format!("session {session}, message seq {seq}: request {request} is out of range").into(),
                    )
                })
            })
            .transpose()?;
        Ok(StoredMessage {
            seq: seq_u64(seq, session, "seq")?,
            request,
            at_us,
            message,
        })
    }
}
