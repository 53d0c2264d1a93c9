//! # headstart-serve
//!
//! `headstart serve`: a read-only, live web view of a transcript store. The pages are rendered on the server
//! (maud templates, checked at compile time); the stylesheet and the few lines of script are embedded; nothing
//! is fetched from elsewhere.
//!
//! - `/`: the sessions, newest first, a page at a time, filtered by state (`?state=running&page=2`);
//! - `/sessions/{id}`: the transcript beside the timeline SVG (`headstart timeline`'s), live while the session
//!   runs (`/sessions/{id}/events`, server-sent events);
//! - `/fleet`: a queue store's queues (pending, retrying, running), workers, their sessions and leases, the takeovers;
//! - `/api/sessions`, `/api/sessions/{id}`, `/api/fleet`: the same data as JSON (a session in the shape of
//!   `headstart inspect --json`).
//!
//! With [`Options::restate`], a session's page and JSON also show its turns as a Restate server sees them.
//!
//! Safe by default: the server only reads (give it a store opened read-only), answers `GET` (and `HEAD`) only,
//! escapes everything it shows, and needs a token when bound to an address other than loopback ([`check_bind`];
//! the rule is the `auth` module's).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use headstart::store::SqliteStore;
//! use headstart_serve::{router, Changes, Options, Source};
//!
//! let store = Arc::new(SqliteStore::open_read_only("headstart.db")?);
//! let source = Source { store: store.clone(), changes: Changes::DataVersion(store) };
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:7878").await?;
//! headstart_serve::serve(listener, router(source, &Options::default()), std::future::pending()).await?;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod api;
mod assets;
mod auth;
mod changes;
pub mod data;
mod error;
pub mod fleet;
mod live;
mod pages;
mod params;
pub mod restate;
mod routes;
mod state;
pub mod summary;
mod time;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use headstart::store::SessionQueue;

pub use auth::{check_bind, COOKIE};
pub use changes::Changes;
pub use params::PER_PAGE;

/// What the server shows: a store opened read-only, and how to notice its changes.
#[derive(Clone)]
pub struct Source {
    /// The store (SQLite opened read-only, PostgreSQL through the read-only handle).
    pub store: Arc<dyn SessionQueue>,
    /// Where the live pages learn of changes.
    pub changes: Changes,
}

/// How the server answers.
#[derive(Clone, Default)]
pub struct Options {
    /// The token every request must carry (see [`check_bind`]); `None`: none needed.
    pub token: Option<String>,
    /// Where a session's turns on Restate are read (`headstart serve --restate`); `None`: not shown.
    pub restate: Option<Arc<dyn restate::RestateTurns>>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("restate", &self.restate.is_some())
            .finish()
    }
}

/// The policy every answer carries: nothing but this server's own stylesheet and script runs, no page embeds it
/// in a frame, no page is sniffed as another type, no URL leaks in a referrer.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; script-src 'self'; \
    connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The server's routes, reading `source`. Starts the task that watches the store for the live pages (call it on
/// a tokio runtime); the task ends with the router.
pub fn router(source: Source, options: &Options) -> Router {
    let state = state::AppState {
        store: source.store,
        changes: changes::watch_store(source.changes),
        restate: options.restate.clone(),
    };
    let mut router = Router::new()
        .route("/", get(routes::listing))
        .route("/sessions/{id}", get(routes::session))
        .route("/sessions/{id}/events", get(live::events))
        .route("/fleet", get(routes::fleet))
        .route("/api/sessions", get(api::sessions))
        .route("/api/sessions/{id}", get(api::session))
        .route("/api/fleet", get(api::fleet))
        .route("/assets/style.css", get(assets::style))
        .route("/assets/live.js", get(assets::script))
        .fallback(|| async { (StatusCode::NOT_FOUND, "no such page\n") })
        .with_state(state);
    if let Some(token) = &options.token {
        router = router.layer(middleware::from_fn_with_state(auth::Token::new(token), auth::require));
    }
    router.layer(middleware::map_response(secure))
}

/// Adds the security headers to every answer.
async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Serves `router` on `listener` until `shutdown` completes (open live pages are dropped then, not waited for).
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    tokio::select! {
        served = axum::serve(listener, router) => served,
        () = shutdown => Ok(()),
    }
}

/// The URL to open for a server on `addr`: with `?token=` when it has one.
pub fn url(addr: SocketAddr, token: Option<&str>) -> String {
    match token {
        Some(token) => format!("http://{addr}/?token={token}"),
        None => format!("http://{addr}/"),
    }
}
