//! The canonical model context (contract §7.3).
//!
//! The durable log is in write order: fragments of a response and the results of its calls interleave in the
//! order they became durable. Providers need each assistant message followed directly by its tool results, and
//! prompt caches need a stable order, so the model sees a canonical view: each response's fragments (grouped by
//! `turn_id`) merged back into one assistant message carrying the terminal fragment's usage and stop reason,
//! placed where its first fragment was written, followed by its tool results in call order.

use std::collections::HashMap;

use crate::model::{AssistantMessage, Message, ToolResultMessage};

/// Builds the canonical model context from messages in durable write order.
///
/// A tool result whose call is in no stored response (which the engine never writes) is kept where it was written,
/// so nothing stored is dropped from the view.
pub fn model_context(log: &[Message]) -> Vec<Message> {
    // Pass 1: merge fragments per turn and find every call's owning turn.
    let mut merged: HashMap<&str, AssistantMessage> = HashMap::new();
    let mut owner_of_call: HashMap<&str, &str> = HashMap::new();
    for message in log {
        if let Message::Assistant(fragment) = message {
            for call in fragment.tool_calls() {
                owner_of_call.insert(call.id.as_str(), fragment.turn_id.as_str());
            }
            match merged.get_mut(fragment.turn_id.as_str()) {
                None => {
                    merged.insert(fragment.turn_id.as_str(), fragment.clone());
                }
                Some(response) => {
                    response.content.extend(fragment.content.iter().cloned());
                    // Later fragments are later in the response: the last one written is the terminal one.
                    response.stop_reason = fragment.stop_reason;
                    response.usage = fragment.usage;
                    if fragment.error_message.is_some() {
                        response.error_message.clone_from(&fragment.error_message);
                    }
                    if response.model.is_none() {
                        response.model.clone_from(&fragment.model);
                    }
                }
            }
        }
    }
    let mut results: HashMap<&str, &ToolResultMessage> = HashMap::new();
    for message in log {
        if let Message::ToolResult(result) = message {
            if owner_of_call.contains_key(result.tool_call_id.as_str()) {
                // The first result wins; the engine writes exactly one per call.
                results.entry(result.tool_call_id.as_str()).or_insert(result);
            }
        }
    }

    // Pass 2: emit in write order, each response at its first fragment, followed by its results in call order.
    let mut context = Vec::with_capacity(log.len());
    for message in log {
        match message {
            Message::User(_) => context.push(message.clone()),
            Message::Assistant(fragment) => {
                let Some(response) = merged.remove(fragment.turn_id.as_str()) else {
                    continue; // a later fragment of a response already emitted
                };
                let call_results: Vec<Message> = response
                    .tool_calls()
                    .filter_map(|call| results.get(call.id.as_str()))
                    .map(|result| Message::ToolResult((*result).clone()))
                    .collect();
                context.push(Message::Assistant(response));
                context.extend(call_results);
            }
            Message::ToolResult(result) => {
                if !owner_of_call.contains_key(result.tool_call_id.as_str()) {
                    context.push(message.clone());
                }
            }
        }
    }
    context
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ContentBlock, StopReason, ToolArguments, ToolCall, Usage, UserMessage};

    fn fragment(turn: &str, calls: &[&str], stop: StopReason, usage: u64) -> Message {
        Message::Assistant(AssistantMessage {
            turn_id: turn.into(),
            stop_reason: stop,
            content: calls
                .iter()
                .map(|id| {
                    ContentBlock::ToolCall(ToolCall {
                        id: (*id).into(),
                        name: "t".into(),
                        arguments: ToolArguments::default(),
                    })
                })
                .collect(),
            usage: Usage {
                input: usage,
                ..Usage::default()
            },
            model: None,
            error_message: None,
        })
    }

    fn result(id: &str) -> Message {
        Message::ToolResult(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "t".into(),
            content: vec![ContentBlock::text(id)],
            details: serde_json::Value::Null,
            is_error: false,
            terminate: false,
        })
    }

    #[test]
    fn fragments_merge_and_results_follow_in_call_order() {
        let log = vec![
            Message::User(UserMessage::new("go")),
            fragment("r0", &["c1"], StopReason::ToolUse, 0),
            fragment("r0", &["c2"], StopReason::ToolUse, 0),
            result("c2"),
            result("c1"),
            fragment("r0", &[], StopReason::ToolUse, 60),
            fragment("r1", &[], StopReason::Stop, 35),
        ];
        let context = model_context(&log);
        let roles: Vec<&str> = context.iter().map(Message::role).collect();
        assert_eq!(roles, ["user", "assistant", "tool_result", "tool_result", "assistant"]);
        let Message::Assistant(first) = &context[1] else {
            panic!()
        };
        let ids: Vec<&str> = first.tool_calls().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["c1", "c2"]);
        assert_eq!(first.usage.total(), 60);
        let Message::ToolResult(r) = &context[2] else { panic!() };
        assert_eq!(r.tool_call_id, "c1");
    }

    #[test]
    fn results_written_late_still_follow_their_response() {
        let log = vec![
            Message::User(UserMessage::new("go")),
            fragment("r0", &["c1"], StopReason::Error, 1),
            Message::User(UserMessage::new("again")),
            result("c1"),
            result("orphan"),
        ];
        let roles: Vec<&str> = model_context(&log).iter().map(Message::role).collect();
        assert_eq!(roles, ["user", "assistant", "tool_result", "user", "tool_result"]);
    }
}
