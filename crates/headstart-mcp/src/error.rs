//! [`McpError`]: what can go wrong while connecting to an MCP server and registering its tools.

use headstart::ToolboxError;

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
