//! A small client of a Restate server's ingress and admin APIs: register a deployment, submit a prompt to a
//! session, wait for its turn's report. Every ordinary failure is a [`RestateError`] that says what to do.
//!
//! The ingress half is the SDK's: the typed `SessionIngressClient` that restate-sdk's macro generates from the
//! `Session` object submits a turn and attaches to it, over this crate's HTTP/1 client ([`Transport`]). The admin
//! half (registration, the SQL introspection) has no SDK client and stays hand-written.

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use restate_sdk::ingress::{ClientError, RequestExecutor, SendStatus};
use restate_sdk::serde::Json;

use crate::admin::{self, FailingCall, TurnStatus};
use crate::journal::TurnReport;
use crate::session::{SessionIngressClient, TurnRequest};

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
        const WHAT: &str = "submit a turn";
        let turn = SessionIngressClient::from_client(self.ingress()?, session)
            .turn(Json(request.clone()))
            .idempotency_key(key)
            .send();
        let sent = tokio::time::timeout(REQUEST_TIMEOUT, turn)
            .await
            .map_err(|_| RestateError::Unreachable {
                url: self.base.clone(),
                reason: format!("no answer within {}s", REQUEST_TIMEOUT.as_secs()),
            })?
            .map_err(|error| self.failed(error, WHAT))?;
        let invocation = sent.invocation_handle().invocation_id().clone();
        if sent.send_status() == SendStatus::PreviouslyAccepted {
            return Err(RestateError::SubmittedTwice {
                session: session.to_owned(),
                invocation,
            });
        }
        Ok(invocation)
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

    /// Every call to `Tools` whose attempts fail and that Restate keeps retrying, oldest first: a client of the admin
    /// API asks its SQL introspection.
    pub async fn failing_calls(&self) -> Result<Vec<FailingCall>, RestateError> {
        let calls: admin::CallRows = self
            .query(admin::FAILING_CALLS_QUERY, "list the calls that fail")
            .await?;
        Ok(calls.into_calls().map(|(_, call)| call).collect())
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

    /// Waits for the turn `invocation` to end and returns its report. A turn takes as long as it takes: no bound
    /// but the caller's.
    pub async fn attach(&self, invocation: &str) -> Result<TurnReport, RestateError> {
        let report = self
            .ingress()?
            .invocation_handle::<Json<TurnReport>>(invocation)
            .attach()
            .await
            .map_err(|error| self.failed(error, "wait for a turn"))?;
        Ok(report.into_body().into_inner())
    }

    /// The SDK's ingress client of this client's server.
    fn ingress(&self) -> Result<restate_sdk::ingress::Client<Transport>, RestateError> {
        let bad = |reason: String| RestateError::BadAnswer {
            what: "reach the ingress".into(),
            reason: format!("bad URL {}: {reason}", self.base),
        };
        let uri: Uri = self
            .base
            .parse()
            .map_err(|error: hyper::http::uri::InvalidUri| bad(error.to_string()))?;
        restate_sdk::ingress::Client::new(
            uri,
            Transport {
                http: self.http.clone(),
            },
        )
        .map_err(|error| bad(error.to_string()))
    }

    /// What a failed ingress request means for the caller, who asked to `what`.
    fn failed(&self, error: ClientError, what: &str) -> RestateError {
        match error {
            ClientError::Transport { source } => RestateError::Unreachable {
                url: self.base.clone(),
                reason: source.to_string(),
            },
            ClientError::Status { status, response } => {
                let text = String::from_utf8_lossy(response.body());
                // A turn's submission that meets no `Session` service: nothing was registered.
                if status == StatusCode::NOT_FOUND && what == "submit a turn" && text.contains("ervice") {
                    return RestateError::NotRegistered { url: self.base.clone() };
                }
                RestateError::Refused {
                    what: what.into(),
                    status: status.as_u16(),
                    body: text.chars().take(2_000).collect(),
                }
            }
            other => RestateError::BadAnswer {
                what: what.into(),
                reason: other.to_string(),
            },
        }
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

/// The SDK's ingress client's HTTP: this crate's HTTP/1 client, each answer read whole up to [`MAX_RESPONSE`].
struct Transport {
    http: Client<HttpConnector, Full<Bytes>>,
}

/// Why the ingress could not be reached: the innermost cause ("Connection refused").
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct TransportError(String);

impl RequestExecutor for Transport {
    type Error = TransportError;

    fn execute(
        &self,
        request: hyper::Request<Bytes>,
    ) -> impl std::future::Future<Output = Result<hyper::Response<Bytes>, TransportError>> + Send {
        let http = self.http.clone();
        async move {
            let (parts, body) = request.into_parts();
            let response = http
                .request(Request::from_parts(parts, Full::new(body)))
                .await
                .map_err(|error| TransportError(connect_reason(&error)))?;
            let (parts, body) = response.into_parts();
            let bytes = http_body_util::Limited::new(body, MAX_RESPONSE)
                .collect()
                .await
                .map_err(|error| TransportError(format!("the answer could not be read: {error}")))?
                .to_bytes();
            Ok(hyper::Response::from_parts(parts, bytes))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
