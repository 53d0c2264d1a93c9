//! [`McpServer`]: one connection to an MCP server, the client handler that routes its progress notifications, and
//! the calls made over it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use headstart::{Arguments, ToolContext, ToolError, ToolOutput, Toolbox, UpdateSink};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest, Implementation,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestHandle, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport};
use rmcp::{ClientCacheConfig, ClientHandler, RoleClient, ServiceError, ServiceExt};
use tokio::time::Instant;

use crate::content::{cap_outcome, into_output, progress_update};
use crate::error::McpError;
use crate::limits::{bytes_text, cut_at_boundary, duration_text, json_size, McpLimits};
use crate::names::tool_name;
use crate::policy::ToolPolicy;
use crate::stdio;
use crate::tool::McpTool;

/// How much longer than [`McpLimits::call_timeout`] the engine waits for an MCP call ([`headstart::Tool::timeout`]):
/// the call ends itself at its timeout, with an error naming the server; the engine's is a backstop.
const ENGINE_BACKSTOP: Duration = Duration::from_secs(5);

/// Progress notifications kept for tokens no call has registered yet (see [`ProgressRoutes`]).
const EARLY_PROGRESS: usize = 64;

/// Where progress notifications go: the update sink of the call whose request carried the token.
///
/// rmcp picks a request's progress token while sending it, so a fast server can report progress before the call
/// has registered its sink; those notifications wait here (a few, the oldest dropped first) for their call.
#[derive(Default)]
struct ProgressRoutes {
    inner: Mutex<Routes>,
}

#[derive(Default)]
struct Routes {
    sinks: HashMap<ProgressToken, UpdateSink>,
    early: VecDeque<ProgressNotificationParam>,
}

impl ProgressRoutes {
    fn lock(&self) -> MutexGuard<'_, Routes> {
        // Plain map and queue operations: a poisoned lock holds consistent data.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn deliver(&self, progress: ProgressNotificationParam) {
        let mut routes = self.lock();
        match routes.sinks.get(&progress.progress_token) {
            Some(sink) => sink.send(progress_update(&progress)),
            None => {
                if routes.early.len() == EARLY_PROGRESS {
                    routes.early.pop_front();
                }
                routes.early.push_back(progress);
            }
        }
    }

    fn register(self: &Arc<Self>, token: ProgressToken, sink: UpdateSink) -> Route {
        let mut routes = self.lock();
        let Routes { sinks, early } = &mut *routes;
        early.retain(|progress| {
            let mine = progress.progress_token == token;
            if mine {
                sink.send(progress_update(progress));
            }
            !mine
        });
        sinks.insert(token.clone(), sink);
        Route {
            routes: Arc::clone(self),
            token,
        }
    }
}

/// A call's registration for progress; unregisters when the call ends, however it ends.
struct Route {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes.lock().sinks.remove(&self.token);
    }
}

/// headstart's side of the connection: it answers nothing, and routes progress.
struct Client {
    routes: Arc<ProgressRoutes>,
}

impl ClientHandler for Client {
    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.routes.deliver(params);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("headstart", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// One live connection; shared by the server handle and every tool made from it, so it lives as long as they do.
pub(crate) struct Connection {
    name: String,
    service: RunningService<RoleClient, Client>,
    routes: Arc<ProgressRoutes>,
    limits: McpLimits,
    /// Set (to the limit) when a stdio server sent a message over [`McpLimits::max_message_bytes`].
    overflow: Arc<OnceLock<usize>>,
    /// A stdio server's process, killed when the connection is dropped.
    _child: Option<tokio::process::Child>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Ends the service loop, which drops the transport (and so stops a child process).
        self.service.cancellation_token().cancel();
    }
}

/// A `tools/call` request in flight. Dropped before its response (the engine dropped the call's future), it tells
/// the server to stop, as cancelling the call's token does.
struct InFlight {
    handle: Option<RequestHandle<RoleClient>>,
}

impl InFlight {
    /// Sends `notifications/cancelled` without waiting for it: a server that stopped reading cannot hold the call.
    fn abandon(&mut self, reason: &'static str) {
        if let (Some(handle), Ok(runtime)) = (self.handle.take(), tokio::runtime::Handle::try_current()) {
            runtime.spawn(async move {
                let _ = handle.cancel(Some(reason.to_owned())).await;
            });
        }
    }

    async fn response(&mut self) -> Result<ServerResult, ServiceError> {
        let Some(handle) = self.handle.as_mut() else {
            return Err(ServiceError::TransportClosed);
        };
        let response = (&mut handle.rx).await.map_err(|_| ServiceError::TransportClosed);
        self.handle = None;
        response?
    }

    async fn cancel(&mut self, reason: &str) {
        if let Some(handle) = self.handle.take() {
            // A server that is gone needs no cancellation: the error is moot.
            let _ = handle.cancel(Some(reason.to_owned())).await;
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.abandon("abandoned by headstart");
    }
}

/// Why a call stopped waiting for its response.
enum Stop {
    Cancelled,
    TimedOut,
}

impl Connection {
    /// The time the engine gives a call ([`headstart::Tool::timeout`]).
    pub(crate) fn engine_timeout(&self) -> Duration {
        self.limits.call_timeout.saturating_add(ENGINE_BACKSTOP)
    }

    /// Runs MCP tool `tool` within [`McpLimits::call_timeout`], its outcome cut to [`McpLimits::max_result_bytes`]:
    /// its cancellation (or timeout) becomes `notifications/cancelled`, its progress the call's updates.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Arguments,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let deadline = Instant::now() + self.limits.call_timeout;
        let outcome = self.call_until(deadline, tool, arguments, context).await;
        cap_outcome(outcome, self.limits.max_result_bytes)
    }

    async fn call_until(
        &self,
        deadline: Instant,
        tool: &str,
        arguments: Arguments,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments),
        ));
        let send = self
            .service
            .peer()
            .send_cancellable_request(request, PeerRequestOptions::no_options());
        let handle = tokio::time::timeout_at(deadline, send)
            .await
            .map_err(|_| self.timed_out(tool))?
            .map_err(|error| self.call_error(tool, &error))?;
        let _route = self
            .routes
            .register(handle.progress_token.clone(), context.updates.clone());
        let mut in_flight = InFlight { handle: Some(handle) };
        let response = tokio::select! {
            biased;
            response = in_flight.response() => Ok(response),
            () = context.cancel.cancelled() => Err(Stop::Cancelled),
            () = tokio::time::sleep_until(deadline) => Err(Stop::TimedOut),
        };
        match response {
            Err(Stop::Cancelled) => {
                in_flight.cancel("cancelled by headstart").await;
                Err(ToolError::new(format!(
                    "cancelled; MCP server `{}` was sent notifications/cancelled",
                    self.name
                )))
            }
            Err(Stop::TimedOut) => {
                in_flight.abandon("timed out");
                Err(self.timed_out(tool))
            }
            Ok(Ok(ServerResult::CallToolResult(result))) => into_output(result),
            Ok(Ok(_)) => Err(ToolError::new(format!(
                "MCP server `{}` answered the call to `{tool}` with something other than a tool result (input \
                 requests and tasks are not supported)",
                self.name
            ))),
            Ok(Err(error)) => Err(self.call_error(tool, &error)),
        }
    }

    fn timed_out(&self, tool: &str) -> ToolError {
        ToolError::new(format!(
            "MCP server `{}`: no answer to tools/call `{tool}` within {}; it was sent notifications/cancelled",
            self.name,
            duration_text(self.limits.call_timeout)
        ))
    }

    fn call_error(&self, tool: &str, error: &ServiceError) -> ToolError {
        let server = &self.name;
        ToolError::new(match error {
            ServiceError::TransportClosed => match self.overflow.get() {
                Some(&limit) => format!(
                    "MCP server `{server}` sent a message over {} (the limit) during the call to `{tool}`; the \
                     connection was closed",
                    bytes_text(limit)
                ),
                None => format!("MCP server `{server}` closed the connection during the call to `{tool}`"),
            },
            ServiceError::McpError(error) => {
                format!("MCP server `{server}` refused the call to `{tool}`: {}", error.message)
            }
            other => format!("MCP server `{server}`: the call to `{tool}` failed: {other}"),
        })
    }

    /// A failed request after the handshake; a closed connection is explained by an oversized message if there
    /// was one.
    fn request_error(&self, operation: &'static str, source: ServiceError) -> McpError {
        match (self.overflow.get(), &source) {
            (Some(&limit), ServiceError::TransportClosed) => McpError::MessageTooLarge {
                server: self.name.clone(),
                limit,
            },
            _ => McpError::Protocol {
                server: self.name.clone(),
                operation,
                source: Box::new(source),
            },
        }
    }
}

/// A tool's description cut to `max` bytes, ending with `…` when cut.
fn cut_description(tool: &mut rmcp::model::Tool, max: usize) {
    let Some(description) = tool.description.take() else {
        return;
    };
    let mut text = description.into_owned();
    if text.len() > max {
        cut_at_boundary(&mut text, max.saturating_sub('…'.len_utf8()));
        text.push('…');
    }
    tool.description = Some(text.into());
}

/// What a stdio server adds to a connection: its process, and the record of an oversized message.
#[derive(Default)]
struct Process {
    child: Option<tokio::process::Child>,
    overflow: Arc<OnceLock<usize>>,
}

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
            .field("name", &self.connection.name)
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
        Self::establish(name.into(), transport, limits, Process::default()).await
    }

    /// The handshake, within [`McpLimits::initialize_timeout`]; on failure the transport is dropped (and a stdio
    /// server's process killed).
    async fn establish<T, E, A>(
        name: String,
        transport: T,
        limits: McpLimits,
        process: Process,
    ) -> Result<Self, McpError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let routes = Arc::new(ProgressRoutes::default());
        let client = Client {
            routes: Arc::clone(&routes),
        };
        let service = match tokio::time::timeout(limits.initialize_timeout, client.serve(transport)).await {
            Err(_) => {
                return Err(McpError::Timeout {
                    server: name,
                    operation: "initialize",
                    limit: limits.initialize_timeout,
                })
            }
            Ok(Err(source)) => {
                return Err(match process.overflow.get() {
                    Some(&limit) => McpError::MessageTooLarge { server: name, limit },
                    None => McpError::Handshake {
                        server: name,
                        source: Box::new(source),
                    },
                })
            }
            Ok(Ok(service)) => service,
        };
        // rmcp keeps up to 512 responses for as long as the server's `ttlMs` says: a hostile server could have it
        // hold hundreds of its biggest messages. headstart lists once, so nothing is cached.
        service
            .peer()
            .set_response_cache_config(ClientCacheConfig::disabled())
            .await;
        Ok(McpServer {
            connection: Arc::new(Connection {
                name,
                service,
                routes,
                limits,
                overflow: process.overflow,
                _child: process.child,
            }),
        })
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
        Self::establish(name, transport, limits, process).await
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
        Self::establish(name, transport, limits, Process::default()).await
    }

    /// The server's name, the prefix of its tools' names.
    pub fn name(&self) -> &str {
        &self.connection.name
    }

    /// The limits the server is held to.
    pub fn limits(&self) -> &McpLimits {
        &self.connection.limits
    }

    /// The server's tools as it describes them (`tools/list`, every page), within the [`McpLimits`]: all pages
    /// within `list_timeout`, at most `max_list_pages` pages and `max_tools` tools, each definition at most
    /// `max_tool_bytes`, descriptions cut to `max_description_bytes`.
    pub async fn list(&self) -> Result<Vec<rmcp::model::Tool>, McpError> {
        let limit = self.connection.limits.list_timeout;
        tokio::time::timeout(limit, self.list_pages())
            .await
            .unwrap_or_else(|_| {
                Err(McpError::Timeout {
                    server: self.connection.name.clone(),
                    operation: "tools/list (all pages)",
                    limit,
                })
            })
    }

    async fn list_pages(&self) -> Result<Vec<rmcp::model::Tool>, McpError> {
        let connection = &self.connection;
        let limits = &connection.limits;
        let mut tools = Vec::new();
        let mut cursor = None;
        for _ in 0..limits.max_list_pages {
            let params = cursor.map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)));
            let page = connection
                .service
                .peer()
                .list_tools(params)
                .await
                .map_err(|source| connection.request_error("tools/list", source))?;
            for mut tool in page.tools {
                if tools.len() == limits.max_tools {
                    return Err(McpError::TooManyTools {
                        server: connection.name.clone(),
                        limit: limits.max_tools,
                    });
                }
                cut_description(&mut tool, limits.max_description_bytes);
                let bytes = json_size(&tool);
                if bytes > limits.max_tool_bytes {
                    return Err(McpError::ToolTooLarge {
                        server: connection.name.clone(),
                        tool: tool.name.chars().take(64).collect(),
                        bytes,
                        limit: limits.max_tool_bytes,
                    });
                }
                tools.push(tool);
            }
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(tools),
            }
        }
        Err(McpError::TooManyPages {
            server: connection.name.clone(),
            limit: limits.max_list_pages,
        })
    }

    /// The server's tools as headstart tools, flagged by `policy`, in the server's order.
    pub async fn tools(&self, policy: &ToolPolicy) -> Result<Vec<McpTool>, McpError> {
        let listed = self.list().await?;
        let server = &self.connection.name;
        if let Some(tool) = policy
            .overrides()
            .keys()
            .find(|tool| !listed.iter().any(|t| t.name == **tool))
        {
            return Err(McpError::UnknownOverride {
                server: server.clone(),
                tool: tool.clone(),
            });
        }
        let mut seen: HashMap<String, String> = HashMap::new();
        let mut tools = Vec::with_capacity(listed.len());
        for tool in listed {
            let name = tool_name(server, &tool.name);
            if let Some(first) = seen.insert(name.clone(), tool.name.to_string()) {
                return Err(McpError::NameClash {
                    server: server.clone(),
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
                server: self.connection.name.clone(),
                source,
            })?;
        }
        *toolbox = staged;
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_descriptions_are_cut_with_an_ellipsis() {
        let schema = serde_json::Map::new();
        let mut tool = rmcp::model::Tool::new("t", "é".repeat(100), schema.clone());
        cut_description(&mut tool, 11);
        assert_eq!(tool.description.as_deref(), Some("éééé…"));
        let mut short = rmcp::model::Tool::new("t", "fine", schema);
        cut_description(&mut short, 11);
        assert_eq!(short.description.as_deref(), Some("fine"));
    }
}
