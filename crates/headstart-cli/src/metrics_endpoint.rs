//! `headstart worker --metrics ADDR`: the process's metrics (docs/fleet.md lists them) as Prometheus text on
//! `http://ADDR/metrics`. The recorder is metrics-exporter-prometheus's, installed as the process's global
//! recorder of the `metrics` facade, which the libraries record through; its own HTTP listener is left out (it
//! brings an HTTP/2 server), and the page is served here with hyper's HTTP/1 server.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;

/// The buckets of every histogram, in seconds: 100 µs to 1 min, Prometheus's default series extended downwards,
/// where commits and starts on a local database fall.
const BUCKETS: [f64; 18] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The text format's media type (Prometheus exposition format 0.0.4).
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How often histogram samples are folded into their buckets between scrapes, so they never pile up.
const UPKEEP: Duration = Duration::from_secs(5);

/// Installs the Prometheus recorder as the global recorder, describes every metric, and serves `GET /metrics` on
/// `addr` from tasks of the current runtime for as long as it runs. Returns the address bound (port 0 picks a
/// free one). Fails when `addr` cannot be bound or a recorder is installed already.
pub async fn serve(addr: SocketAddr) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|error| format!("cannot listen on {addr} for metrics: {error}"))?;
    let bound = listener
        .local_addr()
        .map_err(|error| format!("cannot listen on {addr} for metrics: {error}"))?;
    let handle = PrometheusBuilder::new()
        .set_buckets(&BUCKETS)
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|error| format!("cannot install the metrics recorder: {error}"))?;
    headstart_fleet::metrics::describe();
    headstart_postgres::metrics::describe();
    tokio::spawn(upkeep(handle.clone()));
    tokio::spawn(accept(listener, handle));
    Ok(bound)
}

async fn upkeep(handle: PrometheusHandle) {
    let mut every = tokio::time::interval(UPKEEP);
    loop {
        every.tick().await;
        handle.run_upkeep();
    }
}

/// Accepts connections, each served on a task of its own (HTTP/1.1, keep-alive as the scraper asks).
async fn accept(listener: TcpListener, handle: PrometheusHandle) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of descriptors, most likely: the next accept may work once some close.
                eprintln!("headstart: metrics endpoint: accept failed: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let response = respond(&request, &handle);
                async move { Ok::<_, Infallible>(response) }
            });
            // A client that goes away mid-request is its own business.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// `GET /metrics`: the rendered text; any other path 404, any other method 405.
fn respond(request: &Request<Incoming>, handle: &PrometheusHandle) -> Response<Full<Bytes>> {
    if request.uri().path() != "/metrics" {
        return status(StatusCode::NOT_FOUND, "not found: the metrics are at /metrics\n");
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = status(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let mut response = Response::new(Full::new(Bytes::from(handle.render())));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT));
    response
}

fn status(code: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = code;
    response
}
