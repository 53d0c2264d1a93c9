//! `headstart serve`, `demo --serve` and `run --serve` as a user runs them: the refusals, then a server whose printed
//! URL answers with the run's session while the command lingers.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use headstart_providers::replay_server::{ReplayServer, Reply};
use serde_json::json;
use support::{answer, anthropic, command, workdir, ChildGuard, DELAY};
use tokio::io::AsyncBufReadExt;

fn headstart() -> Command {
    Command::new(env!("CARGO_BIN_EXE_headstart"))
}

#[test]
fn serving_another_address_needs_a_token_and_a_store_must_exist() {
    let dir = tempfile::tempdir().expect("tempdir");
    let refused = headstart()
        .current_dir(dir.path())
        .args(["serve", "missing.db", "--addr", "0.0.0.0:0"])
        .output()
        .expect("run");
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("not a loopback address") && stderr.contains("--token"),
        "{stderr}"
    );

    let missing = headstart()
        .current_dir(dir.path())
        .args(["serve", "missing.db", "--addr", "127.0.0.1:0"])
        .output()
        .expect("run");
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("missing.db does not exist"));
    assert!(!dir.path().join("missing.db").exists(), "serve creates nothing");
}

/// `GET path` on `addr` (`host:port`), the body.
fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    answer
}

#[test]
fn demo_serve_prints_a_url_that_shows_its_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = ChildGuard::spawn(
        headstart()
            .current_dir(dir.path())
            .args(["demo", "--no-progress", "--out-dir", "out", "--serve", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped()),
    )
    .expect("start the demo");
    let mut lines = BufReader::new(demo.stdout().expect("stdout")).lines();
    let mut url = None;
    let mut session = None;
    for line in lines.by_ref() {
        let line = line.expect("a line");
        if let Some(at) = line.strip_prefix("headstart demo: the live view is at ") {
            url = Some(at.trim().to_owned());
        }
        if let Some(rest) = line.strip_prefix("Transcript: headstart.db (session ") {
            session = rest.split(')').next().map(str::to_owned);
        }
        if line.starts_with("Serving ") {
            break; // the demo is over; the server goes on until Ctrl-C
        }
    }
    let url = url.expect("the URL was printed");
    let session = session.expect("the session was printed");
    let addr = url.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let listing = get(&addr, "/");
    assert!(listing.starts_with("HTTP/1.1 200"), "{listing}");
    assert!(listing.contains(&format!("data-session-id=\"{session}\"")), "{listing}");
    let page = get(&addr, &format!("/sessions/{session}"));
    assert!(page.contains("<svg") && page.contains("lookup_crate"), "{page}");
    demo.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serve_shows_the_run_with_its_results() {
    let replies = vec![
        Reply::Events(anthropic(
            Some("Reading. "),
            &[("toolu_read", "read_file", json!({"path": "notes.txt"}))],
        )),
        answer(),
    ];
    let server = ReplayServer::start(replies, Default::default(), DELAY)
        .await
        .expect("replay server");
    let dir = workdir();
    let args = [
        "run",
        "--no-progress",
        "--serve",
        "127.0.0.1:0",
        "What do the notes say?",
    ];
    // kill_on_drop: the lingering server ends with the test, pass or fail.
    let mut run = command(dir.path(), &server, "anthropic", &args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the run");
    let stdout = run.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut url = None;
    let mut session = None;
    let read = async {
        while let Some(line) = lines.next_line().await.expect("a line") {
            if let Some(rest) = line.strip_prefix("headstart run: the live view is at ") {
                url = rest.split(' ').next().map(str::to_owned);
                session = rest
                    .split("/sessions/")
                    .nth(1)
                    .map(|tail| tail.trim_end_matches(')').to_owned());
            }
            if line.starts_with("Serving ") {
                return; // the run is over; the server goes on until Ctrl-C
            }
        }
        panic!("the run ended without serving");
    };
    tokio::time::timeout(std::time::Duration::from_secs(120), read)
        .await
        .expect("the run finished and served");
    let url = url.expect("the URL was printed");
    let session = session.expect("the session was printed");
    let addr = url.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let page = tokio::task::spawn_blocking(move || get(&addr, &format!("/sessions/{session}")))
        .await
        .expect("get");
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(
        page.contains("hello from the notes"),
        "the read_file result is shown: {page}"
    );
    assert!(page.contains("The notes say hello."), "the answer is shown: {page}");
    assert!(page.contains("answered"), "the session says it was answered: {page}");
    run.start_kill().expect("kill");
    run.wait().await.expect("wait");
}
