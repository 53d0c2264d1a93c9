//! A local HTTP server that replays recorded provider streams, for offline end-to-end tests (feature
//! `replay-server`).
//!
//! The k-th POST gets the k-th scripted [`Reply`]: an SSE stream sent one event at a time with a delay before each,
//! the same stream cut off by a connection reset, or an HTTP error. Or a rule chooses each POST's reply from what
//! it holds ([`ReplayServer::start_choosing`], [`ChooseReply`]), so that one server answers many sessions whose
//! requests arrive in any order: [`call_then_answer`] answers any Chat Completions transcript, with replies
//! synthesized by [`chat_stream`]. GETs are answered from a table of pages (each
//! with its own delay), so a tool that fetches a URL has something slow to fetch; [`ReplayServer::route`] adds
//! hostile answers to GETs (redirects, endless or trickling bodies). Every request is recorded with its headers,
//! JSON body and arrival time.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use serde_json::Value;

use crate::capture::read_capture;
use crate::error::ProviderError;

pub mod call_then_answer;
pub mod chat_stream;
pub mod gate;

pub use gate::Lead;
pub mod respell;
mod route;
pub use route::Route;
pub mod responses_input;
pub mod responses_stream;
#[cfg(test)]
mod tests;

/// Chooses the reply to each model request from the request itself, for [`ReplayServer::start_choosing`]; a
/// closure `Fn(usize, &Value) -> Reply` is one.
pub trait ChooseReply: Send + Sync + 'static {
    /// The reply to the model request numbered `number` (from 0, in arrival order) whose JSON body is `body`
    /// (`Null` when it is not JSON).
    fn reply(&self, number: usize, body: &Value) -> Reply;
}

impl<F: Fn(usize, &Value) -> Reply + Send + Sync + 'static> ChooseReply for F {
    fn reply(&self, number: usize, body: &Value) -> Reply {
        self(number, body)
    }
}

/// What the server answers to one model request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// These SSE events (each with its blank line), one per delay.
    Events(Vec<String>),
    /// The first `keep` of these events, then the connection is reset.
    ResetAfter {
        /// The events.
        events: Vec<String>,
        /// How many are sent before the reset.
        keep: usize,
    },
    /// These SSE events, one per delay, but event `before` is held back until a GET of `path` has arrived (or
    /// `timeout` has passed): a test's early tool fetches `path`, so the rest of the stream cannot have been sent
    /// before the tool started, whatever the machine's load, and each held-back event still comes one delay after
    /// the one before.
    Gated {
        /// The events.
        events: Vec<String>,
        /// The position of the first event held back.
        before: usize,
        /// The path whose GET opens the gate.
        path: String,
        /// How long the gate waits at most.
        timeout: Duration,
    },
    /// An HTTP error status with headers and a body.
    Status {
        /// The status code.
        status: u16,
        /// Extra headers (`Retry-After`, ...).
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// An SSE response that never ends: a `: keep-alive` comment every `every`, until the client goes away.
    KeepAlive {
        /// The interval between two comments.
        every: Duration,
    },
    /// A redirect: `status` (301, 302, 303, 307, 308) with this `Location` and an empty body.
    Redirect {
        /// The status code.
        status: u16,
        /// The `Location` header.
        location: String,
    },
    /// An SSE response of raw bytes sent without delays: `head`, then `chunk` `times` times, then `tail`. Large
    /// bodies (a line without end, gigabytes of deltas) cost one `chunk` of memory, and the client stops the
    /// sending by going away.
    RawBody {
        /// Sent first.
        head: String,
        /// Sent `times` times after `head`.
        chunk: String,
        /// How often `chunk` is sent.
        times: usize,
        /// Sent last.
        tail: String,
    },
}

/// A page served to GET requests.
#[derive(Debug, Clone)]
pub struct Page {
    /// How long the server waits before answering.
    pub delay: Duration,
    /// The body (text/plain).
    pub body: String,
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    /// The method.
    pub method: String,
    /// The path and query.
    pub path: String,
    /// The headers (lower-case names).
    pub headers: HashMap<String, String>,
    /// The body as JSON (`Null` when it is not JSON).
    pub body: Value,
    /// When it arrived.
    pub at: Instant,
}

#[derive(Default)]
struct Recorded {
    requests: Mutex<Vec<SeenRequest>>,
    finished: Mutex<Vec<(usize, Instant)>>,
    sent: Mutex<HashMap<usize, Vec<Instant>>>,
}

/// A running replay server; it stops when the tokio runtime it was started on does.
pub struct ReplayServer {
    address: SocketAddr,
    recorded: Arc<Recorded>,
    routes: Arc<Mutex<HashMap<String, Route>>>,
}

/// Where the model requests' replies come from.
enum Replies {
    /// The k-th request gets the k-th; an empty SSE body after the last.
    Scripted(Vec<Reply>),
    /// A rule chooses each.
    Chosen(Box<dyn ChooseReply>),
}

impl Replies {
    fn reply(&self, number: usize, body: &Value) -> Option<Reply> {
        match self {
            Replies::Scripted(replies) => replies.get(number).cloned(),
            Replies::Chosen(rule) => Some(rule.reply(number, body)),
        }
    }
}

struct Script {
    replies: Replies,
    pages: HashMap<String, Page>,
    delay: Duration,
    posts: AtomicUsize,
    routes: Arc<Mutex<HashMap<String, Route>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ReplayServer {
    /// Starts serving on `127.0.0.1` (a free port): `replies` to the model requests in order (an empty SSE body
    /// after the last), `pages` to GETs by path, `delay` before each SSE event.
    pub async fn start(replies: Vec<Reply>, pages: HashMap<String, Page>, delay: Duration) -> std::io::Result<Self> {
        Self::serve(Replies::Scripted(replies), pages, delay).await
    }

    /// Starts serving as [`start`](Self::start) does, but `rule` chooses every model request's reply from its body,
    /// however many arrive and in whatever order (e.g. a [`call_then_answer::CallThenAnswer`]).
    pub async fn start_choosing(
        rule: impl ChooseReply,
        pages: HashMap<String, Page>,
        delay: Duration,
    ) -> std::io::Result<Self> {
        Self::serve(Replies::Chosen(Box::new(rule)), pages, delay).await
    }

    async fn serve(replies: Replies, pages: HashMap<String, Page>, delay: Duration) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let recorded = Arc::new(Recorded::default());
        let routes = Arc::new(Mutex::new(HashMap::new()));
        let script = Arc::new(Script {
            replies,
            pages,
            delay,
            posts: AtomicUsize::new(0),
            routes: Arc::clone(&routes),
        });
        let server_recorded = Arc::clone(&recorded);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (script, recorded) = (Arc::clone(&script), Arc::clone(&server_recorded));
                let service = hyper::service::service_fn(move |request| {
                    answer(Arc::clone(&script), Arc::clone(&recorded), request)
                });
                tokio::spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        Ok(ReplayServer {
            address,
            recorded,
            routes,
        })
    }

    /// Answers GETs of `path` (with its query) as `route` says from now on, before the pages; set once the server
    /// listens, so that a route can name the server's own URL.
    pub fn route(&self, path: impl Into<String>, route: Route) {
        lock(&self.routes).insert(path.into(), route);
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        lock(&self.recorded.requests).clone()
    }

    /// The model requests (POSTs) so far, in arrival order.
    pub fn model_requests(&self) -> Vec<SeenRequest> {
        self.requests().into_iter().filter(|r| r.method == "POST").collect()
    }

    /// When each streamed reply (by POST number) sent its last event.
    pub fn finished(&self) -> Vec<(usize, Instant)> {
        lock(&self.recorded.finished).clone()
    }

    /// When each event of the reply to POST `number` was handed to the connection, in order.
    pub fn sent(&self, number: usize) -> Vec<Instant> {
        lock(&self.recorded.sent).get(&number).cloned().unwrap_or_default()
    }
}

pub(super) type Body = StreamBody<BoxStream<'static, Result<Frame<Bytes>, std::io::Error>>>;

async fn answer(
    script: Arc<Script>,
    recorded: Arc<Recorded>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let method = request.method().to_string();
    let path = request
        .uri()
        .path_and_query()
        .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
    let headers = request
        .headers()
        .iter()
        .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
        .collect();
    let body = match request.into_body().collect().await {
        Ok(body) => serde_json::from_slice(&body.to_bytes()).unwrap_or(Value::Null),
        Err(_) => Value::Null,
    };
    // Chosen before the body is recorded (moved), numbered in arrival order.
    let post = (method == "POST").then(|| {
        let number = script.posts.fetch_add(1, Ordering::SeqCst);
        (number, script.replies.reply(number, &body))
    });
    lock(&recorded.requests).push(SeenRequest {
        method: method.clone(),
        path: path.clone(),
        headers,
        body,
        at: Instant::now(),
    });
    let Some((number, reply)) = post else {
        let route = lock(&script.routes).get(&path).cloned();
        if let Some(route) = route {
            if let Route::AfterPosts { posts, timeout, .. } = &route {
                gate::wait_for_posts(&script.posts, *posts, *timeout).await;
            }
            return Ok(route::routed(route));
        }
        let (status, page) = match script.pages.get(&path) {
            Some(page) => (200, page.clone()),
            None => (
                404,
                Page {
                    delay: Duration::ZERO,
                    body: "not found".to_owned(),
                },
            ),
        };
        tokio::time::sleep(page.delay).await;
        return Ok(response(status, &[], "text/plain", whole(page.body)));
    };
    let (events, keep, gate) = match reply {
        None => (Vec::new(), None, None),
        Some(Reply::Events(events)) => (events, None, None),
        Some(Reply::Gated {
            events,
            before,
            path,
            timeout,
        }) => (events, None, Some((before, path, timeout))),
        Some(Reply::ResetAfter { events, keep }) => (events, Some(keep), None),
        Some(Reply::Status { status, headers, body }) => {
            return Ok(response(status, &headers, "application/json", whole(body)));
        }
        Some(Reply::KeepAlive { every }) => return Ok(keep_alive(every)),
        Some(Reply::Redirect { status, location }) => {
            let headers = [("location".to_owned(), location)];
            return Ok(response(status, &headers, "text/plain", whole(String::new())));
        }
        Some(Reply::RawBody {
            head,
            chunk,
            times,
            tail,
        }) => return Ok(raw_body(head, chunk, times, tail)),
    };
    let delay = script.delay;
    // Shared, not cloned per frame: a reply of many thousand events stays linear to serve.
    let events: Arc<[String]> = events.into();
    let gate: Option<Arc<(usize, String, Duration)>> = gate.map(Arc::new);
    let frames = futures::stream::unfold(0usize, move |next| {
        let (events, recorded, gate) = (Arc::clone(&events), Arc::clone(&recorded), gate.clone());
        async move {
            if let Some(gate) = gate.as_deref().filter(|(before, _, _)| *before == next) {
                gate::wait_for_get(&recorded, &gate.1, gate.2).await;
            }
            if keep == Some(next) {
                // The pause lets hyper flush the events before; then an error from the body stream makes it drop
                // the connection mid-body: a reset for the client.
                tokio::time::sleep(delay).await;
                return Some((Err(std::io::Error::other("scripted connection reset")), usize::MAX));
            }
            if next >= events.len() {
                if next == events.len() {
                    lock(&recorded.finished).push((number, Instant::now()));
                }
                return None;
            }
            // No timer for a zero delay: tokio rounds every sleep up to its next millisecond tick.
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            lock(&recorded.sent).entry(number).or_default().push(Instant::now());
            Some((Ok(Frame::data(Bytes::from(events[next].clone()))), next + 1))
        }
    })
    .boxed();
    Ok(response(
        200,
        &[],
        "text/event-stream; charset=utf-8",
        StreamBody::new(frames),
    ))
}

const SSE_CONTENT_TYPE: &str = "text/event-stream; charset=utf-8";

/// [`Reply::KeepAlive`]'s endless stream of comments.
fn keep_alive(every: Duration) -> Response<Body> {
    let comments = futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(every).await;
        Some((Ok(Frame::data(Bytes::from_static(b": keep-alive\n\n"))), ()))
    });
    response(200, &[], SSE_CONTENT_TYPE, StreamBody::new(comments.boxed()))
}

/// [`Reply::RawBody`]'s bytes.
fn raw_body(head: String, chunk: String, times: usize, tail: String) -> Response<Body> {
    let chunk = Bytes::from(chunk);
    let bytes = futures::stream::once(async move { Bytes::from(head) })
        .chain(futures::stream::repeat(chunk).take(times))
        .chain(futures::stream::once(async move { Bytes::from(tail) }))
        .map(|bytes| Ok(Frame::data(bytes)));
    response(200, &[], SSE_CONTENT_TYPE, StreamBody::new(bytes.boxed()))
}

/// The answer a [`Route`] scripts.
pub(super) fn whole(text: String) -> Body {
    StreamBody::new(futures::stream::once(async move { Ok(Frame::data(Bytes::from(text))) }).boxed())
}

pub(super) fn response(status: u16, headers: &[(String, String)], content_type: &str, body: Body) -> Response<Body> {
    let mut builder = Response::builder().status(status).header("content-type", content_type);
    for (name, value) in headers {
        builder = builder.header(name, value);
    }
    builder.body(body).unwrap_or_else(|_| {
        // Only a malformed scripted header gets here; answer 500 so the test sees it.
        let mut fallback = Response::new(StreamBody::new(futures::stream::empty().boxed()));
        *fallback.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
        fallback
    })
}

/// The exchanges of a YAML cassette, each body split into its SSE events (each with its blank line).
pub fn cassette_events(yaml: &str) -> Result<Vec<Vec<String>>, ProviderError> {
    Ok(read_capture(yaml)?
        .into_iter()
        .map(|exchange| exchange.body.split_inclusive("\n\n").map(str::to_owned).collect())
        .collect())
}
