//! Hostile provider answers over real HTTP (issue 19): a stream that never ends, a line that never ends, an endless
//! stream of ordinary deltas, absurd retry hints and redirects to another origin. Each must end the request with a
//! clear error, promptly, without a panic and without sending the API key anywhere else.
//!
//! Time bounds are wall clock with generous upper limits (the measured figures are printed): the HTTP stack runs on
//! real sockets, so tokio's paused clock could jump ahead of bytes still in flight.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use headstart::{
    Agent, AgentEvent, AgentStop, CancellationToken, DeltaEvent, Engine, SqliteStore, Toolbox, TranscriptStore,
    UserMessage,
};
use headstart_providers::http::{HttpModel, HttpModelConfig};
use headstart_providers::replay_server::{ReplayServer, Reply};
use headstart_providers::retry::RetryPolicy;
use headstart_providers::WireFormat;
use serde_json::json;

const KEY_VARIABLE: &str = "HEADSTART_PROVIDERS_LIMITS_TEST_KEY";
const KEY: &str = "secret-test-key";

async fn serve(replies: Vec<Reply>) -> ReplayServer {
    ReplayServer::start(replies, HashMap::new(), Duration::ZERO)
        .await
        .unwrap()
}

fn config(format: WireFormat, server: &ReplayServer) -> HttpModelConfig {
    // Edition 2021: setting a variable nobody else reads is fine.
    std::env::set_var(KEY_VARIABLE, KEY);
    HttpModelConfig::new(format, "m")
        .with_base_url(server.url("/v1"))
        .with_api_key_env(Some(KEY_VARIABLE))
}

/// Streams one request with `config` to its end: the delta events, or the request's error, and the time it took.
async fn request(config: HttpModelConfig) -> (Result<Vec<DeltaEvent>, String>, Duration) {
    let model = HttpModel::new(config).unwrap();
    let started = Instant::now();
    let outcome = async {
        let stream = model.stream_context(&[], &[]).await.map_err(|err| err.into_message())?;
        Ok(stream.map(|item| item.unwrap()).collect::<Vec<_>>().await)
    };
    let outcome = tokio::time::timeout(Duration::from_secs(60), outcome)
        .await
        .expect("the request ended within a minute");
    (outcome, started.elapsed())
}

/// The message of the `error` event that ends `events`.
fn error_message(events: &[DeltaEvent]) -> &str {
    match events.last() {
        Some(DeltaEvent::Error { message, .. }) => message,
        other => panic!("the stream ended with {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_keep_alives_ends_at_the_response_timeout() {
    let server = serve(vec![Reply::KeepAlive {
        every: Duration::from_millis(100),
    }])
    .await;
    let mut config = config(WireFormat::Anthropic, &server);
    config.response_timeout = Duration::from_secs(5);
    let (outcome, took) = request(config).await;
    println!("keep-alive stream ended after {took:?} (response timeout 5 s)");
    let events = outcome.unwrap();
    assert_eq!(
        error_message(&events),
        "the response did not finish within 5 s (--response-timeout)"
    );
    assert!(took >= Duration::from_secs(5), "{took:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_eq!(
        server.model_requests().len(),
        1,
        "a response past its deadline is not retried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alives_do_not_restart_the_idle_timer() {
    let server = serve(vec![Reply::KeepAlive {
        every: Duration::from_millis(100),
    }])
    .await;
    let mut config = config(WireFormat::OpenAiChat, &server);
    config.idle_timeout = Duration::from_secs(1);
    config.retry = RetryPolicy::none();
    let (outcome, took) = request(config).await;
    println!("keep-alive stream ended after {took:?} (idle timeout 1 s, a comment every 100 ms)");
    let events = outcome.unwrap();
    assert_eq!(
        error_message(&events),
        "the stream timed out: no event for 1 s (idle timeout)"
    );
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(15),
        "{took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_32_mib_line_is_refused_quickly() {
    let server = serve(vec![Reply::RawBody {
        head: "data: ".to_owned(),
        chunk: "x".repeat(64 * 1024),
        times: 512,
        tail: String::new(),
    }])
    .await;
    let (outcome, took) = request(config(WireFormat::OpenAiChat, &server)).await;
    println!("a 32 MiB line without line end was refused after {took:?}");
    let events = outcome.unwrap();
    assert_eq!(
        error_message(&events),
        "an SSE line or event exceeds the 16 MiB limit: the stream is refused"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// An Anthropic SSE event.
fn event(name: &str, data: serde_json::Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gigabyte_of_ordinary_deltas_is_stopped_at_the_block_limit() {
    let head = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_big", "type": "message", "role": "assistant",
               "model": "m", "content": [], "usage": {"input_tokens": 1, "output_tokens": 0}}}),
    ) + &event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    let delta = event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "y".repeat(4096)}}),
    );
    let times = (1 << 30) / delta.len();
    let server = serve(vec![Reply::RawBody {
        head,
        chunk: delta,
        times,
        tail: String::new(),
    }])
    .await;
    let store: Arc<dyn TranscriptStore> = Arc::new(SqliteStore::open_in_memory().unwrap());
    let session = store.create_session(0).await.unwrap();
    let engine = Engine::builder(store.clone()).toolbox(Toolbox::new()).build();
    let agent = Agent::new(
        engine,
        Arc::new(HttpModel::new(config(WireFormat::Anthropic, &server)).unwrap()),
    );
    let started = Instant::now();
    let run = agent.run(&session, UserMessage::new("Say a lot."), CancellationToken::new());
    let events: Vec<AgentEvent> = tokio::time::timeout(Duration::from_secs(120), run.collect())
        .await
        .expect("the run ended");
    let took = started.elapsed();
    println!("a 1 GiB stream of text deltas was stopped after {took:?}");
    assert!(
        matches!(
            events.last(),
            Some(AgentEvent::AgentEnd {
                stop: AgentStop::ResponseFailed
            })
        ),
        "{:?}",
        events.last()
    );
    let error = events
        .iter()
        .find_map(|event| match event {
            AgentEvent::ResponseEnd { outcome, .. } => outcome.error.clone(),
            _ => None,
        })
        .expect("the turn ended with an error");
    assert!(error.contains("exceed the limit of 16777216 bytes"), "{error}");
    assert!(took < Duration::from_secs(60), "{took:?}");
}

fn status(status: u16, headers: &[(&str, &str)]) -> Reply {
    Reply::Status {
        status,
        headers: headers
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect(),
        body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}).to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_retry_hints_end_the_request_cleanly() {
    // A 429 asking to wait 1e20 s: the hint is capped at a day, more than a retry waits, so no retry.
    let server = serve(vec![status(429, &[("retry-after", "1e20")])]).await;
    let (outcome, took) = request(config(WireFormat::Anthropic, &server)).await;
    let message = outcome.unwrap_err();
    assert!(
        message.contains("HTTP 429")
            && message.contains("slow down")
            && message.contains("(retry after 1e20)")
            && message.contains("not retried: the provider asked to wait 86400 s, longer than the 60 s"),
        "{message}"
    );
    assert_eq!(server.model_requests().len(), 1);
    assert!(took < Duration::from_secs(10), "{took:?}");

    // Absurd hints on a non-retryable 400 (they used to panic before the status was even looked at).
    for headers in [
        [
            ("retry-after", "1e20"),
            ("x-ratelimit-reset-tokens", "99999999999999999999s"),
        ],
        [
            ("retry-after-ms", "1e300"),
            ("anthropic-ratelimit-tokens-reset", "99999-12-31T23:59:59Z"),
        ],
        [("retry-after", "NaN"), ("retry-after-ms", "-inf")],
    ] {
        let server = serve(vec![status(400, &headers)]).await;
        let (outcome, _) = request(config(WireFormat::OpenAiChat, &server)).await;
        let message = outcome.unwrap_err();
        assert!(
            message.contains("HTTP 400") && message.contains("slow down"),
            "{message}"
        );
        assert!(!message.contains("not retried"), "{message}");
        assert_eq!(server.model_requests().len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_another_origin_is_refused_and_carries_no_credential() {
    let elsewhere = serve(Vec::new()).await;
    let target = elsewhere.url("/v1/steal");
    for format in [
        WireFormat::Anthropic,
        WireFormat::Gemini,
        WireFormat::OpenAiChat,
        WireFormat::OpenAiResponses,
    ] {
        for code in [301, 302, 303, 307, 308] {
            let server = serve(vec![Reply::Redirect {
                status: code,
                location: target.clone(),
            }])
            .await;
            let (outcome, _) = request(config(format, &server)).await;
            let message = outcome.unwrap_err();
            assert_eq!(
                message,
                format!("the provider answered {code} redirect to {target}; provider requests do not follow redirects"),
                "{format:?}"
            );
            let requests = server.model_requests();
            assert_eq!(requests.len(), 1, "not retried");
            // The origin itself did get the key: the test would prove nothing if no key were sent at all.
            assert!(
                requests[0].headers.values().any(|value| value.contains(KEY)),
                "{format:?}: {:?}",
                requests[0].headers
            );
        }
    }
    // Not a single request, so certainly none with a credential header.
    let leaked = elsewhere.requests();
    assert!(leaked.is_empty(), "the other origin was reached: {leaked:?}");
}
