//! The canonical model context (contract §7.3).
//!
//! The durable log is in write order: fragments of a response and the results of its calls interleave in the
//! order they became durable. Providers need each assistant message followed directly by its tool results, and
//! prompt caches need a stable order, so the model sees a canonical view: each response's fragments (grouped by
//! `turn_id`) merged back into one assistant message carrying the terminal fragment's usage and stop reason,
//! placed where its first fragment was written, followed by its tool results in call order.

use std::collections::HashMap;

use crate::model::{AssistantMessage, Message, ToolResultMessage};

/// Builds the canonical model context from messages in durable write order, without knowing which request each
/// message belongs to: a tool result answers the most recent response written before it that has a call with its
/// id (call ids are unique within a response, not across responses). [`model_context_by_request`] is exact when the
/// requests are known, as they are in a store.
///
/// A tool result whose call is in no stored response (which the engine never writes) is kept where it was written,
/// so nothing stored is dropped from the view.
pub fn model_context(log: &[Message]) -> Vec<Message> {
    model_context_by_request(log.iter().map(|message| (None, message)))
}

/// Which response a fragment belongs to: its model request, when known, and its `turn_id`.
type ResponseKey<'a> = (Option<u32>, &'a str);

/// Builds the canonical model context from messages in durable write order, each with the 0-based model request it
/// belongs to (`None` when unknown: user prompts, and results stored before results carried their request).
///
/// A response is the fragments sharing a request and a `turn_id`. A tool result with a request answers the call
/// with its id in that request's response; a result without one answers the most recent response written before it
/// that has a call with its id. A call id repeated by several responses (some providers number their calls
/// `call_0`, `call_1`, … in every response) therefore keeps each result with its own call.
pub fn model_context_by_request<'a>(log: impl IntoIterator<Item = (Option<u32>, &'a Message)>) -> Vec<Message> {
    let log: Vec<(Option<u32>, &Message)> = log.into_iter().collect();

    // Pass 1: merge fragments per response, and find the response of each (request, call id).
    let mut merged: HashMap<ResponseKey<'_>, AssistantMessage> = HashMap::new();
    let mut response_of_call: HashMap<(u32, &str), ResponseKey<'_>> = HashMap::new();
    for &(request, message) in &log {
        if let Message::Assistant(fragment) = message {
            let response = (request, fragment.turn_id.as_str());
            if let Some(request) = request {
                for call in fragment.tool_calls() {
                    response_of_call.insert((request, call.id.as_str()), response);
                }
            }
            match merged.get_mut(&response) {
                None => {
                    merged.insert(response, fragment.clone());
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

    // Pass 2, in write order: the response each result answers.
    let mut latest_with_call: HashMap<&str, ResponseKey<'_>> = HashMap::new();
    let mut owner_of_result: Vec<Option<ResponseKey<'_>>> = Vec::with_capacity(log.len());
    let mut results: HashMap<(ResponseKey<'_>, &str), &ToolResultMessage> = HashMap::new();
    for &(request, message) in &log {
        let owner = match message {
            Message::Assistant(fragment) => {
                for call in fragment.tool_calls() {
                    latest_with_call.insert(call.id.as_str(), (request, fragment.turn_id.as_str()));
                }
                None
            }
            Message::ToolResult(result) => {
                let id = result.tool_call_id.as_str();
                let owner = match request {
                    Some(request) => response_of_call.get(&(request, id)).copied(),
                    None => latest_with_call.get(id).copied(),
                };
                if let Some(owner) = owner {
                    // The first result wins; the engine writes exactly one per call.
                    results.entry((owner, id)).or_insert(result);
                }
                owner
            }
            Message::User(_) => None,
        };
        owner_of_result.push(owner);
    }

    // Pass 3: emit in write order, each response at its first fragment, followed by its results in call order.
    let mut context = Vec::with_capacity(log.len());
    for (&(request, message), owner) in log.iter().zip(owner_of_result) {
        match message {
            Message::User(_) => context.push(message.clone()),
            Message::Assistant(fragment) => {
                let key = (request, fragment.turn_id.as_str());
                let Some(response) = merged.remove(&key) else {
                    continue; // a later fragment of a response already emitted
                };
                let call_results: Vec<Message> = response
                    .tool_calls()
                    .filter_map(|call| results.get(&(key, call.id.as_str())))
                    .map(|result| Message::ToolResult((*result).clone()))
                    .collect();
                context.push(Message::Assistant(response));
                context.extend(call_results);
            }
            Message::ToolResult(_) => {
                if owner.is_none() {
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

    fn result_text(message: &Message) -> String {
        let Message::ToolResult(result) = message else {
            panic!("not a result: {message:?}")
        };
        result.text()
    }

    fn result_with(id: &str, text: &str) -> Message {
        let Message::ToolResult(mut result) = result(id) else {
            unreachable!()
        };
        result.content = vec![ContentBlock::text(text)];
        Message::ToolResult(result)
    }

    #[test]
    fn a_call_id_repeated_by_each_response_keeps_each_result_with_its_own_call() {
        let log = vec![
            (None, Message::User(UserMessage::new("go"))),
            (Some(0), fragment("r0", &["call_0"], StopReason::ToolUse, 1)),
            (Some(0), result_with("call_0", "first")),
            (Some(1), fragment("r1", &["call_0"], StopReason::ToolUse, 2)),
            (Some(1), fragment("r1", &[], StopReason::ToolUse, 2)),
            // Written after a later fragment of its own response.
            (Some(1), result_with("call_0", "second")),
            (Some(2), fragment("r2", &["call_0"], StopReason::ToolUse, 3)),
            (Some(2), result_with("call_0", "third")),
        ];
        let context = model_context_by_request(log.iter().map(|(request, message)| (*request, message)));
        let shape: Vec<String> = context
            .iter()
            .map(|message| match message {
                Message::ToolResult(_) => result_text(message),
                other => other.role().to_owned(),
            })
            .collect();
        assert_eq!(
            shape,
            [
                "user",
                "assistant",
                "first",
                "assistant",
                "second",
                "assistant",
                "third"
            ]
        );

        // The stored request decides, not the position: a stale result of request 0 written after response 1.
        let stale = [
            (Some(0), fragment("r0", &["call_0"], StopReason::ToolUse, 1)),
            (Some(1), fragment("r1", &["call_0"], StopReason::ToolUse, 2)),
            (Some(1), result_with("call_0", "of r1")),
            (Some(0), result_with("call_0", "of r0")),
        ];
        let context = model_context_by_request(stale.iter().map(|(request, message)| (*request, message)));
        let texts: Vec<String> = context.iter().skip(1).step_by(2).map(result_text).collect();
        assert_eq!(texts, ["of r0", "of r1"]);

        // Without requests, a result answers the most recent response before it with its id.
        let plain: Vec<Message> = log.into_iter().map(|(_, message)| message).collect();
        let texts: Vec<String> = model_context(&plain)
            .iter()
            .filter(|message| matches!(message, Message::ToolResult(_)))
            .map(result_text)
            .collect();
        assert_eq!(texts, ["first", "second", "third"]);
    }

    #[test]
    fn one_turn_id_in_two_requests_is_two_responses() {
        let log = [
            (Some(0), fragment("same", &["call_0"], StopReason::ToolUse, 1)),
            (Some(0), result("call_0")),
            (Some(1), fragment("same", &[], StopReason::Stop, 2)),
        ];
        let roles: Vec<&str> = model_context_by_request(log.iter().map(|(request, message)| (*request, message)))
            .iter()
            .map(Message::role)
            .collect();
        assert_eq!(roles, ["assistant", "tool_result", "assistant"]);
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
