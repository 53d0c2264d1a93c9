//! Connection failures are typed errors with a clear message, never panics.

use std::time::Duration;

use headstart_mcp::{McpError, McpServer};

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    let error = McpServer::stdio("gone", tokio::process::Command::new("/nonexistent/mcp-server"))
        .await
        .expect_err("nothing to start");
    assert!(matches!(error, McpError::Spawn { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("MCP server `gone`: cannot start `/nonexistent/mcp-server`"),
        "{error}"
    );
}

#[tokio::test]
async fn a_process_that_exits_at_once_fails_the_handshake() {
    let error = McpServer::stdio("quits", tokio::process::Command::new("true"))
        .await
        .expect_err("`true` speaks no MCP");
    assert!(matches!(error, McpError::Handshake { .. }), "{error:?}");
    assert!(
        error.to_string().starts_with("MCP server `quits`: handshake failed"),
        "{error}"
    );
}

#[tokio::test]
async fn an_http_endpoint_that_refuses_fails_the_handshake() {
    // Port 9 (discard) on loopback: nothing listens there on a test machine.
    let connect = McpServer::http("nowhere", "http://127.0.0.1:9/mcp");
    let error = tokio::time::timeout(Duration::from_secs(60), connect)
        .await
        .expect("the failure is reported in time")
        .expect_err("nothing listens");
    assert!(matches!(error, McpError::Handshake { .. }), "{error:?}");
}
