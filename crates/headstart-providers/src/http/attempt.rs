//! One attempt of a request: send it, check the answer, and wait for the first delta after `start`.

use std::time::SystemTime;

use futures::StreamExt;
use headstart_core::{DeltaEvent, ModelError, ModelErrorKind};
use tokio::time::Instant;

use super::config::HttpModelConfig;
use super::error_text::{error_chain, provider_message, quoted, read_limited};
use crate::error::ProviderError;
use crate::retry::{retry_hint, retryable, Failure};
use crate::sse::sse_events;
use crate::stream::{later, timed_events, DeltaStream, SseDeltas};

/// One attempt: send, check the status, and wait for the first delta after `start`.
pub(super) async fn attempt(
    client: &reqwest::Client,
    config: &HttpModelConfig,
    api_key: Option<&str>,
    url: &str,
    body: &str,
) -> Result<DeltaStream, Failure<DeltaStream>> {
    let fail = |error: ModelError| Failure { error, fallback: None };
    let request = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .body(body.to_owned());
    let mut request = config.format.headers(request, api_key);
    for (name, value) in &config.extra_headers {
        request = request.header(name, value);
    }
    let started = Instant::now();
    let deadline = later(started, config.response_timeout);
    let headers_at = later(started, config.headers_timeout).min(deadline);
    let response = match tokio::time::timeout_at(headers_at, request.send()).await {
        Err(_) if headers_at == deadline => {
            let error = ProviderError::ResponseTimeout {
                limit: config.response_timeout,
            };
            return Err(fail(error.into()));
        }
        Err(_) => {
            let message = format!(
                "no response from {url} within {} s",
                config.headers_timeout.as_secs_f64()
            );
            return Err(fail(ModelError::transport(message)));
        }
        Ok(Err(err)) => {
            let message = format!("request to {url} failed: {}", error_chain(&err));
            // Connection refused or reset, timeouts: the request may never have reached the provider. A
            // request the client could not even build (a bad URL) fails the same way on every attempt.
            let kind = if err.is_builder() {
                ModelErrorKind::Other
            } else {
                ModelErrorKind::Transport
            };
            return Err(fail(ModelError::with_kind(kind, message).with_source(err)));
        }
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    // Error bodies are read for at most one idle period (and never past the deadline).
    let body_read_until = later(Instant::now(), config.idle_timeout).min(deadline);
    if status.is_redirection() {
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .map_or_else(|| "(no location)".to_owned(), |value| quoted(value.as_bytes()));
        let error = ProviderError::Redirect {
            status: status.as_u16(),
            location,
        };
        return Err(fail(error.into()));
    }
    if !status.is_success() {
        let hint = retry_hint(response.headers(), SystemTime::now());
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .map(|value| format!(" (retry after {})", quoted(value.as_bytes())))
            .unwrap_or_default();
        let body = read_limited(response, body_read_until).await;
        let message = format!("{}{retry_after}", provider_message(&body));
        let error = ProviderError::Http {
            status: status.as_u16(),
            url: url.to_owned(),
            message: format!("{} {message}", status.canonical_reason().unwrap_or(""))
                .trim()
                .to_owned(),
            retry_after: hint,
        };
        return Err(fail(error.into()));
    }
    if !content_type.is_empty() && !content_type.starts_with("text/event-stream") {
        let body = read_limited(response, body_read_until).await;
        let message = format!(
            "{url} answered {content_type} instead of an SSE stream: {}",
            provider_message(&body)
        );
        return Err(fail(ModelError::with_kind(ModelErrorKind::Protocol, message)));
    }
    let bytes = futures::stream::unfold(Some(response), |response| async move {
        let mut response = response?;
        match response.chunk().await {
            Ok(Some(chunk)) => Some((Ok(chunk), Some(response))),
            Ok(None) => None,
            Err(err) => Some((Err(error_chain(&err)), None)),
        }
    });
    let events = timed_events(sse_events(bytes), config.idle_timeout, config.response_timeout, started);
    first_delta(SseDeltas::new(events, config.format.converter(&config.convert)).boxed()).await
}

/// Reads `stream` up to its first event after `start`. When that is an `error` of a [retryable](retryable) kind (an
/// event the provider typed as overloaded, a connection dropped before any content), the attempt failed before its
/// first delta and may be retried; the stream read so far is the fallback, so the last attempt still ends as a
/// stored failed response (contract §2.12). Otherwise the stream is handed back whole.
async fn first_delta(mut stream: DeltaStream) -> Result<DeltaStream, Failure<DeltaStream>> {
    let mut read = Vec::new();
    let transient = loop {
        match stream.next().await {
            Some(Ok(event @ DeltaEvent::Start { .. })) => read.push(Ok(event)),
            Some(Ok(event)) => {
                let transient = match &event {
                    DeltaEvent::Error {
                        message,
                        kind: Some(kind),
                        ..
                    } if retryable(*kind) => Some(ModelError::with_kind(*kind, message.clone())),
                    _ => None,
                };
                read.push(Ok(event));
                break transient;
            }
            Some(Err(error)) => {
                read.push(Err(error));
                break None;
            }
            None => break None,
        }
    };
    let replayed = futures::stream::iter(read).chain(stream).boxed();
    match transient {
        None => Ok(replayed),
        Some(error) => Err(Failure {
            error,
            fallback: Some(replayed),
        }),
    }
}
