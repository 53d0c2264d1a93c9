//! OpenAI Responses streams as GPT-6 Astra sends them for async tool calling (contract §3.7.1), for the replay
//! server's tests and benchmarks: function calls, a commentary message while their results are pending, then
//! `response.completed`.

use serde_json::{json, Value};

/// One SSE event (with its blank line) whose `event:` is the data's `type`.
fn event(data: &Value) -> String {
    format!("event: {}\ndata: {data}\n\n", data["type"].as_str().unwrap_or_default())
}

/// Response `response`: each of `calls` (call id, tool, arguments) as a `function_call` item, `"async": true` on it
/// when `marked`, then an assistant message (`phase: commentary`) of `deltas` text deltas, then
/// `response.completed` with `deltas` output tokens.
pub fn calls_then_commentary(
    response: &str,
    calls: &[(&str, &str, Value)],
    marked: bool,
    deltas: usize,
) -> Vec<String> {
    let mut events = vec![event(
        &json!({"type": "response.created", "response": {"id": response, "status": "in_progress", "output": []}}),
    )];
    for (index, (call_id, name, arguments)) in calls.iter().enumerate() {
        let item_id = format!("fc_{index}");
        let mut call = json!({"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "",
                              "call_id": call_id, "name": name});
        if marked {
            call["async"] = json!(true);
        }
        let arguments = arguments.to_string();
        let mut done = call.clone();
        done["status"] = json!("completed");
        done["arguments"] = json!(arguments);
        events.extend([
            event(&json!({"type": "response.output_item.added", "output_index": index, "item": call})),
            event(
                &json!({"type": "response.function_call_arguments.delta", "item_id": item_id,
                          "output_index": index, "delta": arguments}),
            ),
            event(
                &json!({"type": "response.function_call_arguments.done", "item_id": item_id,
                          "output_index": index, "arguments": arguments}),
            ),
            event(&json!({"type": "response.output_item.done", "output_index": index, "item": done})),
        ]);
    }
    let message = calls.len();
    let message_id = format!("msg_{response}");
    events.push(event(
        &json!({"type": "response.output_item.added", "output_index": message,
                              "item": {"id": message_id, "type": "message", "role": "assistant", "content": [],
                                       "phase": "commentary"}}),
    ));
    for word in 0..deltas {
        events.push(event(
            &json!({"type": "response.output_text.delta", "item_id": message_id,
                                  "output_index": message, "content_index": 0, "delta": format!("waiting {word} ")}),
        ));
    }
    events.push(event(
        &json!({"type": "response.completed", "response": {"id": response, "status": "completed",
                              "incomplete_details": null, "usage": {"input_tokens": 10, "output_tokens": deltas}}}),
    ));
    events
}
