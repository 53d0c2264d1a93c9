//! What the server tests share: a SQLite file holding sessions of every kind, the server on it (read-only), and
//! one request through the router without a socket.
#![allow(dead_code)] // each test binary uses its own part

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::Router;
use headstart::core::model::{ContentBlock, StopReason, ToolResultMessage, Usage, UserMessage};
use headstart::store::{CallKey, RunEnd, RunOutcome, RunState, SessionId, SessionQueue, SqliteOptions, SqliteStore};
use headstart_serve::{router, Changes, Options, Source};
use headstart_store::conformance::data::{admit, call, fragment, prefix, result};
use http_body_util::BodyExt;
use tower::ServiceExt;

/// Text a hostile tool returns: markup, a terminal escape, a bidi override, bytes that were not UTF-8 (stored
/// as the replacement characters a lossy decode gives), and one very long line.
pub fn hostile_text() -> String {
    let invalid = String::from_utf8_lossy(b"bytes \xff\xfe\xc3 end").into_owned();
    format!(
        "<script>alert(\"pwned\")</script></pre><b>bold</b>\x1b[2K\u{202e}txt.exe {invalid}\n{}",
        "A".repeat(100_000)
    )
}

/// The sessions [`write_sample`] stores.
pub struct Sample {
    /// A finished single-process session: text, thinking, an early call that finished and a sync call that
    /// failed.
    pub plain: SessionId,
    /// A session whose prompt, call arguments and result are hostile.
    pub hostile: SessionId,
    /// A queued session held by worker `w1`.
    pub running: SessionId,
    /// A queued session claimed by `w1`, then after its lease expired by `w2` (epoch 2).
    pub taken_over: SessionId,
}

/// A temporary folder with the store file in it.
pub struct StoreFile {
    /// The folder (removed on drop).
    pub dir: tempfile::TempDir,
    /// The SQLite file.
    pub path: PathBuf,
}

impl StoreFile {
    /// An empty store file.
    pub fn new() -> StoreFile {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("serve.db");
        StoreFile { dir, path }
    }

    /// A writable handle on it (its own connection, as another process would have).
    pub fn writer(&self) -> SqliteStore {
        let options = SqliteOptions {
            durability: headstart::store::Durability::Normal,
            ..SqliteOptions::default()
        };
        SqliteStore::open(&self.path, options).expect("open writable")
    }
}

/// Writes the [`Sample`] sessions.
pub async fn write_sample(store: &dyn SessionQueue) -> Sample {
    let plain = store.create_session(1_000).await.expect("create");
    store
        .append_user(&plain, &UserMessage::new("Look up tokio\nand write it down"), 1_000)
        .await
        .expect("user");
    let early = call("early", "lookup");
    let mut first = prefix("turn-0", "Looking it up.", std::slice::from_ref(&early));
    first.content.insert(
        0,
        ContentBlock::Thinking {
            thinking: "the user wants tokio".to_owned(),
            signature: None,
        },
    );
    // Sealed 0.2 ms before its commit: the session page shows its headroom and overlap.
    let mut admitted = admit(&[&early]);
    admitted[0].sealed_at_us = Some(1_800);
    store
        .commit_fragment(&plain, 0, &first, &admitted, 2_000)
        .await
        .expect("prefix");
    store
        .mark_started(&plain, &CallKey::new(0, "early"), 2_100)
        .await
        .expect("started");
    let sync = call("sync", "write_file");
    let last = fragment(
        "turn-0",
        StopReason::ToolUse,
        "Writing.",
        std::slice::from_ref(&sync),
        Usage::default(),
    );
    store
        .commit_fragment(&plain, 0, &last, &admit(&[&sync]), 3_000)
        .await
        .expect("terminal");
    store
        .append_tool_result(&plain, 0, &result(&early, "tokio 1.x"), finished(2_100), 4_000)
        .await
        .expect("early result");
    let mut failure = result(&sync, "permission denied");
    failure.is_error = true;
    let failed = Some(RunEnd {
        state: RunState::Finished,
        outcome: RunOutcome::Error,
        started_at_us: Some(4_100),
    });
    store
        .append_tool_result(&plain, 0, &failure, failed, 5_000)
        .await
        .expect("sync result");

    let hostile = store.create_session(10_000).await.expect("create");
    store
        .append_user(&hostile, &UserMessage::new("<img src=x onerror=alert(1)>"), 10_000)
        .await
        .expect("user");
    let mut evil = call("evil", "fetch</pre><script>");
    evil.arguments = headstart::core::model::ToolArguments::parse(r#"{"url": "</pre><script>alert(2)</script>"}"#);
    store
        .commit_fragment(
            &hostile,
            0,
            &prefix("turn-h", "<i>hi</i>", std::slice::from_ref(&evil)),
            &admit(&[&evil]),
            11_000,
        )
        .await
        .expect("fragment");
    let answer = ToolResultMessage {
        content: vec![ContentBlock::text(hostile_text())],
        ..result(&evil, "")
    };
    store
        .append_tool_result(&hostile, 0, &answer, finished(11_500), 12_000)
        .await
        .expect("result");

    let running = store
        .submit(&UserMessage::new("queued work"), 20_000)
        .await
        .expect("submit");
    let claimed = store.claim("w1", Duration::from_secs(600), 1).await.expect("claim");
    assert_eq!(claimed.len(), 1);
    let taken_over = store
        .submit(&UserMessage::new("taken over"), 30_000)
        .await
        .expect("submit");
    store.claim("w1", Duration::from_millis(1), 1).await.expect("claim");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let again = store
        .claim("w2", Duration::from_secs(600), 1)
        .await
        .expect("claim again");
    assert_eq!(again.first().map(|claim| &claim.lease.session), Some(&taken_over));
    Sample {
        plain,
        hostile,
        running,
        taken_over,
    }
}

fn finished(started_at_us: i64) -> Option<RunEnd> {
    Some(RunEnd {
        state: RunState::Finished,
        outcome: RunOutcome::Finished,
        started_at_us: Some(started_at_us),
    })
}

/// The server on `path`, opened read-only as `headstart serve` opens it.
pub fn server(path: &Path, options: &Options) -> Router {
    let store = Arc::new(SqliteStore::open_read_only(path).expect("open read-only"));
    let source = Source {
        store: store.clone() as Arc<dyn SessionQueue>,
        changes: Changes::DataVersion(store),
    };
    router(source, options)
}

/// Every route, several ways, the live events included: what the read-only tests do to a store.
pub async fn browse(app: &Router, sample: &Sample) {
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
        get(app, uri).await;
        for method in [Method::POST, Method::PUT, Method::DELETE] {
            request(app, method, uri).await;
        }
    }
    let events = Request::get(format!("/sessions/{}/events", sample.plain))
        .body(Body::empty())
        .expect("request");
    let mut body = app.clone().oneshot(events).await.expect("infallible").into_body();
    tokio::time::timeout(Duration::from_secs(60), body.frame())
        .await
        .expect("the first event in time");
    // A few of the watcher's polls.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
}

/// One answer, its body as text.
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: String,
}

/// `GET uri` through the router.
pub async fn get(router: &Router, uri: &str) -> Answer {
    send(router, Request::get(uri).body(Body::empty()).expect("request")).await
}

/// `method uri` through the router.
pub async fn request(router: &Router, method: Method, uri: &str) -> Answer {
    send(
        router,
        Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::empty())
            .expect("request"),
    )
    .await
}

/// `request` through the router.
pub async fn send(router: &Router, request: Request<Body>) -> Answer {
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8(bytes.to_vec()).expect("UTF-8 body"),
    }
}
