//! `headstart mcp tools` against the MCP reference server (installed by the test setup, see
//! `headstart_mcp::testing`): valid JSON naming each tool with its schema and flags; `--trusted` makes the
//! read-only tools async; a server that never answers is a one-line error once `--timeout` has passed.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use headstart_mcp::testing::server_everything_or_skip;
use serde_json::Value;

fn headstart(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_headstart"))
        .args(args)
        .output()
        .expect("the headstart binary runs")
}

fn listing(trusted: bool, entry: &Path) -> Value {
    let entry = entry.to_str().expect("a UTF-8 path");
    let mut args = vec!["mcp", "tools", "--name", "everything"];
    if trusted {
        args.push("--trusted");
    }
    args.extend(["--", "node", entry, "stdio"]);
    let output = headstart(&args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("the listing is JSON")
}

fn tool<'a>(listing: &'a Value, mcp_name: &str) -> &'a Value {
    listing["tools"]
        .as_array()
        .expect("a tools array")
        .iter()
        .find(|tool| tool["mcp_name"] == mcp_name)
        .unwrap_or_else(|| panic!("{mcp_name} is listed"))
}

#[test]
fn lists_tools_with_schemas_flags_and_reasons() {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-cache");
    let Some(entry) = server_everything_or_skip(&cache) else {
        return;
    };

    let untrusted = listing(false, &entry);
    assert_eq!(untrusted["trusted"], false);
    for tool in untrusted["tools"].as_array().expect("a tools array") {
        assert!(
            tool["name"]
                .as_str()
                .is_some_and(|name| name.starts_with("everything__")),
            "{tool}"
        );
        assert_eq!(tool["schema"]["type"], "object", "{tool}");
        assert_eq!(tool["async"], false, "{tool}");
        for flag in ["async", "idempotent", "conflict_key", "sequential"] {
            assert!(tool["reasons"][flag].is_string(), "no reason for {flag}: {tool}");
        }
    }
    let echo = tool(&untrusted, "echo");
    assert_eq!(echo["name"], "everything__echo");
    assert_eq!(echo["annotations"]["readOnlyHint"], true, "the server's claim is shown");
    assert!(echo["reasons"]["async"]
        .as_str()
        .is_some_and(|why| why.contains("not trusted")));

    let trusted = listing(true, &entry);
    let echo = tool(&trusted, "echo");
    assert_eq!(echo["async"], true);
    assert_eq!(echo["idempotent"], true);
    assert_eq!(echo["conflict_key"], Value::Null);
    let toggle = tool(&trusted, "toggle-simulated-logging");
    assert_eq!(toggle["async"], false);
    assert_eq!(toggle["conflict_key"], "mcp:everything");
}

#[test]
fn a_server_that_cannot_start_is_a_clear_error() {
    let output = headstart(&["mcp", "tools", "--", "/nonexistent/mcp-server"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot start `/nonexistent/mcp-server`"), "{stderr}");
}

#[test]
fn a_server_that_never_answers_is_one_line_after_the_timeout() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../headstart-mcp/tests/fixtures/hostile_mcp.py");
    let script = script.to_str().expect("a UTF-8 path");
    let began = Instant::now();
    let args = [
        "mcp",
        "tools",
        "--name",
        "evil",
        "--timeout",
        "1",
        "--",
        "python3",
        script,
        "silent",
    ];
    let output = headstart(&args);
    let took = began.elapsed();
    eprintln!("mcp tools took {took:?}");
    assert_eq!(output.status.code(), Some(1));
    // Well under the 30 s default: the flag, not the default, ended it.
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim_end(),
        "headstart mcp tools: MCP server `evil`: no answer to initialize within 1 s"
    );
    assert!(output.stdout.is_empty(), "{}", String::from_utf8_lossy(&output.stdout));
}
