//! The built-in tools of `headstart run` against a prompt-injected model, end to end through the binary: a local
//! stand-in provider (`headstart_providers::replay_server`) scripts the model's calls, and local page servers
//! record whether anything reached them. Every address is on 127.0.0.1; the link-local one is refused before any
//! connection.
//!
//! - `fetch_url` is offered only with `--fetch`; called anyway, it is not found and fetches nothing.
//! - With `--fetch`, every spelling of loopback (decimal, octal, hex, IPv4-mapped IPv6, `localhost`, `[::1]`), a
//!   redirect towards it, and the link-local metadata address are refused, and the target records no request.
//! - With `--fetch-allow-private`, loopback is fetched; a large body is cut at the limit with a note; a redirect to
//!   another port and a sixth redirect are refused. `--fetch-allow` restricts the hosts.
//! - `read_file` refuses the transcript and `.env` by default; `--read-secrets` reads `.env`, never the
//!   transcript.
//!
//! The tools' own tests (symlink swaps, FIFOs, devices, a 3 GiB sparse file, trickling bodies) call them directly:
//! `src/builtin_tools/`.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use headstart_providers::replay_server::{Page, ReplayServer, Reply, Route, SeenRequest};
use serde_json::{json, Value};

mod support;
use support::{answer, anthropic, command, run_to_end, tool_results, DELAY};

/// A page server: `/secret` holds a token a prompt injection would want.
async fn page_server() -> ReplayServer {
    let pages = HashMap::from([(
        "/secret".to_owned(),
        Page {
            delay: Duration::ZERO,
            body: "internal-token-123".into(),
        },
    )]);
    ReplayServer::start(Vec::new(), pages, DELAY).await.unwrap()
}

/// Runs `headstart run ARGS… Go.` in `dir` with a model that makes `calls` (`(url or path)` per tool) in one
/// response, then answers; returns the results the second request carried, by call id, and the first request.
async fn run_calls(dir: &Path, args: &[&str], calls: &[(&str, &str, Value)]) -> (HashMap<String, String>, SeenRequest) {
    let replies = vec![Reply::Events(anthropic(Some("Calling. "), calls)), answer()];
    let provider = ReplayServer::start(replies, HashMap::new(), DELAY).await.unwrap();
    let mut all = args.to_vec();
    all.insert(0, "run");
    all.extend(["--no-progress", "Go."]);
    let output = run_to_end(&mut command(dir, &provider, "anthropic", &all)).await;
    assert!(output.status.success(), "{:?}", output.status);
    let requests = provider.model_requests();
    assert_eq!(requests.len(), 2);
    let results: HashMap<String, String> = tool_results(&requests[1]).into_iter().collect();
    assert_eq!(results.len(), calls.len(), "{results:?}");
    (results, requests[0].clone())
}

fn tool_names(request: &SeenRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect()
}

fn fetch(id: &str, url: &str) -> (String, &'static str, Value) {
    (id.to_owned(), "fetch_url", json!({ "url": url }))
}

fn read(id: &str, path: &str) -> (String, &'static str, Value) {
    (id.to_owned(), "read_file", json!({ "path": path }))
}

/// The calls as `run_calls` takes them.
fn borrowed<'a>(calls: &'a [(String, &'static str, Value)]) -> Vec<(&'a str, &'static str, Value)> {
    calls
        .iter()
        .map(|(id, name, input)| (id.as_str(), *name, input.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_url_is_offered_only_with_fetch() {
    let pages = page_server().await;
    let dir = tempfile::tempdir().unwrap();
    let calls = [fetch("toolu_f", &pages.url("/secret"))];
    let (results, first) = run_calls(dir.path(), &[], &borrowed(&calls)).await;
    let names = tool_names(&first);
    assert!(names.contains(&"read_file".to_owned()), "{names:?}");
    assert!(!names.contains(&"fetch_url".to_owned()), "{names:?}");
    assert!(results["toolu_f"].ends_with("not found"), "{results:?}");
    assert!(pages.requests().is_empty());

    let dir = tempfile::tempdir().unwrap();
    let (_, first) = run_calls(dir.path(), &["--fetch"], &borrowed(&[read("toolu_r", "missing")])).await;
    assert!(tool_names(&first).contains(&"fetch_url".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_a_private_address_is_refused_before_any_request() {
    let target = page_server().await;
    let port = target.address().port();
    let relay = page_server().await;
    relay.route(
        "/go",
        Route::Redirect {
            status: 302,
            location: target.url("/secret"),
        },
    );
    let urls = [
        format!("http://2130706433:{port}/secret"),
        format!("http://0177.0.0.1:{port}/secret"),
        format!("http://0x7f.0.0.1:{port}/secret"),
        format!("http://0x7f000001:{port}/secret"),
        format!("http://[::ffff:127.0.0.1]:{port}/secret"),
        format!("http://localhost:{port}/secret"),
        format!("http://127.0.0.1:{port}/secret"),
        format!("http://[::1]:{port}/secret"),
        relay.url("/go"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
    ];
    let calls: Vec<_> = urls
        .iter()
        .enumerate()
        .map(|(n, url)| fetch(&format!("toolu_{n}"), url))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (results, _) = run_calls(dir.path(), &["--fetch"], &borrowed(&calls)).await;
    for (n, url) in urls.iter().enumerate() {
        let result = &results[&format!("toolu_{n}")];
        eprintln!("{result}");
        assert!(
            result.starts_with(&format!("cannot fetch {url}: refused: ")),
            "{url}: {result}"
        );
        assert!(!result.contains("internal-token"), "{result}");
    }
    assert!(results["toolu_9"].contains("is a link-local address"), "{results:?}");
    assert!(target.requests().is_empty(), "{:?}", target.requests());
    assert!(relay.requests().is_empty(), "{:?}", relay.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_private_fetches_keep_their_limits() {
    let pages = page_server().await;
    let other = page_server().await;
    pages.route(
        "/big",
        Route::Large {
            bytes: 4 << 20,
            fill: b'z',
        },
    );
    pages.route(
        "/away",
        Route::Redirect {
            status: 301,
            location: other.url("/secret"),
        },
    );
    // /r0 → … → /r5 → /secret: six redirects from /r0, five from /r1.
    for hop in 0..6 {
        let location = if hop == 5 {
            "/secret".to_owned()
        } else {
            format!("/r{}", hop + 1)
        };
        pages.route(format!("/r{hop}"), Route::Redirect { status: 302, location });
    }
    let calls = [
        fetch("toolu_page", &pages.url("/secret")),
        fetch("toolu_big", &pages.url("/big")),
        fetch("toolu_away", &pages.url("/away")),
        fetch("toolu_six", &pages.url("/r0")),
        fetch("toolu_five", &pages.url("/r1")),
    ];
    let dir = tempfile::tempdir().unwrap();
    let (results, _) = run_calls(dir.path(), &["--fetch", "--fetch-allow-private"], &borrowed(&calls)).await;
    assert_eq!(results["toolu_page"], "internal-token-123");
    let big = &results["toolu_big"];
    assert!(
        big.ends_with("\n[body cut at 262144 bytes]"),
        "{}",
        &big[big.len() - 60..]
    );
    assert_eq!(big.len(), 262_144 + "\n[body cut at 262144 bytes]".len());
    assert!(results["toolu_away"].contains("refused: a redirect to"), "{results:?}");
    assert!(other.requests().is_empty());
    assert!(
        results["toolu_six"].ends_with("refused: more than 5 redirects"),
        "{results:?}"
    );
    assert_eq!(results["toolu_five"], "internal-token-123");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_allow_restricts_the_hosts() {
    let pages = page_server().await;
    let port = pages.address().port();
    let calls = [
        fetch("toolu_ip", &format!("http://127.0.0.1:{port}/secret")),
        fetch("toolu_name", &format!("http://localhost:{port}/secret")),
    ];
    let dir = tempfile::tempdir().unwrap();
    let args = ["--fetch", "--fetch-allow-private", "--fetch-allow", "LOCALHOST"];
    let (results, first) = run_calls(dir.path(), &args, &borrowed(&calls)).await;
    assert!(
        results["toolu_ip"].contains("refused: 127.0.0.1 is not among the hosts the user allowed (localhost)"),
        "{results:?}"
    );
    assert_eq!(results["toolu_name"], "internal-token-123");
    assert_eq!(pages.requests().len(), 1);
    let description = first.body["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|tool| tool["name"] == "fetch_url"))
        .map(|tool| tool["description"].to_string())
        .unwrap_or_default();
    assert!(description.contains("Only these hosts: localhost."), "{description}");

    // A value that is no host, and the flag without --fetch, are usage errors.
    for args in [
        &["run", "--fetch", "--fetch-allow", "a/b", "Hi"][..],
        &["run", "--fetch-allow", "docs.rs", "Hi"],
    ] {
        let output = run_to_end(&mut command(dir.path(), &pages, "anthropic", args)).await;
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_file_refuses_the_transcript_and_secrets_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), "OPENAI_API_KEY=sk-test").unwrap();
    let calls = [
        read("toolu_db", "headstart.db"),
        read("toolu_db2", "./sub/../headstart.db"),
        read("toolu_env", ".env"),
        read("toolu_etc", "/etc/passwd"),
    ];
    let (results, _) = run_calls(dir.path(), &[], &borrowed(&calls)).await;
    assert_eq!(results["toolu_db"], "refused: headstart.db is this run's transcript");
    assert_eq!(
        results["toolu_db2"],
        "refused: ./sub/../headstart.db is this run's transcript"
    );
    assert_eq!(
        results["toolu_env"],
        "refused: .env looks like a secret (.env); the user can allow it with --read-secrets"
    );
    assert_eq!(
        results["toolu_etc"],
        "no such file in the working directory: /etc/passwd"
    );

    let calls = [read("toolu_db", "headstart.db"), read("toolu_env", ".env")];
    let (results, _) = run_calls(dir.path(), &["--read-secrets"], &borrowed(&calls)).await;
    assert_eq!(results["toolu_env"], "OPENAI_API_KEY=sk-test");
    assert_eq!(results["toolu_db"], "refused: headstart.db is this run's transcript");
}
