//! One deployment URL in front of several deployments: Restate sends every new invocation of a service to one URL
//! (the latest registered), so several `headstart restate serve` processes share the work behind a balancer.
//!
//! [`Balancer`] is a small HTTP/2 (prior knowledge, as Restate speaks to deployments) reverse proxy that spreads
//! requests, not connections: each invocation is one request, streamed both ways as it comes, sent to the
//! deployment with the fewest requests open. Any HTTP/2-aware load balancer (Envoy, a Kubernetes service mesh) does
//! the same job; this one needs nothing but the binary.
//!
//! A deployment that cannot be reached, or does not answer a request's headers within [`ANSWER_WITHIN`] (a live
//! one answers at once: the SDK answers before its handler runs; a stopped or hung process never does), makes the
//! balancer answer 502 and set the deployment aside for [`SET_ASIDE`]: Restate retries the invocation, and the
//! retry goes to another deployment. When every deployment is set aside, the picks ignore it.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::http::uri::{Authority, Scheme};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

/// What a balanced request answers: a deployment's streamed body, or the balancer's own error.
type Answer = Response<BoxBody<Bytes, hyper::Error>>;

/// Why a balancer cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BalanceError {
    /// No deployment was given.
    #[error("a balancer needs at least one deployment URL")]
    NoDeployments,
    /// A deployment URL is not `http://HOST:PORT`.
    #[error("`{0}` is not a deployment URL of the form http://HOST:PORT")]
    BadUrl(String),
}

/// How long a deployment may take to answer a request's headers unless told otherwise.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// How long a deployment that failed to answer is left out of the picks unless told otherwise.
pub const SET_ASIDE: Duration = Duration::from_secs(10);

/// A deployment behind the balancer, its requests open now, and until when it is set aside.
struct Backend {
    authority: Authority,
    open: AtomicUsize,
    aside_until: Mutex<Option<Instant>>,
}

impl Backend {
    fn aside(&self, now: Instant) -> bool {
        self.aside_until
            .lock()
            .map(|until| until.is_some_and(|until| until > now))
            .unwrap_or(false)
    }

    fn set_aside(&self, until: Instant) {
        if let Ok(mut aside) = self.aside_until.lock() {
            *aside = Some(until);
        }
    }
}

/// The HTTP/2 balancer (module docs).
#[derive(Clone)]
pub struct Balancer {
    backends: Arc<[Arc<Backend>]>,
    client: Client<HttpConnector, Incoming>,
    answer_within: Duration,
    set_aside: Duration,
}

impl std::fmt::Debug for Balancer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backends: Vec<String> = self
            .backends
            .iter()
            .map(|backend| backend.authority.to_string())
            .collect();
        f.debug_struct("Balancer").field("backends", &backends).finish()
    }
}

impl Balancer {
    /// A balancer over the deployments at `urls` (`http://HOST:PORT`, a trailing `/` allowed).
    pub fn new(urls: &[String]) -> Result<Self, BalanceError> {
        if urls.is_empty() {
            return Err(BalanceError::NoDeployments);
        }
        let backends = urls
            .iter()
            .map(|url| {
                let authority = url
                    .strip_prefix("http://")
                    .map(|rest| rest.trim_end_matches('/'))
                    .filter(|rest| !rest.contains('/'))
                    .and_then(|rest| rest.parse::<Authority>().ok())
                    .filter(|authority| authority.port_u16().is_some())
                    .ok_or_else(|| BalanceError::BadUrl(url.clone()))?;
                Ok(Arc::new(Backend {
                    authority,
                    open: AtomicUsize::new(0),
                    aside_until: Mutex::new(None),
                }))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Balancer {
            backends: backends.into(),
            client: Client::builder(TokioExecutor::new()).http2_only(true).build_http(),
            answer_within: ANSWER_WITHIN,
            set_aside: SET_ASIDE,
        })
    }

    /// How long a deployment may take to answer a request's headers before it is set aside (default
    /// [`ANSWER_WITHIN`]).
    pub fn answer_within(mut self, limit: Duration) -> Self {
        self.answer_within = limit;
        self
    }

    /// How long a deployment that failed to answer is left out of the picks (default [`SET_ASIDE`]).
    pub fn set_aside_for(mut self, period: Duration) -> Self {
        self.set_aside = period;
        self
    }

    /// Serves the connections `listener` accepts, each on a task of its own, for as long as the runtime runs.
    pub async fn serve(self, listener: TcpListener) {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of descriptors, say: wait a little rather than spin.
                    tracing::warn!(%error, "the balancer could not accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let balancer = self.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let balancer = balancer.clone();
                    async move { Ok::<_, Infallible>(balancer.forward(request).await) }
                });
                let served = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                if let Err(error) = served {
                    tracing::debug!(%error, "a balanced connection ended");
                }
            });
        }
    }

    /// A request opened on the backend with the fewest requests open (the first of equals), among those not set
    /// aside when there are any.
    fn open(&self) -> Open {
        let now = Instant::now();
        let usable: Vec<&Arc<Backend>> = self.backends.iter().filter(|backend| !backend.aside(now)).collect();
        let candidates = if usable.is_empty() {
            self.backends.iter().collect()
        } else {
            usable
        };
        let mut best = candidates[0];
        for backend in candidates.into_iter().skip(1) {
            if backend.open.load(Ordering::Relaxed) < best.open.load(Ordering::Relaxed) {
                best = backend;
            }
        }
        best.open.fetch_add(1, Ordering::Relaxed);
        Open(Arc::clone(best))
    }

    /// Sends `request` to a backend and streams its answer back; 502 when the backend cannot be reached.
    async fn forward(&self, request: Request<Incoming>) -> Answer {
        let open = self.open();
        let backend = Arc::clone(&open.0);
        let (mut parts, body) = request.into_parts();
        let mut uri = parts.uri.into_parts();
        uri.scheme = Some(Scheme::HTTP);
        uri.authority = Some(backend.authority.clone());
        parts.uri = match Uri::from_parts(uri) {
            Ok(uri) => uri,
            Err(error) => return refuse(StatusCode::BAD_REQUEST, format!("bad request URI: {error}")),
        };
        let answered = tokio::time::timeout(
            self.answer_within,
            self.client.request(Request::from_parts(parts, body)),
        );
        match answered.await {
            Ok(Ok(response)) => {
                let (parts, body) = response.into_parts();
                // The request stays open until its answer's body ends: count it until then.
                let body = body.map_frame(move |frame| {
                    let _still_open = &open;
                    frame
                });
                Response::from_parts(parts, body.boxed())
            }
            Ok(Err(error)) => {
                backend.set_aside(Instant::now() + self.set_aside);
                refuse(
                    StatusCode::BAD_GATEWAY,
                    format!("deployment {} unreachable: {error}", backend.authority),
                )
            }
            Err(_) => {
                backend.set_aside(Instant::now() + self.set_aside);
                refuse(
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "deployment {} did not answer within {} ms",
                        backend.authority,
                        self.answer_within.as_millis()
                    ),
                )
            }
        }
    }
}

/// A request counted as open on its backend until dropped.
struct Open(Arc<Backend>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

fn refuse(status: StatusCode, message: String) -> Answer {
    let body = Full::new(Bytes::from(message)).map_err(|never| match never {}).boxed();
    let mut answer = Response::new(body);
    *answer.status_mut() = status;
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_urls_are_plain_http_with_a_port() {
        assert_eq!(Balancer::new(&[]).err(), Some(BalanceError::NoDeployments));
        let ok = Balancer::new(&["http://127.0.0.1:9081".into(), "http://localhost:9082/".into()]);
        assert_eq!(ok.map(|balancer| balancer.backends.len()).ok(), Some(2));
        for bad in [
            "https://127.0.0.1:9081",
            "127.0.0.1:9081",
            "http://127.0.0.1",
            "http://127.0.0.1:9081/x",
        ] {
            assert_eq!(
                Balancer::new(&[bad.to_owned()]).err(),
                Some(BalanceError::BadUrl(bad.to_owned())),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_backend_with_the_fewest_open_requests_is_picked() {
        let balancer = Balancer::new(&["http://a:1".into(), "http://b:2".into(), "http://c:3".into()]).expect("urls");
        let first = balancer.open();
        let second = balancer.open();
        assert_eq!(
            (first.0.authority.as_str(), second.0.authority.as_str()),
            ("a:1", "b:2")
        );
        drop(first);
        let third = balancer.open();
        assert_eq!(third.0.authority.as_str(), "a:1", "a's request ended");
        let fourth = balancer.open();
        assert_eq!(fourth.0.authority.as_str(), "c:3");
        let counts: Vec<usize> = balancer
            .backends
            .iter()
            .map(|backend| backend.open.load(Ordering::Relaxed))
            .collect();
        assert_eq!(counts, [1, 1, 1]);
        drop((second, third, fourth));
        assert!(balancer
            .backends
            .iter()
            .all(|backend| backend.open.load(Ordering::Relaxed) == 0));
    }

    #[test]
    fn a_deployment_set_aside_is_skipped_until_every_one_is() {
        let balancer = Balancer::new(&["http://a:1".into(), "http://b:2".into()]).expect("urls");
        let later = Instant::now() + Duration::from_secs(60);
        balancer.backends[0].set_aside(later);
        let first = balancer.open();
        let second = balancer.open();
        assert_eq!(
            (first.0.authority.as_str(), second.0.authority.as_str()),
            ("b:2", "b:2"),
            "a is aside, whatever b's load"
        );
        balancer.backends[1].set_aside(later);
        assert_eq!(
            balancer.open().0.authority.as_str(),
            "a:1",
            "all aside: the picks ignore it"
        );
        balancer.backends[0].set_aside(Instant::now());
        assert!(
            !balancer.backends[0].aside(Instant::now() + Duration::from_millis(1)),
            "its time is up"
        );
    }
}
