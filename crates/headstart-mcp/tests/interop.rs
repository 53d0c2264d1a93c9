//! headstart-mcp against the reference server, `@modelcontextprotocol/server-everything` (a pinned version, from
//! the npm registry), over stdio. The package is installed into the target folder's cache once; without node or
//! npm the tests say why and skip, unless `HEADSTART_REQUIRE_MCP=1` (CI) makes that a failure.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use headstart::{CancellationToken, Tool, Toolbox};
use headstart_mcp::testing::server_everything_or_skip;
use headstart_mcp::{McpServer, ToolPolicy};
use serde_json::json;
use support::{call, deltas, done, run, start};

fn cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-cache")
}

async fn everything() -> Option<McpServer> {
    let entry = server_everything_or_skip(&cache())?;
    let mut command = tokio::process::Command::new("node");
    command.arg(entry).arg("stdio");
    Some(
        McpServer::stdio("everything", command)
            .await
            .expect("server-everything starts and shakes hands"),
    )
}

fn valid_for_providers(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[tokio::test]
async fn lists_server_everything_tools_and_flags_them() {
    let Some(server) = everything().await else { return };
    let untrusted = server
        .tools(&ToolPolicy::untrusted())
        .await
        .expect("tools/list succeeds");
    assert!(
        untrusted.len() >= 10,
        "server-everything offers a dozen tools, listed {}",
        untrusted.len()
    );
    for tool in &untrusted {
        assert!(valid_for_providers(&tool.spec().name), "{}", tool.spec().name);
        assert!(tool.spec().name.starts_with("everything__"), "{}", tool.spec().name);
        assert!(!tool.spec().early, "untrusted, {} is sync", tool.spec().name);
        assert_eq!(
            tool.conflict_key(&Default::default()).as_deref(),
            Some("mcp:everything")
        );
    }
    let trusted = server.tools(&ToolPolicy::trusted()).await.expect("tools/list succeeds");
    let flags = |name: &str| {
        trusted
            .iter()
            .find(|tool| tool.mcp_name() == name)
            .unwrap_or_else(|| panic!("{name} is listed"))
            .flags()
            .clone()
    };
    // echo says readOnlyHint: true; toggle-simulated-logging says readOnlyHint: false, idempotentHint: false.
    let echo = flags("echo");
    assert!(echo.early && echo.idempotent && echo.conflict_key.is_none());
    let toggle = flags("toggle-simulated-logging");
    assert!(!toggle.early && !toggle.idempotent);
    assert_eq!(toggle.conflict_key.as_deref(), Some("mcp:everything"));
    // Every schema the server publishes compiles.
    let mut toolbox = Toolbox::new();
    let names = server
        .register(&mut toolbox, &ToolPolicy::trusted())
        .await
        .expect("every schema compiles");
    assert_eq!(names.len(), toolbox.len());
}

#[tokio::test]
async fn calls_server_everything_tools_through_the_engine() {
    let Some(server) = everything().await else { return };
    let mut toolbox = Toolbox::new();
    server
        .register(&mut toolbox, &ToolPolicy::trusted())
        .await
        .expect("the tools register");
    let response = deltas(
        [start()]
            .into_iter()
            .chain(call(0, "echo", "everything__echo", json!({"message": "hi"})))
            .chain(call(1, "sum", "everything__get-sum", json!({"a": 2, "b": 3})))
            .chain(call(2, "image", "everything__get-tiny-image", json!({})))
            .chain(call(
                3,
                "weather",
                "everything__get-structured-content",
                json!({"location": "Chicago"}),
            ))
            .chain(call(
                4,
                "long",
                "everything__trigger-long-running-operation",
                json!({"duration": 0.6, "steps": 3}),
            ))
            .chain([done()]),
    );
    let run = run(toolbox, response, CancellationToken::new(), |_| {}).await;
    assert_eq!(run.text("echo"), "Echo: hi");
    assert!(run.text("sum").contains('5'), "{}", run.text("sum"));
    let image = run.text("image");
    assert!(image.contains("[image image/png"), "the image is described: {image}");
    assert_eq!(run.result("image").details["content"][0]["type"], "image");
    assert_eq!(run.result("weather").details["structured_content"]["temperature"], 36);
    assert!(run.text("long").contains("completed"), "{}", run.text("long"));
    let updates = run.updates("long");
    assert!(
        !updates.is_empty(),
        "progress notifications arrive as updates: {:?}",
        run.names()
    );
    assert!(updates[0].details["total"] == 3.0, "{:?}", updates[0].details);
}

#[tokio::test]
async fn a_cancelled_call_ends_promptly_and_the_server_keeps_serving() {
    let Some(server) = everything().await else { return };
    let mut toolbox = Toolbox::new();
    server
        .register(&mut toolbox, &ToolPolicy::untrusted())
        .await
        .expect("the tools register");
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    let response = deltas(
        [start()]
            .into_iter()
            .chain(call(
                0,
                "long",
                "everything__trigger-long-running-operation",
                json!({"duration": 60, "steps": 60}),
            ))
            .chain([done()]),
    );
    let began = Instant::now();
    let run_cancelled = run(toolbox.clone(), response, cancel, move |event| {
        if event.type_name() == "tool_execution_start" {
            canceller.cancel();
        }
    })
    .await;
    assert!(run_cancelled.result("long").is_error);
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "the 60 s operation was cut short"
    );
    let again = deltas(
        [start()]
            .into_iter()
            .chain(call(0, "echo", "everything__echo", json!({"message": "still here"})))
            .chain([done()]),
    );
    let run_again = run(toolbox, again, CancellationToken::new(), |_| {}).await;
    assert_eq!(run_again.text("echo"), "Echo: still here");
}

#[tokio::test]
async fn connects_over_streamable_http() {
    let Some(entry) = server_everything_or_skip(&cache()) else {
        return;
    };
    // A free port: bound, read, released, then handed to the server (it refuses to start if another took it).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let mut node = tokio::process::Command::new("node")
        .arg(entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "server-everything did not listen on port {port}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let server = McpServer::http("web", format!("http://127.0.0.1:{port}/mcp"))
        .await
        .expect("the handshake succeeds");
    let mut toolbox = Toolbox::new();
    let names = server
        .register(&mut toolbox, &ToolPolicy::trusted())
        .await
        .expect("the tools register");
    assert!(names.iter().any(|name| name == "web__echo"), "{names:?}");
    let response = deltas(
        [start()]
            .into_iter()
            .chain(call(0, "echo", "web__echo", json!({"message": "over http"})))
            .chain([done()]),
    );
    let run = run(toolbox, response, CancellationToken::new(), |_| {}).await;
    assert_eq!(run.text("echo"), "Echo: over http");
    drop(server);
    let _ = node.kill().await;
}
