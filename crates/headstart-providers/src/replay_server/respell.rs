//! A recorded Chat Completions stream with its calls renamed and their arguments replaced, fragment for fragment:
//! the recording's timing and shape (how many chunks, where each call starts) stay; only what the calls say
//! changes, so a test can point a real recording at its own tools.

use serde_json::Value;

/// `events` (SSE events, each with its blank line, as [`cassette_events`](super::cassette_events) gives them) with
/// call `i` renamed to `calls[i].0` and its arguments replaced by `calls[i].1`'s JSON text, cut into as many
/// non-empty fragments as the recording had for it (the last takes the rest). Calls past `calls`, and events that
/// are not Chat Completions chunks, stay as they are.
pub fn respell_chat_calls(events: &[String], calls: &[(&str, &Value)]) -> Vec<String> {
    let parsed: Vec<Option<Value>> = events.iter().map(|event| chunk(event)).collect();
    let mut fragments = vec![0usize; calls.len()];
    for (index, arguments) in parsed.iter().flatten().flat_map(call_pieces) {
        if index < calls.len() && !arguments.is_empty() {
            fragments[index] += 1;
        }
    }
    let texts: Vec<Vec<String>> = calls
        .iter()
        .zip(&fragments)
        .map(|((_, arguments), &count)| cut(&arguments.to_string(), count.max(1)))
        .collect();
    let mut used = vec![0usize; calls.len()];
    events
        .iter()
        .zip(parsed)
        .map(|(event, parsed)| {
            let Some(mut value) = parsed else {
                return event.clone();
            };
            let Some(pieces) = value
                .pointer_mut("/choices/0/delta/tool_calls")
                .and_then(Value::as_array_mut)
            else {
                return event.clone();
            };
            for piece in pieces {
                let Some(index) = piece
                    .get("index")
                    .and_then(Value::as_u64)
                    .and_then(|i| usize::try_from(i).ok())
                else {
                    continue;
                };
                let Some((name, _)) = calls.get(index) else {
                    continue;
                };
                let Some(function) = piece.get_mut("function").and_then(Value::as_object_mut) else {
                    continue;
                };
                if function.contains_key("name") {
                    function.insert("name".to_owned(), Value::String((*name).to_owned()));
                }
                let old = function.get("arguments").and_then(Value::as_str).unwrap_or("");
                if !old.is_empty() {
                    let text = texts[index].get(used[index]).cloned().unwrap_or_default();
                    used[index] += 1;
                    function.insert("arguments".to_owned(), Value::String(text));
                }
            }
            format!("data: {value}\n\n")
        })
        .collect()
}

/// The JSON of an unnamed event's data, if it is a chunk.
fn chunk(event: &str) -> Option<Value> {
    let data: String = event
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim_start)
        .collect::<Vec<_>>()
        .join("\n");
    serde_json::from_str::<Value>(&data).ok().filter(Value::is_object)
}

/// (call index, argument text) of each tool-call piece of a chunk.
fn call_pieces(chunk: &Value) -> Vec<(usize, String)> {
    chunk
        .pointer("/choices/0/delta/tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|piece| {
            let index = usize::try_from(piece.get("index")?.as_u64()?).ok()?;
            let arguments = piece
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .unwrap_or("");
            Some((index, arguments.to_owned()))
        })
        .collect()
}

/// `text` in `count` pieces of about equal length (on character boundaries), the last taking the rest.
fn cut(text: &str, count: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(count).max(1);
    let mut pieces: Vec<String> = chars.chunks(size).map(|piece| piece.iter().collect()).collect();
    while pieces.len() > count {
        let last = pieces.pop().unwrap_or_default();
        if let Some(previous) = pieces.last_mut() {
            previous.push_str(&last);
        }
    }
    pieces.resize(count, String::new());
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_recorded_gpt41_stream_calls_other_tools_with_other_arguments_in_as_many_chunks() {
        let yaml =
            include_str!("../../../../tests/fixtures/providers/openai_chat__streaming_gpt41_parallel_model.yaml");
        let events = super::super::cassette_events(yaml).unwrap().remove(0);
        let url = json!({"url": "http://127.0.0.1:1/gate"});
        let path = json!({"path": "notes.txt"});
        let respelled = respell_chat_calls(&events, &[("fetch_url", &url), ("read_file", &path)]);
        assert_eq!(respelled.len(), events.len());
        let sse: Vec<crate::SseEvent> = respelled
            .iter()
            .flat_map(|e| crate::parse_sse_text(e).unwrap())
            .collect();
        let deltas = crate::convert_events(crate::WireFormat::OpenAiChat, &sse, &crate::ConvertOptions::default());
        let mut accumulator = headstart_core::Accumulator::new();
        for (_, delta) in deltas {
            accumulator.apply(delta).unwrap();
        }
        let calls: Vec<(String, String)> = accumulator
            .snapshot()
            .content
            .iter()
            .filter_map(|block| match block {
                headstart_core::ContentBlock::ToolCall(call) => {
                    Some((call.name.clone(), format!("{:?}", call.arguments)))
                }
                _ => None,
            })
            .collect();
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(calls[0].0, "fetch_url");
        assert!(calls[0].1.contains("/gate"), "{calls:?}");
        assert_eq!(calls[1].0, "read_file");
        assert_eq!(cut("abcdefg", 3), ["abc", "def", "g"]);
        assert_eq!(cut("ab", 4), ["a", "b", "", ""]);
    }
}
