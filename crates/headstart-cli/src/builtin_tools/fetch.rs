//! `fetch_url`: an HTTP(S) GET that a prompt-injected model cannot turn against the machine or its network.
//!
//! - Every connection goes to an address [`FetchPolicy`] allowed: a URL's literal address is checked before the
//!   request, and a host name is resolved by [`CheckedResolver`], which hands the connector only the allowed
//!   addresses, so the address checked is the address connected to (DNS rebinding cannot swap it). No proxy is
//!   used, since a proxy would resolve the name itself.
//! - Redirects are followed here, not by the client: each one is checked ([`FetchPolicy::check_redirect`]: the same
//!   host and port, at most [`super::fetch_policy::MAX_REDIRECTS`]) and its address too.
//! - The body is read as a stream and kept up to the output limit plus one byte; the rest is never read. The result
//!   says where it was cut.
//! - One deadline ([`FetchLimits::deadline`]) covers everything: connecting, redirects, headers and body.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use headstart::{Arguments, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use reqwest::dns::{Name, Resolve, Resolving};
use reqwest::Url;
use serde_json::json;

use super::arguments::string_argument;
use super::fetch_policy::{FetchPolicy, Refused};
use super::output::{cut_text, MAX_OUTPUT_BYTES};

/// How long one fetch may take in all, by default.
pub const FETCH_DEADLINE: Duration = Duration::from_secs(30);
/// How long connecting to one address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The limits of one fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    /// Connecting, redirects, headers and body, together.
    pub deadline: Duration,
    /// The most body bytes returned; one more is read to know that the body was longer.
    pub max_body: usize,
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits {
            deadline: FETCH_DEADLINE,
            max_body: MAX_OUTPUT_BYTES,
        }
    }
}

/// Why `fetch_url` failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Not a URL.
    #[error("cannot fetch {0:?}: not a valid URL")]
    BadUrl(String),
    /// The policy refused the URL, a redirect, or every address of the host.
    #[error("cannot fetch {url}: {refused}")]
    Refused {
        /// The URL asked for.
        url: String,
        /// Why.
        refused: Refused,
    },
    /// The deadline passed.
    #[error("fetching {url} timed out after {} s (the limit covers connecting, redirects, headers and body)", .after.as_secs_f64())]
    Timeout {
        /// The URL asked for.
        url: String,
        /// The deadline.
        after: Duration,
    },
    /// The call was cancelled.
    #[error("fetching {0} was cancelled")]
    Cancelled(String),
    /// The server answered with an error status.
    #[error("fetching {url} failed: HTTP {status}: {body}")]
    Status {
        /// The URL asked for.
        url: String,
        /// The status.
        status: reqwest::StatusCode,
        /// The start of the body.
        body: String,
    },
    /// The connection or the HTTP exchange failed.
    #[error("fetching {url} failed: {message}")]
    Failed {
        /// The URL asked for.
        url: String,
        /// What happened, with its causes.
        message: String,
    },
}

impl From<FetchError> for ToolError {
    fn from(error: FetchError) -> Self {
        ToolError::new(error.to_string())
    }
}

/// Resolves host names with the system resolver and keeps only the addresses the policy allows; when none is
/// left, the resolution fails with the [`Refused`] of the first.
#[derive(Debug)]
struct CheckedResolver(Arc<FetchPolicy>);

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = Arc::clone(&self.0);
        let host = name.as_str().to_owned();
        Box::pin(async move { resolve_checked(&policy, host).await })
    }
}

async fn resolve_checked(
    policy: &FetchPolicy,
    host: String,
) -> Result<reqwest::dns::Addrs, Box<dyn std::error::Error + Send + Sync>> {
    let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
    let mut refusal = None;
    let allowed: Vec<SocketAddr> = found
        .into_iter()
        .filter(|address| match policy.check_address(&host, address.ip()) {
            Ok(()) => true,
            Err(refused) => {
                refusal.get_or_insert(refused);
                false
            }
        })
        .collect();
    if allowed.is_empty() {
        return Err(Box::new(refusal.unwrap_or(Refused::NoAddress(host))));
    }
    Ok(Box::new(allowed.into_iter()))
}

/// The [`Refused`] somewhere in an error's chain of causes (the resolver's, wrapped by the client).
fn refusal_in(error: &(dyn std::error::Error + 'static)) -> Option<Refused> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(refused) = error.downcast_ref::<Refused>() {
            return Some(refused.clone());
        }
        cause = error.source();
    }
    None
}

/// An error and its causes, joined, since reqwest's own message ("error sending request") hides the reason.
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        let text = error.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = error.source();
    }
    message
}

/// `fetch_url {url}`: an HTTP(S) GET; the body as text.
pub struct FetchUrl {
    client: reqwest::Client,
    policy: Arc<FetchPolicy>,
    limits: FetchLimits,
    spec: ToolSpec,
}

impl FetchUrl {
    /// A fetcher bound by `policy` and `limits`.
    pub fn new(policy: FetchPolicy, limits: FetchLimits) -> Result<Self, reqwest::Error> {
        headstart_providers::http::ensure_crypto_provider();
        let policy = Arc::new(policy);
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(CheckedResolver(Arc::clone(&policy))))
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("headstart/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let mut description = format!(
            "Fetch a web page or API response with HTTP GET and return its body as text (at most {} KiB). Only \
             http and https; redirects only within the same host, at most {}; {} s in all.",
            limits.max_body / 1024,
            super::fetch_policy::MAX_REDIRECTS,
            limits.deadline.as_secs()
        );
        if !policy.allow_private {
            description.push_str(" Private, loopback and link-local addresses are refused.");
        }
        if !policy.allowed_hosts.is_empty() {
            description.push_str(&format!(" Only these hosts: {}.", policy.allowed_hosts.join(", ")));
        }
        Ok(FetchUrl {
            client,
            policy,
            limits,
            spec: ToolSpec::new("fetch_url")
                .description(description)
                .parameters(json!({
                    "type": "object",
                    "properties": {"url": {"type": "string", "description": "e.g. https://example.com"}},
                    "required": ["url"]
                }))
                .early(true)
                .idempotent(true),
        })
    }

    /// The body of `url` after the redirects the policy allows, cut at the limit.
    async fn fetch(&self, url: &str) -> Result<String, FetchError> {
        let refused = |refused| FetchError::Refused {
            url: url.to_owned(),
            refused,
        };
        let failed = |error: &(dyn std::error::Error + 'static)| match refusal_in(error) {
            Some(refusal) => refused(refusal),
            None => FetchError::Failed {
                url: url.to_owned(),
                message: with_causes(error),
            },
        };
        let mut current = Url::parse(url).map_err(|_| FetchError::BadUrl(url.to_owned()))?;
        self.policy.check_url(&current).map_err(refused)?;
        let mut followed = 0;
        let mut response = loop {
            let response = self
                .client
                .get(current.clone())
                .send()
                .await
                .map_err(|error| failed(&error))?;
            let status = response.status();
            if !status.is_redirection() || status == reqwest::StatusCode::NOT_MODIFIED {
                break response;
            }
            let Some(next) = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|location| location.to_str().ok())
                .and_then(|location| current.join(location).ok())
            else {
                break response;
            };
            self.policy.check_redirect(&current, &next, followed).map_err(refused)?;
            followed += 1;
            current = next;
        };
        let status = response.status();
        let mut body = Vec::new();
        while body.len() <= self.limits.max_body {
            match response.chunk().await.map_err(|error| failed(&error))? {
                Some(chunk) => {
                    let room = self.limits.max_body + 1 - body.len();
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                }
                None => break,
            }
        }
        let text = cut_text(body, self.limits.max_body, "body");
        if !status.is_success() {
            return Err(FetchError::Status {
                url: url.to_owned(),
                status,
                body: text,
            });
        }
        Ok(text)
    }
}

#[async_trait]
impl Tool for FetchUrl {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let url = string_argument(&arguments, "url")?;
        let body = tokio::select! {
            fetched = tokio::time::timeout(self.limits.deadline, self.fetch(url)) => {
                fetched.map_err(|_| FetchError::Timeout { url: url.to_owned(), after: self.limits.deadline })?
            }
            () = context.cancel.cancelled() => Err(FetchError::Cancelled(url.to_owned())),
        }?;
        Ok(ToolOutput::text(body))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Instant;

    use headstart_providers::replay_server::{Page, ReplayServer, Route};

    use super::*;
    use crate::builtin_tools::fetch_policy::MAX_REDIRECTS;

    fn private() -> FetchPolicy {
        FetchPolicy {
            allow_private: true,
            ..FetchPolicy::default()
        }
    }

    async fn page_server() -> ReplayServer {
        let pages = HashMap::from([(
            "/page".to_owned(),
            Page {
                delay: Duration::ZERO,
                body: "the page".into(),
            },
        )]);
        ReplayServer::start(Vec::new(), pages, Duration::ZERO).await.unwrap()
    }

    /// `fetch_url {url}` with `policy` and `limits`: the text, or the error's message.
    async fn fetch(policy: FetchPolicy, limits: FetchLimits, url: &str) -> Result<String, String> {
        let tool = FetchUrl::new(policy, limits).unwrap();
        let arguments = json!({ "url": url }).as_object().cloned().unwrap_or_default();
        tool.execute(arguments, ToolContext::detached("c"))
            .await
            .map(|output| output.content.iter().filter_map(|block| block.as_text()).collect())
            .map_err(|error| error.message)
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused_before_any_connection() {
        let server = page_server().await;
        let port = server.address().port();
        let url = format!("http://localhost:{port}/page");
        let error = fetch(FetchPolicy::default(), FetchLimits::default(), &url)
            .await
            .unwrap_err();
        assert!(
            error.starts_with(&format!(
                "cannot fetch {url}: refused: localhost resolves to 127.0.0.1, a loopback"
            )),
            "{error}"
        );
        assert!(server.requests().is_empty());
        // Allowed, the same name reaches the page.
        assert_eq!(
            fetch(private(), FetchLimits::default(), &url).await.unwrap(),
            "the page"
        );
        assert_eq!(server.requests().len(), 1);
    }

    #[tokio::test]
    async fn only_http_urls_are_fetched() {
        for url in ["file:///etc/passwd", "ftp://127.0.0.1/x"] {
            let error = fetch(private(), FetchLimits::default(), url).await.unwrap_err();
            assert!(error.contains("refused: only http and https"), "{error}");
        }
        let error = fetch(private(), FetchLimits::default(), "not a url").await.unwrap_err();
        assert_eq!(error, "cannot fetch \"not a url\": not a valid URL");
    }

    #[tokio::test]
    async fn an_endless_body_is_cut_at_the_limit_without_reading_the_rest() {
        let server = page_server().await;
        server.route(
            "/endless",
            Route::Large {
                bytes: 16 << 30,
                fill: b'a',
            },
        );
        let started = Instant::now();
        let text = fetch(private(), FetchLimits::default(), &server.url("/endless"))
            .await
            .unwrap();
        eprintln!("a 16 GiB body cut after {:?}", started.elapsed());
        let note = format!("\n[body cut at {MAX_OUTPUT_BYTES} bytes]");
        assert!(text.ends_with(&note));
        assert_eq!(text.len(), MAX_OUTPUT_BYTES + note.len());
    }

    #[tokio::test]
    async fn a_trickling_body_ends_at_the_deadline_with_a_clear_message() {
        let server = page_server().await;
        let trickle = Route::Trickle {
            chunk: "x".into(),
            interval: Duration::from_millis(100),
            chunks: 10_000,
        };
        server.route("/trickle", trickle);
        let limits = FetchLimits {
            deadline: Duration::from_secs(1),
            ..FetchLimits::default()
        };
        let url = server.url("/trickle");
        let started = Instant::now();
        let error = fetch(private(), limits, &url).await.unwrap_err();
        let took = started.elapsed();
        eprintln!("the trickle ended after {took:?}");
        assert_eq!(
            error,
            format!("fetching {url} timed out after 1 s (the limit covers connecting, redirects, headers and body)")
        );
        assert!(took < Duration::from_secs(10), "{took:?}");
    }

    #[tokio::test]
    async fn a_cancelled_fetch_returns_promptly() {
        let server = page_server().await;
        server.route(
            "/trickle",
            Route::Trickle {
                chunk: "x".into(),
                interval: Duration::from_secs(60),
                chunks: 10,
            },
        );
        let tool = FetchUrl::new(private(), FetchLimits::default()).unwrap();
        let context = ToolContext::detached("c");
        let cancel = context.cancel.clone();
        let url = server.url("/trickle");
        let arguments = json!({ "url": url }).as_object().cloned().unwrap_or_default();
        let call = tokio::spawn(async move { tool.execute(arguments, context).await });
        while server.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        cancel.cancel();
        let error = tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .expect("returned promptly")
            .unwrap()
            .unwrap_err();
        assert_eq!(error.message, format!("fetching {url} was cancelled"));
    }

    #[tokio::test]
    async fn redirects_are_followed_within_the_host_five_times_at_most() {
        let server = page_server().await;
        let other = page_server().await;
        // /r0 → /r1 → … → /r5 → /page: six redirects; from /r1 on, five.
        for hop in 0..=MAX_REDIRECTS {
            let next = if hop == MAX_REDIRECTS {
                "/page".to_owned()
            } else {
                format!("/r{}", hop + 1)
            };
            server.route(
                format!("/r{hop}"),
                Route::Redirect {
                    status: 302,
                    location: next,
                },
            );
        }
        let limits = FetchLimits::default();
        assert_eq!(fetch(private(), limits, &server.url("/r1")).await.unwrap(), "the page");
        let url = server.url("/r0");
        let error = fetch(private(), limits, &url).await.unwrap_err();
        assert_eq!(
            error,
            format!("cannot fetch {url}: refused: more than {MAX_REDIRECTS} redirects")
        );

        server.route(
            "/away",
            Route::Redirect {
                status: 307,
                location: other.url("/page"),
            },
        );
        let error = fetch(private(), limits, &server.url("/away")).await.unwrap_err();
        assert!(error.contains("refused: a redirect to http://127.0.0.1:"), "{error}");
        assert!(other.requests().is_empty(), "the other port was never reached");

        let error = fetch(private(), limits, &server.url("/missing")).await.unwrap_err();
        assert_eq!(
            error,
            format!(
                "fetching {} failed: HTTP 404 Not Found: not found",
                server.url("/missing")
            )
        );
    }
}
