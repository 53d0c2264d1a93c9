//! A small client of a Restate server's ingress and admin APIs: register a deployment, submit a prompt to a
//! session, wait for its turn's report. Every ordinary failure is a [`RestateError`] that says what to do.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;

use crate::admin::{self, TurnStatus};
use crate::journal::TurnReport;
use crate::session::TurnRequest;

/// How long one request to the server may take before it is given up (a turn's report is awaited separately, for
/// as long as the caller asks).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The most bytes of a response read: the server's answers are small; a bigger one is not the server.
const MAX_RESPONSE: usize = 16 * 1024 * 1024;

/// Why a request to Restate failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RestateError {
    /// Nothing answers at the address.
    #[error("no Restate server answers at {url}: {reason} (start `restate-server`, or check the address)")]
    Unreachable {
        /// The URL asked.
        url: String,
        /// What the connection said.
        reason: String,
    },
    /// The server does not know the `Session` service: no deployment was registered.
    #[error(
        "the Restate server at {url} has no `Session` service: register a deployment first \
         (`headstart restate register --admin ADMIN_URL DEPLOYMENT_URL`)"
    )]
    NotRegistered {
        /// The ingress URL.
        url: String,
    },
    /// This session already had a turn submitted under the same idempotency key.
    #[error(
        "session {session} was already submitted (its turn is {invocation}); attach to it instead of submitting again"
    )]
    SubmittedTwice {
        /// The session.
        session: String,
        /// The invocation of the earlier submission.
        invocation: String,
    },
    /// The server answered with an error.
    #[error("Restate answered {status} to {what}: {body}")]
    Refused {
        /// What was asked.
        what: String,
        /// The HTTP status.
        status: u16,
        /// The answer's body (cut to 2,000 bytes).
        body: String,
    },
    /// The answer could not be read.
    #[error("Restate's answer to {what} could not be read: {reason}")]
    BadAnswer {
        /// What was asked.
        what: String,
        /// Why.
        reason: String,
    },
}

/// A new session id: a UUIDv7, as the stores make theirs (time-ordered, so listings stay in creation order).
pub fn new_session_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A client of one Restate server: its ingress (`http://127.0.0.1:8080`) and, for registration, its admin API
/// (`http://127.0.0.1:9070`).
#[derive(Clone)]
pub struct RestateClient {
    http: Client<HttpConnector, Full<Bytes>>,
    /// The server's URL this client asks: its ingress, or for [`RestateClient::register`] its admin API.
    base: String,
}

impl std::fmt::Debug for RestateClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestateClient").field("base", &self.base).finish()
    }
}

/// What `…/send` answers.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Sent {
    invocation_id: String,
    status: String,
}

impl RestateClient {
    /// A client of the ingress at `ingress` (a trailing `/` is ignored).
    pub fn new(ingress: &str) -> Self {
        RestateClient {
            http: Client::builder(TokioExecutor::new()).build_http(),
            base: ingress.trim_end_matches('/').to_owned(),
        }
    }

    /// Registers the deployment at `deployment` (its URL as the server reaches it) through the admin API at
    /// `admin`, replacing an earlier registration of the same URL.
    pub async fn register(admin: &str, deployment: &str) -> Result<(), RestateError> {
        let admin = RestateClient::new(admin);
        let url = format!("{}/deployments", admin.base);
        let body = serde_json::json!({ "uri": deployment, "force": true }).to_string();
        admin
            .request(
                Method::POST,
                &url,
                Some(body),
                &[],
                "register the deployment",
                Some(REQUEST_TIMEOUT),
            )
            .await
            .map(drop)
    }

    /// Submits `request` as a turn of `session`, once: a second submission under the same `key` is
    /// [`RestateError::SubmittedTwice`]. Returns the turn's invocation id.
    pub async fn submit(&self, session: &str, request: &TurnRequest, key: &str) -> Result<String, RestateError> {
        let url = format!("{}/Session/{}/turn/send", self.base, encode(session));
        let body = serde_json::to_string(request).map_err(|error| RestateError::BadAnswer {
            what: "encode the prompt".into(),
            reason: error.to_string(),
        })?;
        let answer = self
            .request(
                Method::POST,
                &url,
                Some(body),
                &[("idempotency-key", key)],
                "submit a turn",
                Some(REQUEST_TIMEOUT),
            )
            .await?;
        let sent: Sent = read_json(&answer, "submit a turn")?;
        if sent.status == "PreviouslyAccepted" {
            return Err(RestateError::SubmittedTwice {
                session: session.to_owned(),
                invocation: sent.invocation_id,
            });
        }
        Ok(sent.invocation_id)
    }

    /// The turns the server knows of `session` (every session's when `None`), oldest first: a client of the admin
    /// API (`RestateClient::new("http://127.0.0.1:9070")`) asks its SQL introspection. A server keeps a finished
    /// turn as long as its idempotency key is retained (a day by default), so older turns are not listed. A turn not
    /// completed carries the `Tools` calls it issued whose attempts fail ([`TurnStatus::failing_calls`]).
    pub async fn turns(&self, session: Option<&str>) -> Result<Vec<TurnStatus>, RestateError> {
        let rows: admin::Rows = self
            .query(&admin::turns_query(session), "list the sessions' turns")
            .await?;
        let mut turns = rows.into_turns();
        if turns.iter().any(|turn| turn.status != "completed") {
            let calls: admin::CallRows = self
                .query(admin::FAILING_CALLS_QUERY, "list the calls the turns wait on")
                .await?;
            calls.attach_to(&mut turns);
        }
        Ok(turns)
    }

    /// The rows the admin API's SQL introspection answers `sql` with (`what` names the question in errors).
    async fn query<T: serde::de::DeserializeOwned>(&self, sql: &str, what: &str) -> Result<T, RestateError> {
        let url = format!("{}/query", self.base);
        let body = serde_json::json!({ "query": sql }).to_string();
        let answer = self
            .request(
                Method::POST,
                &url,
                Some(body),
                &[("accept", "application/json")],
                what,
                Some(REQUEST_TIMEOUT),
            )
            .await?;
        read_json(&answer, what)
    }

    /// Waits for the turn `invocation` to end and returns its report.
    pub async fn attach(&self, invocation: &str) -> Result<TurnReport, RestateError> {
        let url = format!("{}/restate/invocation/{}/attach", self.base, encode(invocation));
        // A turn takes as long as it takes: no bound but the caller's.
        let answer = self
            .request(Method::GET, &url, None, &[], "wait for a turn", None)
            .await?;
        read_json(&answer, "wait for a turn")
    }

    async fn request(
        &self,
        method: Method,
        url: &str,
        body: Option<String>,
        headers: &[(&str, &str)],
        what: &str,
        timeout: Option<Duration>,
    ) -> Result<Bytes, RestateError> {
        let mut builder = Request::builder().method(method).uri(url);
        if body.is_some() {
            builder = builder.header("content-type", "application/json");
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = builder
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|error| RestateError::BadAnswer {
                what: what.into(),
                reason: format!("bad URL {url}: {error}"),
            })?;
        let unreachable = |reason: String| RestateError::Unreachable {
            url: url.to_owned(),
            reason,
        };
        let response = match timeout {
            None => self.http.request(request).await,
            Some(limit) => tokio::time::timeout(limit, self.http.request(request))
                .await
                .map_err(|_| unreachable(format!("no answer within {}s", limit.as_secs())))?,
        }
        .map_err(|error| unreachable(connect_reason(&error)))?;
        let status = response.status();
        let limited = http_body_util::Limited::new(response.into_body(), MAX_RESPONSE);
        let bytes = limited
            .collect()
            .await
            .map_err(|error| RestateError::BadAnswer {
                what: what.into(),
                reason: error.to_string(),
            })?
            .to_bytes();
        if status.is_success() {
            return Ok(bytes);
        }
        let text = String::from_utf8_lossy(&bytes);
        if status == StatusCode::NOT_FOUND && url.contains("/Session/") && text.contains("ervice") {
            return Err(RestateError::NotRegistered { url: self.base.clone() });
        }
        Err(RestateError::Refused {
            what: what.into(),
            status: status.as_u16(),
            body: text.chars().take(2_000).collect(),
        })
    }
}

/// The innermost cause of a failed request: "Connection refused", not hyper's outer wrapper.
fn connect_reason(error: &hyper_util::client::legacy::Error) -> String {
    let mut source: &dyn std::error::Error = error;
    while let Some(next) = source.source() {
        source = next;
    }
    source.to_string()
}

fn read_json<T: serde::de::DeserializeOwned>(bytes: &Bytes, what: &str) -> Result<T, RestateError> {
    serde_json::from_slice(bytes).map_err(|error| RestateError::BadAnswer {
        what: what.into(),
        reason: format!(
            "{error}: {}",
            String::from_utf8_lossy(bytes).chars().take(500).collect::<String>()
        ),
    })
}

/// A path segment, percent-encoded where it is not a plain id character.
fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(encode("0193-ab_c.d~"), "0193-ab_c.d~");
        assert_eq!(encode("a/b c"), "a%2Fb%20c");
    }

    #[tokio::test]
    async fn a_dead_address_is_unreachable_with_the_url() {
        // Port 9 (discard) on loopback: nothing listens there in a test environment.
        let client = RestateClient::new("http://127.0.0.1:9");
        let error = client
            .submit("s", &TurnRequest::default(), "k")
            .await
            .expect_err("nothing listens");
        assert!(matches!(error, RestateError::Unreachable { .. }), "{error}");
        assert!(error.to_string().contains("127.0.0.1:9"), "{error}");
    }
}
