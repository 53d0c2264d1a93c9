//! headstart-mcp against a hostile stdio server (`tests/fixtures/hostile_mcp.py`, run with python3): a server that
//! never answers `initialize`, paginates `tools/list` forever, lists too many or too big tools, never answers a
//! call, answers with 50 MiB, or sends a line bigger than a message may be; and what it sees of the environment.
//!
//! Timeouts are short (2 s) and only generous upper bounds of time are asserted, with the measured figure printed.
//! Every server process is killed when its handle drops, pass or fail (`kill_on_drop`).

mod support;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use headstart::{CancellationToken, Tool, ToolContext, Toolbox};
use headstart_mcp::{McpError, McpLimits, McpServer, ToolPolicy, INHERITED_ENV};
use serde_json::{json, Value};
use support::{call, deltas, done, run, start};

const SHORT: Duration = Duration::from_secs(2);
/// The most any of these failures may take on a busy machine (they take about `SHORT`).
const GENEROUS: Duration = Duration::from_secs(20);

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile_mcp.py")
}

/// The python3 interpreter itself, not a shim (pyenv's sets variables and PATH of its own in the server's
/// environment).
fn python() -> &'static PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let output = std::process::Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 runs");
        PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
    })
}

fn hostile(mode: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(python());
    command.arg(script()).args(mode);
    command
}

fn short_limits() -> McpLimits {
    McpLimits {
        initialize_timeout: SHORT,
        list_timeout: SHORT,
        call_timeout: SHORT,
        ..McpLimits::default()
    }
}

async fn evil(mode: &[&str], limits: McpLimits) -> Result<McpServer, McpError> {
    McpServer::stdio_with_limits("evil", hostile(mode), limits).await
}

/// `f`'s result and how long it took, printed.
async fn timed<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    let began = Instant::now();
    let out = f.await;
    let took = began.elapsed();
    eprintln!("{what}: {took:?}");
    assert!(took < GENEROUS, "{what} took {took:?}");
    out
}

#[tokio::test]
async fn a_server_that_never_answers_initialize_times_out() {
    let error = timed("initialize", evil(&["silent"], short_limits()))
        .await
        .expect_err("no handshake");
    assert!(matches!(error, McpError::Timeout { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "MCP server `evil`: no answer to initialize within 2 s"
    );
}

#[tokio::test]
async fn endless_pagination_is_refused_at_the_page_cap() {
    let server = evil(&["paginate"], short_limits())
        .await
        .expect("the handshake succeeds");
    let error = timed("100 pages", server.list())
        .await
        .expect_err("the pages never end");
    assert!(matches!(error, McpError::TooManyPages { limit: 100, .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "MCP server `evil`: tools/list went on past 100 pages (the limit)"
    );
}

#[tokio::test]
async fn slow_endless_pagination_is_refused_at_the_total_timeout() {
    let server = evil(&["paginate", "0.2"], short_limits())
        .await
        .expect("the handshake succeeds");
    let error = timed("slow pages", server.list())
        .await
        .expect_err("the pages never end");
    assert!(matches!(error, McpError::Timeout { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "MCP server `evil`: no answer to tools/list (all pages) within 2 s"
    );
}

#[tokio::test]
async fn too_many_tools_and_too_big_a_tool_are_refused() {
    let many = evil(&["many-tools"], McpLimits::default())
        .await
        .expect("the handshake succeeds");
    let error = many.list().await.expect_err("10000 tools");
    assert!(matches!(error, McpError::TooManyTools { limit: 512, .. }), "{error:?}");

    let big = evil(&["big-schema"], McpLimits::default())
        .await
        .expect("the handshake succeeds");
    let error = big.list().await.expect_err("a 13 MB schema");
    assert!(
        matches!(error, McpError::ToolTooLarge { ref tool, .. } if tool == "huge"),
        "{error:?}"
    );
    assert!(error.to_string().contains("over the 64 KiB limit"), "{error}");
}

#[tokio::test]
async fn a_line_over_the_message_limit_closes_the_connection() {
    let server = evil(&["big-line"], McpLimits::default())
        .await
        .expect("the handshake succeeds");
    let error = timed("40 MiB line", server.list())
        .await
        .expect_err("the line is over 16 MiB");
    assert!(matches!(error, McpError::MessageTooLarge { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "MCP server `evil`: sent a message over 16 MiB (the limit); the connection was closed"
    );
}

async fn toolbox(server: &McpServer) -> Toolbox {
    let mut toolbox = Toolbox::new();
    server
        .register(&mut toolbox, &ToolPolicy::untrusted())
        .await
        .expect("the tools register");
    toolbox
}

#[tokio::test]
async fn a_call_that_never_answers_fails_at_its_timeout_and_the_server_keeps_serving() {
    let server = evil(&["tools"], short_limits()).await.expect("the handshake succeeds");
    let response = deltas(
        [start()]
            .into_iter()
            .chain(call(0, "hang", "evil__hang", json!({})))
            .chain(call(1, "echo", "evil__echo", json!({"message": "still here"})))
            .chain([done()]),
    );
    let run = timed(
        "a call that never answers",
        run(toolbox(&server).await, response, CancellationToken::new(), |_| {}),
    )
    .await;
    assert!(run.result("hang").is_error);
    assert_eq!(
        run.text("hang"),
        "MCP server `evil`: no answer to tools/call `hang` within 2 s; it was sent notifications/cancelled"
    );
    assert_eq!(run.text("echo"), "still here");
    // The cancellation is sent in the background: ask until the server has it.
    let cancellations = server
        .tools(&ToolPolicy::untrusted())
        .await
        .expect("listed")
        .into_iter()
        .find(|tool| tool.mcp_name() == "cancellations")
        .expect("offered");
    let deadline = Instant::now() + GENEROUS;
    loop {
        let output = cancellations
            .execute(Default::default(), ToolContext::detached("c"))
            .await
            .expect("the server answers");
        let seen: Vec<Value> = serde_json::from_str(output.content[0].as_text().unwrap_or("")).expect("JSON");
        if !seen.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server never saw notifications/cancelled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_50_mib_result_is_cut_to_the_result_limit() {
    // A message limit above 50 MiB, so the result limit is what cuts it.
    let limits = McpLimits {
        max_message_bytes: 64 * 1024 * 1024,
        ..short_limits()
    };
    let limits = McpLimits {
        call_timeout: Duration::from_secs(60),
        ..limits
    };
    let server = evil(&["tools"], limits).await.expect("the handshake succeeds");
    let response = deltas(
        [start()]
            .into_iter()
            .chain(call(0, "flood", "evil__flood", json!({})))
            .chain([done()]),
    );
    let run = timed(
        "a 50 MiB result",
        run(toolbox(&server).await, response, CancellationToken::new(), |_| {}),
    )
    .await;
    let result = run.result("flood");
    assert!(!result.is_error, "{}", run.text("flood"));
    let stored: usize = result
        .content
        .iter()
        .filter_map(|block| block.as_text())
        .map(str::len)
        .sum();
    eprintln!("stored {stored} bytes of text");
    assert!(stored <= 256 * 1024 + 100, "stored {stored} bytes");
    assert!(
        stored >= 256 * 1024,
        "the result is cut at the limit, not before: {stored}"
    );
    assert!(
        run.text("flood")
            .ends_with("[MCP result cut to the limit: the server sent 52428800 bytes]"),
        "{}",
        &run.text("flood")[run.text("flood").len() - 100..]
    );
    assert_eq!(result.details, Value::Null);
}

#[tokio::test]
async fn a_result_over_the_message_limit_fails_the_call_clearly() {
    let limits = McpLimits {
        call_timeout: Duration::from_secs(60),
        ..short_limits()
    };
    let server = evil(&["tools"], limits).await.expect("the handshake succeeds");
    let flood = server
        .tools(&ToolPolicy::untrusted())
        .await
        .expect("listed")
        .into_iter()
        .find(|tool| tool.mcp_name() == "flood")
        .expect("offered");
    let error = timed(
        "a 50 MiB message",
        flood.execute(Default::default(), ToolContext::detached("f")),
    )
    .await
    .expect_err("the message is over 16 MiB");
    assert_eq!(
        error.message,
        "MCP server `evil` sent a message over 16 MiB (the limit) during the call to `flood`; the connection was \
         closed"
    );
}

#[tokio::test]
async fn the_server_sees_only_the_safe_environment_and_what_its_command_sets() {
    let mut command = hostile(&["tools"]);
    command.env("HS_GIVEN", "yes");
    let server = McpServer::stdio_with_limits("evil", command, short_limits())
        .await
        .expect("the handshake succeeds");
    let env = server
        .tools(&ToolPolicy::untrusted())
        .await
        .expect("listed")
        .into_iter()
        .find(|tool| tool.mcp_name() == "env")
        .expect("offered");
    let output = env
        .execute(Default::default(), ToolContext::detached("e"))
        .await
        .expect("the server answers");
    let seen: serde_json::Map<String, Value> =
        serde_json::from_str(output.content[0].as_text().unwrap_or("")).expect("JSON");
    assert_eq!(seen.get("HS_GIVEN"), Some(&json!("yes")));
    if let Ok(path) = std::env::var("PATH") {
        assert_eq!(seen.get("PATH"), Some(&json!(path)), "PATH is passed on");
    }
    // Nothing else of the test's environment (cargo sets plenty: CARGO_MANIFEST_DIR, CARGO_PKG_NAME, …) reaches it.
    let leaked: Vec<String> = std::env::vars()
        .filter(|(name, value)| !INHERITED_ENV.contains(&name.as_str()) && seen.get(name) == Some(&json!(value)))
        .map(|(name, _)| name)
        .collect();
    assert!(leaked.is_empty(), "leaked to the server: {leaked:?}");
    assert!(
        std::env::vars().any(|(name, _)| !INHERITED_ENV.contains(&name.as_str()) && name != "HS_GIVEN"),
        "the test's environment has something that could leak"
    );
}
