//! One deployment URL in front of several deployments: Restate sends every new invocation of a service to one URL
//! (the latest registered), so several `headstart restate serve` processes share the work behind a balancer.
//!
//! [`Balancer`] is a small HTTP/2 (prior knowledge, as Restate speaks to deployments) reverse proxy that spreads
//! requests, not connections: each invocation is one request, streamed both ways as it comes, sent to the
//! deployment with the fewest requests of the same service open (`/invoke/SERVICE/HANDLER`), then the fewest in all.
//! Per service, because a deployment bounds its turns, not its tool calls: counting a short `Tools` call like a
//! `Session` turn would send a deployment a turn beyond its limit, to wait for a slot, while another has one free.
//! Any HTTP/2-aware load balancer (Envoy, a Kubernetes service mesh) does the same job; this one needs nothing but
//! the binary.
//!
//! A deployment that cannot be reached, or does not answer a request's headers within [`ANSWER_WITHIN`] (a live
//! one answers at once: the SDK answers before its handler runs; a stopped or hung process never does), makes the
//! balancer answer 502 and set the deployment aside for [`SET_ASIDE`]: Restate retries the invocation, and the
//! retry goes to another deployment. When every deployment is set aside, the picks ignore it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
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

/// A deployment behind the balancer, and until when it is set aside.
struct Backend {
    authority: Authority,
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

/// The requests open on each backend (by its index), per service.
#[derive(Debug, Default)]
struct OpenRequests {
    by_service: HashMap<String, Vec<usize>>,
}

impl OpenRequests {
    /// Opens a request of `service` on the usable backend (of `usable`, by index) with the fewest requests of that
    /// service open, then the fewest in all, then the first; returns its index.
    fn open(&mut self, service: &str, usable: &[bool]) -> usize {
        let backends = usable.len();
        let total = |index: usize| -> usize { self.by_service.values().map(|counts| counts[index]).sum() };
        let of_service = self.by_service.get(service);
        let pick = (0..backends)
            .filter(|&index| usable[index])
            .min_by_key(|&index| (of_service.map_or(0, |counts| counts[index]), total(index)))
            .unwrap_or(0);
        self.by_service
            .entry(service.to_owned())
            .or_insert_with(|| vec![0; backends])[pick] += 1;
        pick
    }

    /// Closes a request `open` opened.
    fn close(&mut self, service: &str, index: usize) {
        if let Some(count) = self
            .by_service
            .get_mut(service)
            .and_then(|counts| counts.get_mut(index))
        {
            *count = count.saturating_sub(1);
        }
    }
}

/// The service a request to a deployment invokes: `SERVICE` of `/invoke/SERVICE/HANDLER`, empty for any other path
/// (discovery).
fn service_of(path: &str) -> &str {
    path.strip_prefix("/invoke/")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("")
}

/// The HTTP/2 balancer (module docs).
#[derive(Clone)]
pub struct Balancer {
    backends: Arc<[Arc<Backend>]>,
    /// One lock over every count: a pick reads them all.
    open: Arc<Mutex<OpenRequests>>,
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
                    aside_until: Mutex::new(None),
                }))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Balancer {
            backends: backends.into(),
            open: Arc::default(),
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

    /// A request of `service` opened on the backend with the fewest requests of it open (then the fewest in all),
    /// among those not set aside when there are any.
    fn open(&self, service: &str) -> Open {
        let now = Instant::now();
        let mut usable: Vec<bool> = self.backends.iter().map(|backend| !backend.aside(now)).collect();
        if !usable.contains(&true) {
            usable.fill(true);
        }
        let index = self.counts().open(service, &usable);
        Open {
            backend: Arc::clone(&self.backends[index]),
            index,
            service: service.to_owned(),
            counts: Arc::clone(&self.open),
        }
    }

    fn counts(&self) -> MutexGuard<'_, OpenRequests> {
        // The counts stay consistent whatever panicked while holding them: each change is one statement.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `request` to a backend and streams its answer back; 502 when the backend cannot be reached.
    async fn forward(&self, request: Request<Incoming>) -> Answer {
        let open = self.open(service_of(request.uri().path()));
        let backend = Arc::clone(&open.backend);
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
struct Open {
    backend: Arc<Backend>,
    index: usize,
    service: String,
    counts: Arc<Mutex<OpenRequests>>,
}

impl Drop for Open {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.close(&self.service, self.index);
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

    fn picked(open: &Open) -> &str {
        open.backend.authority.as_str()
    }

    fn open_counts(balancer: &Balancer) -> HashMap<String, Vec<usize>> {
        balancer.counts().by_service.clone()
    }

    #[test]
    fn the_backend_with_the_fewest_open_requests_is_picked() {
        let balancer = Balancer::new(&["http://a:1".into(), "http://b:2".into(), "http://c:3".into()]).expect("urls");
        let first = balancer.open("Session");
        let second = balancer.open("Session");
        assert_eq!((picked(&first), picked(&second)), ("a:1", "b:2"));
        drop(first);
        let third = balancer.open("Session");
        assert_eq!(picked(&third), "a:1", "a's request ended");
        let fourth = balancer.open("Session");
        assert_eq!(picked(&fourth), "c:3");
        assert_eq!(open_counts(&balancer)["Session"], [1, 1, 1]);
        drop((second, third, fourth));
        assert_eq!(open_counts(&balancer)["Session"], [0, 0, 0]);
    }

    #[test]
    fn each_service_is_spread_on_its_own_so_short_calls_do_not_skew_the_turns() {
        let balancer = Balancer::new(&["http://a:1".into(), "http://b:2".into()]).expect("urls");
        let turn_a = balancer.open("Session");
        let calls: Vec<Open> = (0..3).map(|_| balancer.open("Tools")).collect();
        assert_eq!(
            calls.iter().map(picked).collect::<Vec<_>>(),
            ["b:2", "a:1", "b:2"],
            "the first call goes where fewer requests are open in all"
        );
        // a: 1 turn + 1 call, b: 2 calls. Counting every request alike would send the next turn to a.
        let turn_b = balancer.open("Session");
        assert_eq!(picked(&turn_b), "b:2", "turns are balanced against turns");
        assert_eq!(open_counts(&balancer)["Session"], [1, 1]);
        assert_eq!(open_counts(&balancer)["Tools"], [1, 2]);
        drop((turn_a, turn_b, calls));
        assert!(open_counts(&balancer).values().flatten().all(|&count| count == 0));
    }

    #[test]
    fn a_request_names_its_service_in_its_path() {
        assert_eq!(service_of("/invoke/Session/turn"), "Session");
        assert_eq!(service_of("/invoke/Tools/run_call"), "Tools");
        assert_eq!(service_of("/discover"), "");
        assert_eq!(service_of("/invoke/"), "");
    }

    #[test]
    fn a_deployment_set_aside_is_skipped_until_every_one_is() {
        let balancer = Balancer::new(&["http://a:1".into(), "http://b:2".into()]).expect("urls");
        let later = Instant::now() + Duration::from_secs(60);
        balancer.backends[0].set_aside(later);
        let first = balancer.open("Session");
        let second = balancer.open("Session");
        assert_eq!(
            (picked(&first), picked(&second)),
            ("b:2", "b:2"),
            "a is aside, whatever b's load"
        );
        balancer.backends[1].set_aside(later);
        assert_eq!(
            picked(&balancer.open("Session")),
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
