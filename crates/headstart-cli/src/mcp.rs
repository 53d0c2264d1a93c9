//! `headstart mcp tools [--trusted] [--name NAME] [--env NAME] [--timeout SECS] -- COMMAND ARGS…`: start a stdio
//! MCP server and print its tools as headstart would register them — name, description, schema, and the flags
//! applied, each with its reason. A server that does not answer `initialize`, or list its tools, within
//! `--timeout` is a one-line error naming it.
//!
//! [`limits`] and [`default_timeout_secs`] also serve `run`'s `--mcp-timeout`: one place turns the flag into
//! [`McpLimits`].

use std::time::Duration;

use headstart::Tool;
use headstart_mcp::rmcp::model::ToolAnnotations;
use headstart_mcp::{McpLimits, McpServer, McpTool, ToolFlags, ToolPolicy};
use serde::Serialize;
use serde_json::Value;

/// Arguments of `headstart mcp`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// List a stdio server's tools as JSON, with the flags headstart would apply and why.
    Tools(ToolsArgs),
}

#[derive(clap::Args)]
struct ToolsArgs {
    /// Believe the server's annotations (readOnlyHint, idempotentHint); by default they are ignored, e.g.
    /// `--trusted`.
    #[arg(long)]
    trusted: bool,
    /// The server's name: the prefix of its tools' names and its conflict key, e.g. `--name everything`.
    #[arg(long, default_value = "mcp")]
    name: String,
    /// A variable of headstart's environment to pass to the server, which starts with a clean environment (only
    /// HOME, LOGNAME, PATH, SHELL, TERM, USER); repeatable, e.g. `--env GITHUB_TOKEN`.
    #[arg(long, value_name = "NAME")]
    env: Vec<String>,
    /// Seconds the server has to answer `initialize`, and again to list all its tools (every page), before the
    /// command stops with an error naming the server, e.g. `--timeout 10`.
    #[arg(long, value_name = "SECS", default_value_t = default_timeout_secs(),
        value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// The server's command line, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// The default of `mcp tools --timeout` and `run --mcp-timeout`: headstart-mcp's own, in seconds.
pub(crate) fn default_timeout_secs() -> u64 {
    McpLimits::default().initialize_timeout.as_secs()
}

/// The limits of a server that has `secs` seconds to answer `initialize`, and again to list its tools; the rest
/// are headstart-mcp's defaults.
pub(crate) fn limits(secs: u64) -> McpLimits {
    McpLimits {
        initialize_timeout: Duration::from_secs(secs),
        list_timeout: Duration::from_secs(secs),
        ..McpLimits::default()
    }
}

/// What is printed.
#[derive(Serialize)]
struct Listing<'a> {
    server: &'a str,
    trusted: bool,
    tools: Vec<Listed<'a>>,
}

/// One tool as headstart registers it.
#[derive(Serialize)]
struct Listed<'a> {
    name: &'a str,
    mcp_name: &'a str,
    description: &'a str,
    schema: Value,
    annotations: Option<&'a ToolAnnotations>,
    #[serde(flatten)]
    flags: &'a ToolFlags,
}

impl<'a> Listed<'a> {
    fn of(tool: &'a McpTool) -> Self {
        Listed {
            name: tool.headstart_name(),
            mcp_name: tool.mcp_name(),
            description: tool.spec().description.as_str(),
            schema: tool.spec().parameters.clone(),
            annotations: tool.definition().annotations.as_ref(),
            flags: tool.flags(),
        }
    }
}

/// Runs `headstart mcp`; exit status 1 when the server cannot be started or listed.
pub fn run(args: &Args) -> u8 {
    let Command::Tools(args) = &args.command;
    match list(args) {
        Ok(text) => {
            println!("{text}");
            0
        }
        Err(error) => {
            eprintln!("headstart mcp tools: {error}");
            1
        }
    }
}

fn list(args: &ToolsArgs) -> Result<String, String> {
    let (program, rest) = args.command.split_first().ok_or("no server command after `--`")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start a runtime: {error}"))?;
    runtime.block_on(async {
        let mut command = tokio::process::Command::new(program);
        command.args(rest);
        for name in &args.env {
            let value = std::env::var_os(name).ok_or_else(|| format!("--env {name}: {name} is not set"))?;
            command.env(name, value);
        }
        let server = McpServer::stdio_with_limits(args.name.clone(), command, limits(args.timeout))
            .await
            .map_err(|error| error.to_string())?;
        let policy = if args.trusted {
            ToolPolicy::trusted()
        } else {
            ToolPolicy::untrusted()
        };
        let tools = server.tools(&policy).await.map_err(|error| error.to_string())?;
        let listing = Listing {
            server: server.name(),
            trusted: args.trusted,
            tools: tools.iter().map(Listed::of).collect(),
        };
        serde_json::to_string_pretty(&listing).map_err(|error| error.to_string())
    })
}
