//! [`redact`]: the one way a connection string is shown.

use percent_encoding::percent_decode_str;

use super::syntax::{pairs, quote, scheme_len};

/// What a redacted password reads as.
pub(super) const HIDDEN: &str = "***";

/// `conn` (a URL or a `key=value` string) with every password replaced by `***`: the user info's password and
/// every parameter whose name contains `password` (`password`, `sslpassword`). A string that cannot be parsed is
/// redacted generously (more is hidden, never less). Every message that shows a connection string shows it
/// through this function.
pub fn redact(conn: &str) -> String {
    match scheme_len(conn) {
        Some(len) => redact_url(&conn[..len], &conn[len..]),
        None => redact_key_value(conn),
    }
}

fn is_secret(key: &str) -> bool {
    key.to_ascii_lowercase().contains("password")
}

fn redact_url(scheme: &str, rest: &str) -> String {
    // The user info ends at the last `@`: a password with an unencoded `@` is hidden whole (tokio-postgres stops
    // at the first, so its password is always inside this span).
    let mut out = scheme.to_owned();
    let after = match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&redact_query(&userinfo[..colon]));
                    out.push(':');
                    out.push_str(HIDDEN);
                }
                None => out.push_str(&redact_query(userinfo)),
            }
            out.push('@');
            &rest[at + 1..]
        }
        None => rest,
    };
    out.push_str(&redact_query(after));
    out
}

/// `segment` with the values of its query's secret parameters (`?password=…&…`) hidden.
fn redact_query(segment: &str) -> String {
    let Some(question) = segment.find('?') else {
        return segment.to_owned();
    };
    let params: Vec<String> = segment[question + 1..]
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((key, _)) if is_secret(&percent_decode_str(key).decode_utf8_lossy()) => format!("{key}={HIDDEN}"),
            _ => param.to_owned(),
        })
        .collect();
    format!("{}?{}", &segment[..question], params.join("&"))
}

fn redact_key_value(conn: &str) -> String {
    let (pairs, unterminated) = pairs(conn);
    let last = pairs.len().saturating_sub(1);
    pairs
        .iter()
        .enumerate()
        .map(|(index, pair)| match &pair.value {
            // A word without `=` may be a stray piece of a password: hide it.
            None => HIDDEN.to_owned(),
            Some(_) if is_secret(&pair.key) || (unterminated && index == last) => format!("{}={HIDDEN}", pair.key),
            Some(value) => format!("{}={}", pair.key, quote(value)),
        })
        .collect::<Vec<_>>()
        .join(" ")
}
