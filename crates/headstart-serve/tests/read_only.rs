//! Nothing the server does writes to the store: the database file and its WAL hold the same bytes after a
//! session of requests to every route as before, with the writer's WAL full of commits and after it closed.

mod support;

use std::path::Path;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request};
use headstart_serve::Options;
use http_body_util::BodyExt;
use support::{get, request, server, write_sample, Sample, StoreFile};
use tower::ServiceExt;

/// The bytes of the database file and of its WAL (`None` when there is none).
fn snapshot(path: &Path) -> (Vec<u8>, Option<Vec<u8>>) {
    let wal = path.with_file_name(format!(
        "{}-wal",
        path.file_name().and_then(|name| name.to_str()).expect("a file name")
    ));
    (std::fs::read(path).expect("read the database"), std::fs::read(wal).ok())
}

/// Every route, several ways, the live events included.
async fn browse(path: &Path, sample: &Sample) {
    let app = server(path, &Options::default());
    let mut uris = vec![
        "/".to_owned(),
        "/?state=running".to_owned(),
        "/?page=2".to_owned(),
        "/?page=0".to_owned(),
        "/fleet".to_owned(),
        "/api/sessions".to_owned(),
        "/api/fleet".to_owned(),
        "/sessions/ghost".to_owned(),
        "/assets/style.css".to_owned(),
    ];
    for id in [&sample.plain, &sample.hostile, &sample.running, &sample.taken_over] {
        uris.push(format!("/sessions/{id}"));
        uris.push(format!("/api/sessions/{id}"));
    }
    for uri in &uris {
        get(&app, uri).await;
        for method in [Method::POST, Method::PUT, Method::DELETE] {
            request(&app, method, uri).await;
        }
    }
    let events = Request::get(format!("/sessions/{}/events", sample.plain))
        .body(Body::empty())
        .expect("request");
    let mut body = app.oneshot(events).await.expect("infallible").into_body();
    tokio::time::timeout(Duration::from_secs(60), body.frame())
        .await
        .expect("the first event in time");
    // A few of the watcher's polls.
    tokio::time::sleep(Duration::from_millis(700)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_never_changes_the_store() {
    let file = StoreFile::new();
    let writer = file.writer();
    let sample = write_sample(&writer).await;

    // The writer is still open: its commits are in the WAL.
    let before = snapshot(&file.path);
    assert!(
        before.1.as_ref().is_some_and(|wal| !wal.is_empty()),
        "a WAL with commits"
    );
    browse(&file.path, &sample).await;
    assert!(
        snapshot(&file.path) == before,
        "the database or its WAL changed while served"
    );

    // The writer closed: everything is in the database file.
    drop(writer);
    let before = snapshot(&file.path);
    browse(&file.path, &sample).await;
    assert!(
        snapshot(&file.path) == before,
        "the database or its WAL changed while served"
    );
}
