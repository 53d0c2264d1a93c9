//! The session page's live events: the parts as they are on connecting, then again when another connection
//! writes the session (SQLite's data version moved), and nothing for writes that leave the session as it was.

mod support;

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use headstart::core::model::UserMessage;
use headstart::store::TranscriptStore;
use headstart_serve::Options;
use http_body_util::BodyExt;
use serde_json::Value;
use support::{server, StoreFile};
use tower::ServiceExt;

/// Generous: the machine may be busy; the events normally come within a poll (200 ms).
const PATIENCE: Duration = Duration::from_secs(60);

/// Reads the next `update` event's JSON from an event stream body.
async fn next_update(body: &mut Body, pending: &mut String) -> Value {
    loop {
        if let Some(end) = pending.find("\n\n") {
            let event: String = pending.drain(..end + 2).collect();
            if let Some(data) = event.lines().find_map(|line| line.strip_prefix("data: ")) {
                assert!(event.starts_with("event: update"), "{event}");
                return serde_json::from_str(data).expect("JSON data");
            }
            continue; // a keep-alive comment
        }
        let frame = tokio::time::timeout(PATIENCE, body.frame())
            .await
            .expect("an event in time")
            .expect("the stream goes on")
            .expect("a frame");
        if let Ok(data) = frame.into_data() {
            pending.push_str(std::str::from_utf8(&data).expect("UTF-8"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_by_another_connection_arrive_as_events() {
    let file = StoreFile::new();
    let writer = file.writer();
    let session = writer.create_session(1).await.expect("create");
    writer
        .append_user(&session, &UserMessage::new("first"), 2)
        .await
        .expect("user");
    let other = writer.create_session(3).await.expect("another session");
    let app = server(&file.path, &Options::default());

    let request = Request::get(format!("/sessions/{session}/events"))
        .body(Body::empty())
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()[header::CONTENT_TYPE], "text/event-stream");
    let mut body = response.into_body();
    let mut pending = String::new();

    let now = next_update(&mut body, &mut pending).await;
    let transcript = now["transcript"].as_str().expect("transcript");
    assert!(transcript.contains("first") && !transcript.contains("second"));
    assert!(now["timeline"].as_str().is_some_and(|svg| svg.starts_with("<svg")));
    assert!(now["status"]
        .as_str()
        .is_some_and(|status| status.contains("1 messages")));

    // A write to another session moves the data version but changes nothing here: no event; the next one is
    // this session's.
    writer
        .append_user(&other, &UserMessage::new("elsewhere"), 4)
        .await
        .expect("other");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let written = Instant::now();
    writer
        .append_user(&session, &UserMessage::new("second <b>"), 5)
        .await
        .expect("user");
    let update = next_update(&mut body, &mut pending).await;
    println!("live: an event {} ms after the write", written.elapsed().as_millis());
    let transcript = update["transcript"].as_str().expect("transcript");
    assert!(transcript.contains("second &lt;b&gt;"), "{transcript}");
    assert!(!transcript.contains("elsewhere"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polled_store_sends_changes_too() {
    let file = StoreFile::new();
    let writer = file.writer();
    let session = writer.create_session(1).await.expect("create");
    let store = std::sync::Arc::new(headstart::store::SqliteStore::open_read_only(&file.path).expect("open"));
    let source = headstart_serve::Source {
        store,
        changes: headstart_serve::Changes::Poll,
    };
    let app = headstart_serve::router(source, &Options::default());
    let request = Request::get(format!("/sessions/{session}/events"))
        .body(Body::empty())
        .expect("request");
    let mut body = app.oneshot(request).await.expect("infallible").into_body();
    let mut pending = String::new();
    let first = next_update(&mut body, &mut pending).await;
    assert!(first["transcript"]
        .as_str()
        .is_some_and(|t| t.contains("No messages yet.")));
    writer
        .append_user(&session, &UserMessage::new("polled"), 2)
        .await
        .expect("user");
    let update = next_update(&mut body, &mut pending).await;
    assert!(update["transcript"].as_str().is_some_and(|t| t.contains("polled")));
}
