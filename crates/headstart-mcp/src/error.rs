//! [`McpError`]: what can go wrong while connecting to an MCP server and registering its tools.

use std::time::Duration;

use headstart::ToolboxError;

use crate::limits::{bytes_text, duration_text};

/// A failure to connect to an MCP server, to list its tools, or to register them.
///
/// A failure *during a call* is not an `McpError`: it becomes the call's error result (a [`headstart::ToolError`]),
/// so a server that dies mid-call fails that call and nothing else.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server's process could not be started (program not found, not executable, …).
    #[error("MCP server `{server}`: cannot start `{command}`: {source}")]
    Spawn {
        /// The server's name.
        server: String,
        /// The program that was to be started.
        command: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP client for a streamable HTTP server could not be built.
    #[error("MCP server `{server}`: cannot build the HTTP client: {message}")]
    HttpClient {
        /// The server's name.
        server: String,
        /// What reqwest said.
        message: String,
    },
    /// The MCP handshake failed: the process exited, the URL does not answer MCP, or the versions do not match.
    #[error("MCP server `{server}`: handshake failed: {source}")]
    Handshake {
        /// The server's name.
        server: String,
        /// rmcp's account of it.
        #[source]
        source: Box<rmcp::service::ClientInitializeError>,
    },
    /// The server did not finish a request within its time ([`crate::McpLimits`]): `initialize`, or `tools/list`
    /// over all its pages.
    #[error("MCP server `{server}`: no answer to {operation} within {}", duration_text(*.limit))]
    Timeout {
        /// The server's name.
        server: String,
        /// The request, e.g. `initialize`.
        operation: &'static str,
        /// The time it had.
        limit: Duration,
    },
    /// The server sent a JSON-RPC message longer than [`crate::McpLimits::max_message_bytes`]; the connection was
    /// closed.
    #[error("MCP server `{server}`: sent a message over {} (the limit); the connection was closed", bytes_text(*.limit))]
    MessageTooLarge {
        /// The server's name.
        server: String,
        /// The limit, in bytes.
        limit: usize,
    },
    /// `tools/list` went on past [`crate::McpLimits::max_list_pages`] pages.
    #[error("MCP server `{server}`: tools/list went on past {limit} pages (the limit)")]
    TooManyPages {
        /// The server's name.
        server: String,
        /// The limit.
        limit: usize,
    },
    /// The server lists more than [`crate::McpLimits::max_tools`] tools.
    #[error("MCP server `{server}`: lists more than {limit} tools (the limit)")]
    TooManyTools {
        /// The server's name.
        server: String,
        /// The limit.
        limit: usize,
    },
    /// A tool's definition is bigger than [`crate::McpLimits::max_tool_bytes`].
    #[error("MCP server `{server}`: tool {tool:?} has a definition of {bytes} bytes, over the {} limit", bytes_text(*.limit))]
    ToolTooLarge {
        /// The server's name.
        server: String,
        /// The tool's MCP name (its first 64 characters).
        tool: String,
        /// The size of its definition, serialized.
        bytes: usize,
        /// The limit, in bytes.
        limit: usize,
    },
    /// A request after the handshake failed (the server answered with an error, or the connection closed).
    #[error("MCP server `{server}`: {operation} failed: {source}")]
    Protocol {
        /// The server's name.
        server: String,
        /// The request, e.g. `tools/list`.
        operation: &'static str,
        /// rmcp's account of it.
        #[source]
        source: Box<rmcp::ServiceError>,
    },
    /// Two of the server's tools map to the same headstart name (see [`crate::tool_name`]).
    #[error("MCP server `{server}`: tools `{first}` and `{second}` both map to the tool name `{name}`")]
    NameClash {
        /// The server's name.
        server: String,
        /// The first MCP tool name.
        first: String,
        /// The second MCP tool name.
        second: String,
        /// The headstart name both map to.
        name: String,
    },
    /// An override names a tool the server does not offer (most likely a typo).
    #[error("MCP server `{server}`: an override names `{tool}`, which the server does not offer")]
    UnknownOverride {
        /// The server's name.
        server: String,
        /// The overridden MCP tool name.
        tool: String,
    },
    /// The toolbox refused a tool (a schema that does not compile, a name already registered).
    #[error("MCP server `{server}`: {source}")]
    Toolbox {
        /// The server's name.
        server: String,
        /// The toolbox's account of it.
        #[source]
        source: ToolboxError,
    },
}
