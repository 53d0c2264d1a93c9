//! The token rule. The server binds a loopback address by default; any other address needs a token, and then
//! every request must carry it: an `Authorization: Bearer TOKEN` header, the `headstart_token` cookie, or
//! `?token=TOKEN` in the URL, which the server answers with the cookie and a redirect to the same URL without the
//! token (so that it stays out of the history, and links and the live events carry the cookie instead).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The cookie that carries the token after a `?token=` visit.
pub const COOKIE: &str = "headstart_token";

/// The token every request must carry.
#[derive(Clone)]
pub struct Token(Arc<str>);

impl Token {
    /// The token `text`.
    pub fn new(text: &str) -> Token {
        Token(Arc::from(text))
    }

    /// Whether `offered` is the token, in time that does not depend on where they differ.
    pub fn matches(&self, offered: &str) -> bool {
        same(self.0.as_bytes(), offered.as_bytes())
    }
}

/// Refuses to bind an address other hosts can reach without a token (anyone who reached it would read every
/// transcript), and a token that cannot travel in a URL and a cookie as it is.
pub fn check_bind(addr: SocketAddr, token: Option<&str>) -> Result<(), String> {
    match token {
        Some("") => Err("--token must not be empty".to_owned()),
        Some(token) if !token.chars().all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c)) => {
            Err("--token may hold letters, digits and - . _ ~ only (it travels in a URL and a cookie)".to_owned())
        }
        None if !addr.ip().is_loopback() => Err(format!(
            "{addr} is not a loopback address: serving it needs --token TOKEN (anyone who can reach it could \
             read every transcript); or bind 127.0.0.1"
        )),
        _ => Ok(()),
    }
}

/// Byte strings compared without an early exit: the time taken depends on their lengths only.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The middleware: passes requests that carry the token, redirects a `?token=` visit, refuses the rest (401).
pub async fn require(State(token): State<Token>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if bearer(headers).is_some_and(|offered| token.matches(offered))
        || cookie(headers).is_some_and(|offered| token.matches(offered))
    {
        return next.run(request).await;
    }
    let (offered, rest) = split_token(request.uri());
    match offered {
        Some(offered) if token.matches(&offered) => {
            let cookie = format!("{COOKIE}={offered}; Path=/; HttpOnly; SameSite=Strict");
            let location = match rest {
                Some(query) => format!("{}?{query}", request.uri().path()),
                None => request.uri().path().to_owned(),
            };
            let mut response = StatusCode::SEE_OTHER.into_response();
            if let (Ok(cookie), Ok(location)) = (HeaderValue::from_str(&cookie), HeaderValue::from_str(&location)) {
                response.headers_mut().insert(header::SET_COOKIE, cookie);
                response.headers_mut().insert(header::LOCATION, location);
            }
            response
        }
        _ => (
            StatusCode::UNAUTHORIZED,
            "this server needs its token: open the URL `headstart serve` printed (it ends in ?token=…), or send \
             the header Authorization: Bearer TOKEN\n",
        )
            .into_response(),
    }
}

/// The token of an `Authorization: Bearer TOKEN` header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    value.strip_prefix("Bearer ").map(str::trim)
}

/// The token cookie's value.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// The `token` query parameter, and the rest of the query without it (`None` when nothing is left).
fn split_token(uri: &Uri) -> (Option<String>, Option<String>) {
    let Some(query) = uri.query() else {
        return (None, None);
    };
    let mut token = None;
    let mut rest = form_urlencoded::Serializer::new(String::new());
    let mut kept = 0;
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if key == "token" {
            token = Some(value.into_owned());
        } else {
            rest.append_pair(&key, &value);
            kept += 1;
        }
    }
    (token, (kept > 0).then(|| rest.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_needs_every_byte() {
        assert!(same(b"s3cret", b"s3cret"));
        assert!(!same(b"s3cret", b"s3cres"));
        assert!(!same(b"s3cret", b"s3cre"));
        assert!(same(b"", b""));
    }

    #[test]
    fn other_hosts_need_a_token() {
        let local: SocketAddr = "127.0.0.1:7878".parse().expect("addr");
        let local6: SocketAddr = "[::1]:7878".parse().expect("addr");
        let any: SocketAddr = "0.0.0.0:7878".parse().expect("addr");
        assert_eq!(check_bind(local, None), Ok(()));
        assert_eq!(check_bind(local6, None), Ok(()));
        assert!(check_bind(any, None).is_err_and(|error| error.contains("needs --token")));
        assert_eq!(check_bind(any, Some("t")), Ok(()));
        assert!(check_bind(local, Some("")).is_err());
        assert!(check_bind(any, Some("a;b")).is_err());
        assert_eq!(check_bind(any, Some("Az09-._~")), Ok(()));
    }

    #[test]
    fn the_token_parameter_is_taken_out_of_the_query() {
        let uri: Uri = "/?page=2&token=a%20b&state=running".parse().expect("uri");
        assert_eq!(
            split_token(&uri),
            (Some("a b".to_owned()), Some("page=2&state=running".to_owned()))
        );
        let uri: Uri = "/sessions/x?token=t".parse().expect("uri");
        assert_eq!(split_token(&uri), (Some("t".to_owned()), None));
    }
}
