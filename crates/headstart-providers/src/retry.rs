//! Retrying a request that failed before its first delta (contract §3.6.6).
//!
//! A failed attempt produced nothing the engine saw, so trying again is invisible to the transcript. What is
//! retried is decided on the failure's [`ModelErrorKind`] alone ([`retryable`]), never on its message: transport
//! failures (connection failures, no headers or no event in time), HTTP 408, 409, 429 and 5xx, and a stream whose
//! first event after `start` is an error the provider typed as transient (overloaded, rate-limited, failed on its
//! side) or a dropped connection. The wait is the server's hint when it gives one (`retry-after-ms`, `Retry-After`
//! in seconds or as an HTTP date, the OpenAI and Anthropic rate-limit reset headers; carried by
//! [`ModelErrorKind::Http`]), else exponential backoff with jitter, as the official SDKs do.
//!
//! Header values are hostile input: a hint is parsed without panicking whatever it says (`1e20`, `NaN`, `-1`, a
//! date in the year 9999, a 20-digit duration), negative and unreadable hints are ignored, and every hint is capped
//! at [`HINT_CEILING`]. A hint longer than [`RetryPolicy::max_hint`] means "don't retry".

use std::future::Future;
use std::time::{Duration, SystemTime};

use headstart_core::{ModelError, ModelErrorKind};
use reqwest::header::HeaderMap;

/// How many times, and how patiently, a failed request is tried again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (default 2, as the OpenAI and Anthropic SDKs).
    pub max_retries: u32,
    /// The backoff before the first retry; it doubles for each further one (default 0.5 s).
    pub initial_backoff: Duration,
    /// The backoff never exceeds this (default 8 s).
    pub max_backoff: Duration,
    /// The longest server hint that is waited for (default 60 s). **A longer hint means "don't retry"**: the
    /// request fails at once with the provider's message and the wait it asked for. A hint of an hour means "not
    /// now"; waiting that long would hang the run, and retrying sooner would go against the server's word (and
    /// spend the rate limit it protects).
    pub max_hint: Duration,
}

/// Every server hint is capped at one day: a larger one (`retry-after: 1e20`) is read as one day, so no caller
/// ever computes with an absurd duration.
pub const HINT_CEILING: Duration = Duration::from_secs(86_400);

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_hint: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `retry` (0 for the first): the server's `hint` when it is given, else the
    /// backoff shortened by up to a quarter by `jitter` (in `[0, 1)`), so that clients that failed together do not
    /// retry together. `None` when the hint is longer than [`max_hint`](Self::max_hint): don't retry.
    pub fn delay(&self, retry: u32, hint: Option<Duration>, jitter: f64) -> Option<Duration> {
        if let Some(hint) = hint {
            return (hint <= self.max_hint).then_some(hint);
        }
        let backoff = self
            .initial_backoff
            .saturating_mul(2u32.saturating_pow(retry.min(16)))
            .min(self.max_backoff);
        let factor = 1.0 - 0.25 * if jitter.is_nan() { 0.0 } else { jitter.clamp(0.0, 1.0) };
        // `mul_f64` panics when the product overflows (a `max_backoff` of `Duration::MAX` rounds up as f64).
        Some(Duration::try_from_secs_f64(backoff.as_secs_f64() * factor).unwrap_or(backoff))
    }
}

/// Why one attempt failed; its kind says whether another may follow.
#[derive(Debug)]
pub(crate) struct Failure<T> {
    /// The error the caller sees if this was the last attempt.
    pub error: ModelError,
    /// What to hand back instead of `error` if this was the last attempt (a stream that failed before its first
    /// delta is still a response: the engine stores it as such, contract §2.12).
    pub fallback: Option<T>,
}

/// Runs `attempt` (given the attempt number, from 0) until it succeeds, fails for good, or `policy` runs out,
/// sleeping (on tokio's clock) between attempts.
pub(crate) async fn with_retries<T, F, Fut>(policy: &RetryPolicy, mut attempt: F) -> Result<T, ModelError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, Failure<T>>>,
{
    let mut number = 0;
    loop {
        let failure = match attempt(number).await {
            Ok(value) => return Ok(value),
            Err(failure) => failure,
        };
        let kind = failure.error.kind();
        let wait = if retryable(kind) && number < policy.max_retries {
            policy.delay(number, server_wait(kind), fastrand::f64())
        } else {
            None
        };
        let Some(wait) = wait else {
            return give_up(policy, failure, number);
        };
        tracing::debug!(attempt = number, error = %failure.error, "retrying the model request");
        tokio::time::sleep(wait).await;
        number += 1;
    }
}

/// The outcome of a last attempt (number `number`, from 0): its fallback, or its error saying why it was the last.
fn give_up<T>(policy: &RetryPolicy, failure: Failure<T>, number: u32) -> Result<T, ModelError> {
    if let Some(fallback) = failure.fallback {
        return Ok(fallback);
    }
    let mut notes = Vec::new();
    let kind = failure.error.kind();
    match server_wait(kind) {
        Some(hint) if retryable(kind) && number < policy.max_retries && hint > policy.max_hint => {
            notes.push(format!(
                "not retried: the provider asked to wait {} s, longer than the {} s a retry waits at most",
                hint.as_secs_f64(),
                policy.max_hint.as_secs_f64()
            ));
        }
        _ => {}
    }
    if number > 0 {
        notes.push(format!("gave up after {} attempts", number + 1));
    }
    if notes.is_empty() {
        return Err(failure.error);
    }
    let message = format!("{} ({})", failure.error, notes.join("; "));
    Err(failure.error.with_message(message))
}

/// Whether another attempt may succeed after a failure of `kind`: transport failures, transient provider errors
/// and the HTTP statuses of [`retryable_status`]. The retry policy decides on this alone.
pub fn retryable(kind: ModelErrorKind) -> bool {
    match kind {
        ModelErrorKind::Transport | ModelErrorKind::Overloaded => true,
        ModelErrorKind::Http { status, .. } => retryable_status(status),
        // Deadline (the caller's own limit), Provider, Protocol, Aborted, Other, and kinds added later.
        _ => false,
    }
}

/// How long the server asked to wait before another attempt, if it said.
fn server_wait(kind: ModelErrorKind) -> Option<Duration> {
    match kind {
        ModelErrorKind::Http { retry_after, .. } => retry_after,
        _ => None,
    }
}

/// Whether an HTTP status is worth retrying: 408 (timeout), 409 (lock conflict), 429 (rate limit), 5xx (including
/// Anthropic's 529 "overloaded").
pub fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// How long the server asked to wait, from its headers: `retry-after-ms` (OpenAI), `Retry-After` (seconds or an
/// HTTP date), else the latest of the rate-limit reset headers (OpenAI durations like `6m0s`, Anthropic RFC 3339
/// times). `now` is the wall clock the dates are measured against.
///
/// Never panics; see the module docs for how odd values are read. The result is at most [`HINT_CEILING`].
pub fn retry_hint(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    server_hint(headers, now).map(|hint| hint.min(HINT_CEILING))
}

fn server_hint(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|value| value.parse::<f64>().ok()) {
        if let Some(hint) = seconds(ms / 1000.0) {
            return Some(hint);
        }
    }
    if let Some(value) = header("retry-after") {
        if let Some(hint) = value.parse::<f64>().ok().and_then(seconds) {
            return Some(hint);
        }
        if let Ok(at) = httpdate::parse_http_date(value) {
            return Some(at.duration_since(now).unwrap_or_default());
        }
    }
    let openai = ["x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"]
        .into_iter()
        .filter_map(|name| header(name).and_then(go_duration));
    let anthropic = [
        "anthropic-ratelimit-requests-reset",
        "anthropic-ratelimit-tokens-reset",
        "anthropic-ratelimit-input-tokens-reset",
        "anthropic-ratelimit-output-tokens-reset",
    ]
    .into_iter()
    .filter_map(|name| header(name).and_then(rfc3339))
    .map(|at| at.duration_since(now).unwrap_or_default());
    openai.chain(anthropic).max()
}

/// A number of seconds as a duration: `None` for NaN and negative values (an unreadable hint), [`HINT_CEILING`]
/// for anything larger, infinity included.
fn seconds(value: f64) -> Option<Duration> {
    if value.is_nan() || value < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(value).map_or(HINT_CEILING, |hint| hint.min(HINT_CEILING)))
}

/// A duration as OpenAI's rate-limit headers write it: `20ms`, `1s`, `1.5s`, `6m0s`, `1h2m3s`.
fn go_duration(text: &str) -> Option<Duration> {
    let mut total = 0.0;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ms" => number / 1000.0,
            "s" => number,
            "m" => number * 60.0,
            "h" => number * 3600.0,
            _ => return None,
        };
        total += seconds;
        rest = &rest[unit_len..];
    }
    seconds(total)
}

/// An RFC 3339 UTC time as Anthropic's reset headers write it (`2026-12-01T02:00:30Z`, fractions ignored).
fn rfc3339(text: &str) -> Option<SystemTime> {
    let text = text.strip_suffix('Z').or_else(|| text.strip_suffix("+00:00"))?;
    let (date, time) = text.split_once('T')?;
    let mut date = date.splitn(3, '-').map(str::parse::<i64>);
    let (year, month, day) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let time = time.split('.').next()?;
    let mut time = time.splitn(3, ':').map(str::parse::<i64>);
    let (hour, minute, second) = (time.next()?.ok()?, time.next()?.ok()?, time.next()?.ok()?);
    // RFC 3339 years have four digits; the bounds also keep the arithmetic below far from overflowing.
    if !(0..=9999).contains(&year)
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || !(0..=23).contains(&hour)
        || !(0..=59).contains(&minute)
        || !(0..=60).contains(&second)
    {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm): no date library for one header.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second;
    let seconds = u64::try_from(seconds).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use proptest::prelude::*;
    use reqwest::header::HeaderValue;

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
}
