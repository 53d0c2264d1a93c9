//! The wait a server asks for before a retry, read from its headers. Header values are hostile input: see the
//! [module docs](super) for how odd values are read.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

/// Every server hint is capped at one day: a larger one (`retry-after: 1e20`) is read as one day, so no caller
/// ever computes with an absurd duration.
pub const HINT_CEILING: Duration = Duration::from_secs(86_400);

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
pub(super) fn go_duration(text: &str) -> Option<Duration> {
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
pub(super) fn rfc3339(text: &str) -> Option<SystemTime> {
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
