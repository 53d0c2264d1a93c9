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

mod hint;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::time::Duration;

use headstart_core::{ModelError, ModelErrorKind};

pub use hint::{retry_hint, HINT_CEILING};

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

/// Whether another attempt may succeed after a failure of `kind` ([`ModelErrorKind::is_transient`]): transport
/// failures, transient provider errors and the HTTP statuses of [`retryable_status`]. The retry policy decides on
/// this alone.
pub fn retryable(kind: ModelErrorKind) -> bool {
    kind.is_transient()
}

/// How long the server asked to wait before another attempt, if it said.
fn server_wait(kind: ModelErrorKind) -> Option<Duration> {
    match kind {
        ModelErrorKind::Http { retry_after, .. } => retry_after,
        _ => None,
    }
}

/// Whether an HTTP status is worth retrying: 408 (timeout), 409 (lock conflict), 429 (rate limit), 5xx (including
/// Anthropic's 529 "overloaded"); [`headstart_core::model_error::is_transient_status`].
pub fn retryable_status(status: u16) -> bool {
    headstart_core::model_error::is_transient_status(status)
}
