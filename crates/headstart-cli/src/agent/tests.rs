//! The `--mcp` and `--mcp-env` values are read as documented, and refused with a usage error otherwise.

use super::mcp_flags::{McpEnv, McpSpec};
use crate::failure::Failure;

#[test]
fn mcp_specs_name_the_server_and_split_its_command() {
    let spec = McpSpec::parse("everything=npx -y @modelcontextprotocol/server-everything stdio").expect("valid");
    assert_eq!(spec.name, "everything");
    assert_eq!(spec.program, "npx");
    assert_eq!(spec.args, ["-y", "@modelcontextprotocol/server-everything", "stdio"]);
    let spec = McpSpec::parse("/usr/bin/mcp-files --root .").expect("valid");
    assert_eq!(spec.name, "mcp-files");
    assert_eq!(spec.args, ["--root", "."]);
    // An `=` inside an argument does not name the server.
    let spec = McpSpec::parse("srv --opt=1").expect("valid");
    assert_eq!(spec.name, "srv");
    assert!(matches!(McpSpec::parse("  "), Err(Failure::Usage(_))));
    assert!(matches!(McpSpec::parse("name="), Err(Failure::Usage(_))));
}

#[test]
fn mcp_env_names_a_variable_for_all_servers_or_one() {
    let all = McpEnv::parse("GITHUB_TOKEN").expect("valid");
    assert_eq!(all.server, None);
    assert!(all.is_for("github") && all.is_for("files"));
    let one = McpEnv::parse("github:GITHUB_TOKEN").expect("valid");
    assert_eq!(one.name, "GITHUB_TOKEN");
    assert!(one.is_for("github") && !one.is_for("files"));
    for bad in ["", "github:", ":NAME", "NAME=value"] {
        assert!(matches!(McpEnv::parse(bad), Err(Failure::Usage(_))), "{bad:?}");
    }
}
