//! In a real browser: headless Chromium, driven through chromedriver, opens the listing, follows a session, and
//! sees a call's result appear live while another connection writes the session into the same SQLite file,
//! paced by what the browser shows (each write waits for the page to show the one before: no race with a
//! timer). Saves a screenshot under the target folder.
//!
//! Without Chromium and chromedriver the test says SKIP loudly and passes, unless `HEADSTART_REQUIRE_BROWSER=1`
//! (as `.ci/run` sets it): then it fails.

mod support;
#[path = "support/webdriver.rs"]
mod webdriver;

use std::path::PathBuf;
use std::time::Duration;

use headstart::core::model::{StopReason, Usage, UserMessage};
use headstart::store::{CallKey, RunEnd, RunOutcome, RunState, TranscriptStore};
use headstart_serve::{router, Changes, Options, Source};
use headstart_store::conformance::data::{admit, call, fragment, prefix, result};
use support::StoreFile;
use webdriver::Driver;

/// Generous: Chromium starts slowly on a busy machine.
const PATIENCE: Duration = Duration::from_secs(90);

/// The first of `names` found in `CHROMIUM`/`CHROMEDRIVER`'s value, /usr/bin or the PATH.
fn program(variable: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(variable) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut folders: Vec<PathBuf> = vec![PathBuf::from("/usr/bin")];
    folders.extend(std::env::split_paths(&path));
    names
        .iter()
        .flat_map(|name| folders.iter().map(move |folder| folder.join(name)))
        .find(|candidate| candidate.is_file())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_sees_a_result_arrive_live() {
    let chromium = program("CHROMIUM", &["chromium", "chromium-browser", "google-chrome"]);
    let chromedriver = program("CHROMEDRIVER", &["chromedriver"]);
    let browser = chromium
        .zip(chromedriver)
        .ok_or_else(|| "chromium or chromedriver is missing (apt-get install chromium chromium-driver)".to_owned());
    let Some((chromium, chromedriver)) = headstart_testkit::skip::or_skip(
        "HEADSTART_REQUIRE_BROWSER",
        "a_browser_sees_a_result_arrive_live",
        browser,
    ) else {
        return;
    };

    // A session whose early call started and has no result yet.
    let file = StoreFile::new();
    let writer = file.writer();
    let older = writer.create_session(1).await.expect("older session");
    writer
        .append_user(&older, &UserMessage::new("an older run"), 1)
        .await
        .expect("user");
    let session = writer.create_session(1_000).await.expect("session");
    writer
        .append_user(&session, &UserMessage::new("Look up tokio, live"), 1_000)
        .await
        .expect("user");
    let lookup = call("lookup_tokio", "lookup_crate");
    writer
        .commit_fragment(
            &session,
            0,
            &prefix("turn-0", "Looking up tokio.", std::slice::from_ref(&lookup)),
            &admit(&[&lookup]),
            50_000,
        )
        .await
        .expect("prefix");
    writer
        .mark_started(&session, &CallKey::new(0, "lookup_tokio"), 51_000)
        .await
        .expect("started");

    // The server, read-only, on a free port.
    let store = std::sync::Arc::new(headstart::store::SqliteStore::open_read_only(&file.path).expect("open"));
    let source = Source {
        store: store.clone(),
        changes: Changes::DataVersion(store),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(headstart_serve::serve(
        listener,
        router(source, &Options::default()),
        std::future::pending(),
    ));

    let driver = Driver::start(&chromedriver).await;
    let profile = tempfile::tempdir().expect("profile dir");
    let args: Vec<String> = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,900",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .chain([format!("--user-data-dir={}", profile.path().display())])
    .collect();
    let browser = driver.session(&chromium, &args).await;

    // The listing, newest first; follow the session's link.
    browser.go(&format!("http://{addr}/")).await;
    let row = format!("tr.session[data-session-id=\"{session}\"]");
    browser.wait_for(&row, PATIENCE).await;
    browser.click(&format!("{row} td.id a")).await;
    browser.wait_for("#transcript", PATIENCE).await;
    let call_item = "li.call[data-call-id=\"lookup_tokio\"]";
    browser.wait_for(call_item, PATIENCE).await;
    let state = browser
        .script(
            "return document.querySelector(arguments[0]).getAttribute('data-state');",
            call_item,
        )
        .await;
    assert_eq!(state, "started");
    assert_eq!(
        browser.text("div.result[data-call-id=\"lookup_tokio\"]").await,
        None,
        "no result yet"
    );
    // The live events are connected before anything more is written.
    let deadline = std::time::Instant::now() + PATIENCE;
    while browser.text("#live").await.as_deref() != Some("live") {
        assert!(std::time::Instant::now() < deadline, "the live events never connected");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Another connection writes the result, then the response's last fragment with a sync call.
    let written = std::time::Instant::now();
    let finished = Some(RunEnd {
        state: RunState::Finished,
        outcome: RunOutcome::Finished,
        started_at_us: Some(51_000),
    });
    writer
        .append_tool_result(
            &session,
            0,
            &result(&lookup, "tokio 1.x: an async runtime"),
            finished,
            900_000,
        )
        .await
        .expect("result");
    let shown = browser
        .wait_for("div.result[data-call-id=\"lookup_tokio\"]", PATIENCE)
        .await;
    println!(
        "live: the result showed {} ms after its write",
        written.elapsed().as_millis()
    );
    assert!(shown.contains("tokio 1.x: an async runtime"), "{shown}");
    browser
        .wait_for("#timeline rect.call[data-call-id=\"lookup_tokio\"]", PATIENCE)
        .await;

    let write = call("write_summary", "write_file");
    let last = fragment(
        "turn-0",
        StopReason::ToolUse,
        "Writing it down.",
        std::slice::from_ref(&write),
        Usage::default(),
    );
    writer
        .commit_fragment(&session, 0, &last, &admit(&[&write]), 1_200_000)
        .await
        .expect("last fragment");
    browser
        .wait_for("li.call[data-call-id=\"write_summary\"]", PATIENCE)
        .await;

    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let shot = browser.screenshot(&target.join("serve-browser.png")).await;
    println!("screenshot: {}", shot.display());
    browser.quit().await;
}
