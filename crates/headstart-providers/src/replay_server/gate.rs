//! The gate of a [`Reply::Gated`](super::Reply::Gated): where a recorded response's second tool call begins (the
//! event held back, so that a test's first early call must have started before the model even began the second),
//! the wait for the GET that opens it, and how far that GET led the stream's end; and the wait of a
//! [`Route::AfterPosts`](super::Route::AfterPosts) for the model requests that open it.

use std::time::Duration;

use super::{lock, Recorded, ReplayServer};

/// The position of the event that opens the response's second tool call, in any of the streamed wire formats:
/// a Chat Completions chunk naming call index 1, the second Anthropic `tool_use` block's start, the second
/// Responses `function_call` item added. `None` when the response has no second call, or streams each call whole
/// with the others in one event (Gemini).
pub fn second_call_start(events: &[String]) -> Option<usize> {
    let chat =
        |event: &String| event.contains("\"index\":1") && event.contains("\"name\"") && event.contains("tool_calls");
    if let Some(position) = events.iter().position(chat) {
        return Some(position);
    }
    let opens_call = |event: &&String| {
        (event.contains("content_block_start") && event.contains("\"tool_use\""))
            || (event.contains("response.output_item.added") && event.contains("\"function_call\""))
    };
    events
        .iter()
        .enumerate()
        .filter(|(_, event)| opens_call(event))
        .nth(1)
        .map(|(position, _)| position)
}

/// How far a GET led the end of a streamed reply ([`ReplayServer::lead`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lead {
    /// Milliseconds from the GET's arrival to the reply's last event being sent; negative when the GET came after.
    pub ms: f64,
    /// How many of the reply's events were sent after the GET arrived.
    pub events_after: usize,
}

impl ReplayServer {
    /// How far the first GET of `path` led the end of the reply to POST `number`; `None` when either did not
    /// happen. With a [`Reply::Gated`](super::Reply::Gated) on `path`, the events after the GET are at least the ones held back.
    pub fn lead(&self, path: &str, number: usize) -> Option<Lead> {
        let fetched = self
            .requests()
            .into_iter()
            .find(|request| request.method == "GET" && request.path == path)?
            .at;
        let sent = self.sent(number);
        let end = *sent.last()?;
        let ms = if end >= fetched {
            end.duration_since(fetched).as_secs_f64() * 1000.0
        } else {
            -(fetched.duration_since(end).as_secs_f64() * 1000.0)
        };
        Some(Lead {
            ms,
            events_after: sent.iter().filter(|at| **at > fetched).count(),
        })
    }
}

/// Waits until a GET of `path` was recorded, or `timeout` passed.
pub(super) async fn wait_for_get(recorded: &Recorded, path: &str, timeout: Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        let seen = lock(&recorded.requests)
            .iter()
            .any(|request| request.method == "GET" && request.path == path);
        if seen {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Waits until `posts` counts `at_least` model requests, or `timeout` passed.
pub(super) async fn wait_for_posts(posts: &std::sync::atomic::AtomicUsize, at_least: usize, timeout: Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    while posts.load(std::sync::atomic::Ordering::SeqCst) < at_least && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(name: &str) -> Vec<String> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/providers")
            .join(name);
        let text = std::fs::read_to_string(path).unwrap();
        super::super::cassette_events(&text).unwrap().remove(0)
    }

    #[test]
    fn the_second_call_of_each_recording_is_found_where_it_begins() {
        for name in [
            "openai_chat__streaming_gpt41_parallel_model.yaml",
            "anthropic__multi_turn_streaming_tools.yaml",
            "openai_responses__parallel_tool_calls.yaml",
        ] {
            let events = exchange(name);
            let at = second_call_start(&events).unwrap_or_else(|| panic!("{name}"));
            assert!(at > 1 && at < events.len() - 1, "{name}: {at}");
            assert!(
                second_call_start(&events[..at]).is_none(),
                "{name}: nothing earlier opens it"
            );
        }
        assert_eq!(
            second_call_start(&exchange("gemini__parallel_function_calls.yaml")),
            None
        );
    }
}
