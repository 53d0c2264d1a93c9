//! [`CallThenAnswer`]: a Chat Completions reply chosen by what the request holds, so that one server answers any
//! number of interleaved sessions, each from wherever its transcript stands (a session begun elsewhere and taken
//! over after a crash too): a request whose last message is a tool result gets the final answer, any other one a
//! call of one tool.

use serde_json::Value;

use super::chat_stream::{chat_events, ChatCall};
use super::{ChooseReply, Reply};

/// What a [`CallThenAnswer`] server says next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A response that calls the tool.
    Call,
    /// The final answer: text, no calls.
    Answer,
}

/// The step that answers a Chat Completions request body: [`Step::Answer`] when its last message is a tool result
/// (`role: tool`), [`Step::Call`] otherwise (a prompt, an assistant message, a body without messages).
pub fn next_step(body: &Value) -> Step {
    let last = body["messages"].as_array().and_then(|messages| messages.last());
    match last {
        Some(message) if message["role"] == "tool" => Step::Answer,
        _ => Step::Call,
    }
}

/// Answers every Chat Completions request by [`next_step`]: a call of `tool` with `arguments`, or `answer`. The
/// `n`th request's response has the id `chatcmpl-n` and its call the id `call_n`, so no two requests repeat an id.
#[derive(Debug, Clone, PartialEq)]
pub struct CallThenAnswer {
    /// The tool called (one the client has, cheap and without side effects, e.g. `read_file`).
    pub tool: String,
    /// Its arguments object.
    pub arguments: Value,
    /// The final answer's text.
    pub answer: String,
}

impl ChooseReply for CallThenAnswer {
    fn reply(&self, number: usize, body: &Value) -> Reply {
        let id = format!("chatcmpl-{number}");
        Reply::Events(match next_step(body) {
            Step::Answer => chat_events(&id, Some(&self.answer), &[]),
            Step::Call => {
                let call_id = format!("call_{number}");
                let call = ChatCall {
                    id: &call_id,
                    name: &self.tool,
                    arguments: &self.arguments,
                };
                chat_events(&id, None, &[call])
            }
        })
    }
}
