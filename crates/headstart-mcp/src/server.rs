//! [`McpServer`]: a named connection to an MCP server, made over stdio, streamable HTTP or any rmcp transport, and
//! its tools as headstart tools.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use headstart::Toolbox;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport};
use rmcp::RoleClient;

use crate::connection::{Connection, Process};
use crate::error::McpError;
use crate::limits::McpLimits;
use crate::names::tool_name;
use crate::policy::ToolPolicy;
use crate::stdio;
use crate::tool::McpTool;

/// A connection to one MCP server, named for the prefix of its tools' names.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use headstart::Toolbox;
/// use headstart_mcp::{McpServer, ToolPolicy};
///
/// let mut command = tokio::process::Command::new("npx");
/// command.args(["-y", "@modelcontextprotocol/server-everything", "stdio"]);
/// let server = McpServer::stdio("everything", command).await?;
/// let mut toolbox = Toolbox::new();
/// // Annotations ignored: every tool is sync, non-idempotent, and calls to this server keep source order.
/// let names = server.register(&mut toolbox, &ToolPolicy::untrusted()).await?;
/// assert!(names.iter().all(|name| name.starts_with("everything__")));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct McpServer {
    connection: Arc<Connection>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.connection.name())
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Connects over any rmcp transport (a child process, streamable HTTP, an in-memory pipe, …) with the default
    /// [`McpLimits`].
    pub async fn connect<T, E, A>(name: impl Into<String>, transport: T) -> Result<Self, McpError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        Self::connect_with_limits(name, transport, McpLimits::default()).await
    }

    /// Connects over any rmcp transport, the server held to `limits` (the size of a message is the transport's
    /// to bound).
    pub async fn connect_with_limits<T, E, A>(
        name: impl Into<String>,
        transport: T,
        limits: McpLimits,
    ) -> Result<Self, McpError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        Connection::establish(name.into(), transport, limits, Process::default())
            .await
            .map(Self::over)
    }

    /// A server over an established connection.
    fn over(connection: Connection) -> Self {
        McpServer {
            connection: Arc::new(connection),
        }
    }

    /// [`McpServer::stdio_with_limits`] with the default [`McpLimits`].
    pub async fn stdio(name: impl Into<String>, command: tokio::process::Command) -> Result<Self, McpError> {
        Self::stdio_with_limits(name, command, McpLimits::default()).await
    }

    /// Starts `command` and speaks MCP over its stdin and stdout, the server held to `limits`.
    ///
    /// - **Environment**: the process starts with a clean environment, then gets the variables of
    ///   [`crate::INHERITED_ENV`] (`HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `USER` on Unix) from headstart's,
    ///   and every variable set on `command` itself (`command.env("GITHUB_TOKEN", …)`). Nothing else of
    ///   headstart's environment reaches it: not the provider's API key, not the database URL.
    /// - **stdout**: a message over [`McpLimits::max_message_bytes`] closes the connection.
    /// - **stderr**: up to [`McpLimits::max_stderr_bytes`] of it is copied to headstart's stderr, each line
    ///   prefixed `[mcp NAME]`, control characters replaced; the rest is dropped.
    /// - The process is killed when the handshake fails or times out, and when the server handle and all its tools
    ///   are dropped.
    pub async fn stdio_with_limits(
        name: impl Into<String>,
        command: tokio::process::Command,
        limits: McpLimits,
    ) -> Result<Self, McpError> {
        let name = name.into();
        let program = command.as_std().get_program().to_string_lossy().into_owned();
        let overflow = Arc::new(OnceLock::new());
        let spawned =
            stdio::spawn(&name, command, &limits, Arc::clone(&overflow)).map_err(|source| McpError::Spawn {
                server: name.clone(),
                command: program,
                source,
            })?;
        // rmcp counts the newline, which the bounded reader does not: one more byte lets the reader decide.
        let transport = AsyncRwTransport::<RoleClient, _, _>::new(spawned.stdout, spawned.stdin)
            .with_max_line_length(limits.max_message_bytes.saturating_add(1));
        let process = Process {
            child: Some(spawned.child),
            overflow,
        };
        Connection::establish(name, transport, limits, process)
            .await
            .map(Self::over)
    }

    /// [`McpServer::http_with_limits`] with the default [`McpLimits`].
    pub async fn http(name: impl Into<String>, url: impl Into<String>) -> Result<Self, McpError> {
        Self::http_with_limits(name, url, McpLimits::default()).await
    }

    /// Connects to a streamable HTTP endpoint (`http://…/mcp`, or `https://` with rustls and the ring provider),
    /// the server held to `limits` (rmcp caps each server-sent event at 16 MiB).
    pub async fn http_with_limits(
        name: impl Into<String>,
        url: impl Into<String>,
        limits: McpLimits,
    ) -> Result<Self, McpError> {
        let name = name.into();
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Losing a race with another installer is fine: a provider is installed either way.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        // Redirects are not followed: one would turn the POST of a JSON-RPC message into a bodyless GET.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| McpError::HttpClient {
                server: name.clone(),
                message: error.to_string(),
            })?;
        let config = StreamableHttpClientTransportConfig::with_uri(url.into());
        let transport = StreamableHttpClientTransport::with_client(client, config);
        Connection::establish(name, transport, limits, Process::default())
            .await
            .map(Self::over)
    }

    /// The server's name, the prefix of its tools' names.
    pub fn name(&self) -> &str {
        self.connection.name()
    }

    /// The limits the server is held to.
    pub fn limits(&self) -> &McpLimits {
        self.connection.limits()
    }

    /// The server's tools as it describes them (`tools/list`, every page), within the [`McpLimits`]: all pages
    /// within `list_timeout`, at most `max_list_pages` pages and `max_tools` tools, each definition at most
    /// `max_tool_bytes`, descriptions cut to `max_description_bytes`.
    pub async fn list(&self) -> Result<Vec<rmcp::model::Tool>, McpError> {
        let limit = self.connection.limits().list_timeout;
        tokio::time::timeout(limit, self.connection.list_tools())
            .await
            .unwrap_or_else(|_| {
                Err(McpError::Timeout {
                    server: self.connection.name().to_owned(),
                    operation: "tools/list (all pages)",
                    limit,
                })
            })
    }

    /// The server's tools as headstart tools, flagged by `policy`, in the server's order.
    pub async fn tools(&self, policy: &ToolPolicy) -> Result<Vec<McpTool>, McpError> {
        let listed = self.list().await?;
        let server = self.connection.name();
        if let Some(tool) = policy
            .overrides()
            .keys()
            .find(|tool| !listed.iter().any(|t| t.name == **tool))
        {
            return Err(McpError::UnknownOverride {
                server: server.to_owned(),
                tool: tool.clone(),
            });
        }
        let mut seen: HashMap<String, String> = HashMap::new();
        let mut tools = Vec::with_capacity(listed.len());
        for tool in listed {
            let name = tool_name(server, &tool.name);
            if let Some(first) = seen.insert(name.clone(), tool.name.to_string()) {
                return Err(McpError::NameClash {
                    server: server.to_owned(),
                    first,
                    second: tool.name.to_string(),
                    name,
                });
            }
            let flags = policy.flags(server, &tool.name, tool.annotations.as_ref());
            tools.push(McpTool::new(name, tool, flags, Arc::clone(&self.connection)));
        }
        Ok(tools)
    }

    /// Registers the server's tools (see [`McpServer::tools`]) and returns their headstart names.
    pub async fn register(&self, toolbox: &mut Toolbox, policy: &ToolPolicy) -> Result<Vec<String>, McpError> {
        let tools = self.tools(policy).await?;
        // All or nothing: a tool the toolbox refuses leaves the caller's toolbox as it was.
        let mut staged = toolbox.clone();
        let mut names = Vec::with_capacity(tools.len());
        for tool in tools {
            names.push(tool.headstart_name().to_owned());
            staged.register(tool).map_err(|source| McpError::Toolbox {
                server: self.connection.name().to_owned(),
                source,
            })?;
        }
        *toolbox = staged;
        Ok(names)
    }
}
