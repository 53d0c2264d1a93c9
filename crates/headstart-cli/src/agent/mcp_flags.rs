//! The `--mcp` and `--mcp-env` values: which servers to start, and which variables each may see.

use crate::failure::Failure;

/// One `--mcp` value: the server's name and its command line.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct McpSpec {
    pub(super) name: String,
    pub(super) program: String,
    pub(super) args: Vec<String>,
}

impl McpSpec {
    /// Reads `[NAME=]COMMAND ARGS…`.
    pub(super) fn parse(text: &str) -> Result<McpSpec, Failure> {
        let (name, command) = match text.split_once('=') {
            Some((name, command)) if !name.is_empty() && !name.contains(char::is_whitespace) => {
                (Some(name.to_owned()), command)
            }
            _ => (None, text),
        };
        let mut words = command.split_whitespace().map(str::to_owned);
        let program = words
            .next()
            .ok_or_else(|| Failure::Usage(format!("--mcp {text:?}: no command")))?;
        let name = name.unwrap_or_else(|| {
            std::path::Path::new(&program)
                .file_stem()
                .map_or_else(|| program.clone(), |stem| stem.to_string_lossy().into_owned())
        });
        Ok(McpSpec {
            name,
            program,
            args: words.collect(),
        })
    }
}

/// One `--mcp-env` value: a variable passed to one server, or to all.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct McpEnv {
    pub(super) server: Option<String>,
    pub(super) name: String,
}

impl McpEnv {
    /// Reads `[SERVER:]NAME`.
    pub(super) fn parse(text: &str) -> Result<McpEnv, Failure> {
        let (server, name) = match text.split_once(':') {
            Some((server, name)) => (Some(server.to_owned()), name),
            None => (None, text),
        };
        if name.is_empty() || name.contains(['=', '\0']) || server.as_deref() == Some("") {
            return Err(Failure::Usage(format!(
                "--mcp-env {text:?}: expected NAME or SERVER:NAME, e.g. --mcp-env github:GITHUB_TOKEN"
            )));
        }
        Ok(McpEnv {
            server,
            name: name.to_owned(),
        })
    }

    pub(super) fn is_for(&self, server: &str) -> bool {
        self.server.as_deref().is_none_or(|only| only == server)
    }
}
