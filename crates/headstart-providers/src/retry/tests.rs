use std::sync::atomic::{AtomicU32, Ordering};

use proptest::prelude::*;
use std::time::SystemTime;

use reqwest::header::{HeaderMap, HeaderValue};

use super::hint::{go_duration, rfc3339};
use super::*;

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

/// A failed attempt of `kind`, always with the same message: only the kind may decide.
fn failure<T>(kind: ModelErrorKind) -> Failure<T> {
    Failure {
        error: ModelError::with_kind(kind, "HTTP 503: overloaded"),
        fallback: None,
    }
}

/// An HTTP 503 asking to wait `hint`.
fn unavailable(hint: Option<Duration>) -> ModelErrorKind {
    ModelErrorKind::Http {
        status: 503,
        retry_after: hint,
    }
}

#[test]
fn hints_come_from_the_headers() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_554_400); // 2025-12-01T02:00:00Z
    let hint = |pairs| retry_hint(&headers(pairs), now);
    assert_eq!(hint(&[("retry-after", "1")]), Some(Duration::from_secs(1)));
    assert_eq!(
        hint(&[("retry-after-ms", "250"), ("retry-after", "9")]),
        Some(Duration::from_millis(250))
    );
    assert_eq!(
        hint(&[("retry-after", "Mon, 01 Dec 2025 02:00:07 GMT")]),
        Some(Duration::from_secs(7))
    );
    assert_eq!(
        hint(&[("retry-after", "Mon, 01 Dec 2025 01:00:00 GMT")]),
        Some(Duration::ZERO)
    );
    assert_eq!(
        hint(&[
            ("x-ratelimit-reset-requests", "1.5s"),
            ("x-ratelimit-reset-tokens", "6m0s")
        ]),
        Some(Duration::from_secs(360))
    );
    assert_eq!(
        hint(&[("anthropic-ratelimit-requests-reset", "2025-12-01T02:00:30Z")]),
        Some(Duration::from_secs(30))
    );
    assert_eq!(hint(&[("retry-after", "soon")]), None);
    assert_eq!(hint(&[]), None);
}

#[test]
fn durations_and_times_parse_strictly() {
    assert_eq!(go_duration("20ms"), Some(Duration::from_millis(20)));
    assert_eq!(go_duration("1h2m3s"), Some(Duration::from_secs(3723)));
    assert_eq!(go_duration("3 days"), None);
    assert_eq!(go_duration(""), None);
    assert_eq!(
        rfc3339("1970-01-02T00:00:00Z"),
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(86_400))
    );
    assert_eq!(rfc3339("2025-13-01T00:00:00Z"), None);
    assert_eq!(rfc3339("2025-12-01T00:00:00+02:00"), None);
}

#[test]
fn backoff_doubles_up_to_its_cap_and_jitter_only_shortens_it() {
    let policy = RetryPolicy::default();
    assert_eq!(policy.delay(0, None, 0.0), Some(Duration::from_millis(500)));
    assert_eq!(policy.delay(1, None, 0.0), Some(Duration::from_secs(1)));
    assert_eq!(policy.delay(10, None, 0.0), Some(Duration::from_secs(8)));
    assert_eq!(policy.delay(0, None, 1.0), Some(Duration::from_millis(375)));
    assert_eq!(
        policy.delay(0, Some(Duration::from_secs(3)), 0.5),
        Some(Duration::from_secs(3))
    );
    assert_eq!(
        policy.delay(0, Some(Duration::from_secs(60)), 0.0),
        Some(Duration::from_secs(60))
    );
    // A hint beyond `max_hint` means "don't retry".
    assert_eq!(policy.delay(0, Some(Duration::from_secs(61)), 0.0), None);
    // Extreme policies neither panic nor overflow.
    let extreme = RetryPolicy {
        max_retries: u32::MAX,
        initial_backoff: Duration::MAX,
        max_backoff: Duration::MAX,
        max_hint: Duration::MAX,
    };
    assert_eq!(extreme.delay(u32::MAX, None, 0.0), Some(Duration::MAX));
    assert!(extreme.delay(3, None, f64::NAN).is_some());
}

#[test]
fn absurd_hints_are_capped_or_ignored_without_panicking() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_554_400);
    let hint = |pairs| retry_hint(&headers(pairs), now);
    assert_eq!(hint(&[("retry-after", "1e20")]), Some(HINT_CEILING));
    assert_eq!(hint(&[("retry-after", "inf")]), Some(HINT_CEILING));
    assert_eq!(hint(&[("retry-after-ms", "1e300")]), Some(HINT_CEILING));
    assert_eq!(
        hint(&[("x-ratelimit-reset-tokens", "99999999999999999999s")]),
        Some(HINT_CEILING)
    );
    assert_eq!(
        hint(&[("x-ratelimit-reset-tokens", "99999999999999999999h")]),
        Some(HINT_CEILING)
    );
    assert_eq!(
        hint(&[("anthropic-ratelimit-tokens-reset", "9999-12-31T23:59:59Z")]),
        Some(HINT_CEILING)
    );
    assert_eq!(
        hint(&[("anthropic-ratelimit-tokens-reset", "99999999999999999-12-31T23:59:59Z")]),
        None
    );
    assert_eq!(
        hint(&[("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT")]),
        Some(HINT_CEILING)
    );
    // NaN and negative values are unreadable: the next header (or none) decides.
    assert_eq!(hint(&[("retry-after", "NaN")]), None);
    assert_eq!(
        hint(&[("retry-after-ms", "-5"), ("retry-after", "2")]),
        Some(Duration::from_secs(2))
    );
    assert_eq!(hint(&[("retry-after", "-1")]), None);
}

#[tokio::test(start_paused = true)]
async fn a_hint_beyond_the_maximum_is_not_waited_for_and_not_retried() {
    let attempts = AtomicU32::new(0);
    let started = tokio::time::Instant::now();
    let result = with_retries(&RetryPolicy::default(), |_| {
        attempts.fetch_add(1, Ordering::SeqCst);
        async { Err::<&str, _>(failure(unavailable(Some(HINT_CEILING)))) }
    })
    .await;
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert_eq!(started.elapsed(), Duration::ZERO);
    let error = result.unwrap_err();
    assert_eq!(
        error.kind(),
        unavailable(Some(HINT_CEILING)),
        "the kind survives the note"
    );
    let message = error.message();
    assert!(
        message.contains("HTTP 503: overloaded")
            && message.contains("not retried: the provider asked to wait 86400 s, longer than the 60 s"),
        "{message}"
    );
}

fn header_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        any::<f64>().prop_map(|x| x.to_string()),
        any::<f64>().prop_map(|x| format!("{x:e}")),
        any::<u128>().prop_map(|x| x.to_string()),
        "[-+]?[0-9]{0,40}(\\.[0-9]{0,40})?(e[-+]?[0-9]{1,4})?",
        "(-?[0-9.]{0,25}(ms|s|m|h|d|)){1,6}",
        "[-+]?[0-9]{1,20}-[-+]?[0-9]{1,20}-[0-9]{1,20}T[-+]?[0-9]{1,20}:[0-9]{1,20}:[0-9]{1,20}(\\.[0-9]{0,12})?(Z|\\+00:00)",
        "(Mon|Fri|Sun), [0-9]{1,3} (Jan|Dec|Foo) [0-9]{1,12} [0-9]{1,3}:[0-9]{1,3}:[0-9]{1,3} GMT",
        Just("NaN".to_owned()),
        Just("inf".to_owned()),
        Just("-inf".to_owned()),
        Just("1e20".to_owned()),
        Just("1e300".to_owned()),
    ]
}

const HINT_HEADERS: [&str; 8] = [
    "retry-after-ms",
    "retry-after",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-reset",
    "anthropic-ratelimit-output-tokens-reset",
];

proptest! {
    /// Whatever the headers say, reading the hint and deciding on the retry do not panic, the hint stays under
    /// the ceiling, and a retry never waits longer than the policy allows.
    #[test]
    fn no_header_value_panics_the_hint_or_the_retry_decision(
        values in proptest::collection::vec((0..HINT_HEADERS.len(), header_value()), 0..6),
        now_secs in any::<u64>(),
        retry in any::<u32>(),
        jitter in any::<f64>(),
        max_hint_secs in prop_oneof![Just(u64::MAX), 0..100_000u64],
    ) {
        let mut map = HeaderMap::new();
        for (index, value) in &values {
            if let Ok(value) = HeaderValue::from_bytes(value.as_bytes()) {
                map.append(HINT_HEADERS[*index], value);
            }
        }
        let now = SystemTime::UNIX_EPOCH
            .checked_add(Duration::from_secs(now_secs))
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let hint = retry_hint(&map, now);
        prop_assert!(hint.is_none_or(|hint| hint <= HINT_CEILING));
        let policy = RetryPolicy { max_hint: Duration::from_secs(max_hint_secs), ..RetryPolicy::default() };
        match policy.delay(retry, hint, jitter) {
            Some(wait) => prop_assert!(wait <= policy.max_hint.max(policy.max_backoff)),
            None => prop_assert!(hint.is_some_and(|hint| hint > policy.max_hint)),
        }
        let error = give_up(&policy, failure::<()>(unavailable(hint)), 0).unwrap_err();
        prop_assert!(error.message().starts_with("HTTP 503: overloaded"));
    }
}

#[test]
fn statuses_are_classified() {
    for status in [408, 409, 429, 500, 502, 503, 529] {
        assert!(retryable_status(status), "{status}");
    }
    for status in [301, 400, 401, 403, 404, 422] {
        assert!(!retryable_status(status), "{status}");
    }
}

/// Runs [`with_retries`] with the default policy over attempts that all fail with `kind`; returns the number of
/// attempts and the time waited on tokio's clock.
async fn attempts_for(kind: ModelErrorKind) -> (u32, Duration) {
    let attempts = AtomicU32::new(0);
    let started = tokio::time::Instant::now();
    let result = with_retries(&RetryPolicy::default(), |_| {
        attempts.fetch_add(1, Ordering::SeqCst);
        async move { Err::<(), _>(failure(kind)) }
    })
    .await;
    assert_eq!(result.unwrap_err().kind(), kind);
    (attempts.load(Ordering::SeqCst), started.elapsed())
}

/// The default backoff waits before two retries: 0.5 s and 1 s, each shortened by up to a quarter.
fn backed_off(waited: Duration) -> bool {
    waited >= Duration::from_millis(1125) && waited <= Duration::from_millis(1500)
}

#[tokio::test(start_paused = true)]
async fn transport_failures_are_retried_with_backoff() {
    let (attempts, waited) = attempts_for(ModelErrorKind::Transport).await;
    assert_eq!(attempts, 3);
    assert!(backed_off(waited), "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn overloaded_providers_are_retried_with_backoff() {
    let (attempts, waited) = attempts_for(ModelErrorKind::Overloaded).await;
    assert_eq!(attempts, 3);
    assert!(backed_off(waited), "{waited:?}");
}

#[tokio::test(start_paused = true)]
async fn retryable_statuses_are_retried_and_their_retry_after_is_honoured() {
    let (attempts, waited) = attempts_for(unavailable(None)).await;
    assert_eq!(attempts, 3);
    assert!(backed_off(waited), "{waited:?}");
    let rate_limited = ModelErrorKind::Http {
        status: 429,
        retry_after: Some(Duration::from_secs(7)),
    };
    assert_eq!(
        attempts_for(rate_limited).await,
        (3, Duration::from_secs(14)),
        "two waits of the 7 s asked for, no jitter"
    );
}

#[tokio::test(start_paused = true)]
async fn other_statuses_are_not_retried_whatever_they_ask() {
    for status in [301, 400, 401, 404, 422] {
        let kind = ModelErrorKind::Http {
            status,
            retry_after: Some(Duration::from_secs(1)),
        };
        assert_eq!(attempts_for(kind).await, (1, Duration::ZERO), "{status}");
    }
}

#[tokio::test(start_paused = true)]
async fn deadlines_provider_errors_protocol_errors_aborts_and_others_are_not_retried() {
    for kind in [
        ModelErrorKind::Deadline,
        ModelErrorKind::Provider,
        ModelErrorKind::Protocol,
        ModelErrorKind::Aborted,
        ModelErrorKind::Other,
    ] {
        assert_eq!(attempts_for(kind).await, (1, Duration::ZERO), "{kind:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_message_text_decides_nothing() {
    let attempts = AtomicU32::new(0);
    let result = with_retries(&RetryPolicy::default(), |_| {
        attempts.fetch_add(1, Ordering::SeqCst);
        async {
            let text = "overloaded_error: connection error, timed out, rate limit";
            Err::<(), _>(Failure {
                error: ModelError::with_kind(ModelErrorKind::Provider, text),
                fallback: None,
            })
        }
    })
    .await;
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert_eq!(result.unwrap_err().kind(), ModelErrorKind::Provider);
}

#[tokio::test(start_paused = true)]
async fn retries_wait_for_the_hint_and_stop_at_the_budget() {
    let attempts = AtomicU32::new(0);
    let started = tokio::time::Instant::now();
    let result = with_retries(&RetryPolicy::default(), |_| {
        attempts.fetch_add(1, Ordering::SeqCst);
        async { Err::<&str, _>(failure(unavailable(Some(Duration::from_secs(1))))) }
    })
    .await;
    assert_eq!(attempts.load(Ordering::SeqCst), 3, "one attempt and two retries");
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(2),
        "two waits of the hinted second"
    );
    let message = result.unwrap_err().into_message();
    assert!(
        message.contains("HTTP 503: overloaded") && message.contains("3 attempts"),
        "{message}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_success_after_a_failure_is_returned() {
    let started = tokio::time::Instant::now();
    let result = with_retries(&RetryPolicy::default(), |number| async move {
        if number == 0 {
            Err(failure(ModelErrorKind::Transport))
        } else {
            Ok(number)
        }
    })
    .await;
    assert_eq!(result.unwrap(), 1);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(375) && waited <= Duration::from_millis(500),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn permanent_failures_and_fallbacks_end_at_once() {
    let attempts = AtomicU32::new(0);
    let result = with_retries(&RetryPolicy::default(), |_| {
        attempts.fetch_add(1, Ordering::SeqCst);
        async { Err::<&str, _>(failure(ModelErrorKind::Provider)) }
    })
    .await;
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert_eq!(result.unwrap_err().message(), "HTTP 503: overloaded");

    let result = with_retries(&RetryPolicy::none(), |_| async {
        Err(Failure {
            fallback: Some("the failed stream"),
            ..failure(ModelErrorKind::Overloaded)
        })
    })
    .await;
    assert_eq!(result.unwrap(), "the failed stream");
}
