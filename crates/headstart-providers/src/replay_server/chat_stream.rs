//! A synthesized Chat Completions stream (`--provider openai` or `openai-compatible`), one chunk an SSE event, for
//! replies a test writes instead of recording them.

use serde_json::{json, Value};

/// One tool call of a synthesized response.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatCall<'a> {
    /// The call id.
    pub id: &'a str,
    /// The tool's name.
    pub name: &'a str,
    /// The arguments object.
    pub arguments: &'a Value,
}

/// The SSE events (each with its blank line) of a Chat Completions response with id `id`: optional `text`, one
/// chunk a word, then `calls` (each its name chunk and its arguments chunk), the `finish_reason` chunk (`stop`, or
/// `tool_calls` when there are calls), a usage chunk and `[DONE]`.
pub fn chat_events(id: &str, text: Option<&str>, calls: &[ChatCall<'_>]) -> Vec<String> {
    let chunk = |choices: Value, usage: Value| {
        let chunk = json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": choices, "usage": usage});
        format!("data: {chunk}\n\n")
    };
    let delta = |delta: Value, finish: Value| {
        chunk(
            json!([{"index": 0, "delta": delta, "finish_reason": finish}]),
            Value::Null,
        )
    };
    let mut events = vec![delta(json!({"role": "assistant", "content": ""}), Value::Null)];
    for word in text.iter().flat_map(|text| text.split_inclusive(' ')) {
        events.push(delta(json!({"content": word}), Value::Null));
    }
    for (index, call) in calls.iter().enumerate() {
        events.push(delta(
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                "function": {"name": call.name, "arguments": ""}}]}),
            Value::Null,
        ));
        events.push(delta(
            json!({"tool_calls": [{"index": index, "function": {"arguments": call.arguments.to_string()}}]}),
            Value::Null,
        ));
    }
    let finish = if calls.is_empty() { "stop" } else { "tool_calls" };
    events.push(delta(json!({}), json!(finish)));
    events.push(chunk(
        json!([]),
        json!({"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}),
    ));
    events.push("data: [DONE]\n\n".to_owned());
    events
}
