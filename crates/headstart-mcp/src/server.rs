//! [`McpServer`]: one connection to an MCP server, the client handler that routes its progress notifications, and
//! the calls made over it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use headstart::{Arguments, ToolContext, ToolError, ToolOutput, Toolbox, UpdateSink};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest, Implementation,
    ProgressNotificationParam, ProgressToken, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestHandle, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};

use crate::content::{into_output, progress_update};
use crate::error::McpError;
use crate::names::tool_name;
use crate::policy::ToolPolicy;
use crate::tool::McpTool;

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
        if let (Some(handle), Ok(runtime)) = (self.handle.take(), tokio::runtime::Handle::try_current()) {
            runtime.spawn(async move {
                let _ = handle.cancel(Some("abandoned by headstart".to_owned())).await;
            });
        }
    }
}

impl Connection {
    /// Runs MCP tool `tool`: its cancellation becomes `notifications/cancelled`, its progress the call's updates.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Arguments,
        context: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments),
        ));
        let handle = self
            .service
            .peer()
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(|error| self.call_error(tool, &error))?;
        let _route = self
            .routes
            .register(handle.progress_token.clone(), context.updates.clone());
        let mut in_flight = InFlight { handle: Some(handle) };
        let response = tokio::select! {
            biased;
            response = in_flight.response() => Some(response),
            () = context.cancel.cancelled() => None,
        };
        match response {
            None => {
                in_flight.cancel("cancelled by headstart").await;
                Err(ToolError::new(format!(
                    "cancelled; MCP server `{}` was sent notifications/cancelled",
                    self.name
                )))
            }
            Some(Ok(ServerResult::CallToolResult(result))) => into_output(result),
            Some(Ok(_)) => Err(ToolError::new(format!(
                "MCP server `{}` answered the call to `{tool}` with something other than a tool result (input \
                 requests and tasks are not supported)",
                self.name
            ))),
            Some(Err(error)) => Err(self.call_error(tool, &error)),
        }
    }

    fn call_error(&self, tool: &str, error: &ServiceError) -> ToolError {
        let server = &self.name;
        ToolError::new(match error {
            ServiceError::TransportClosed => {
                format!("MCP server `{server}` closed the connection during the call to `{tool}`")
            }
            ServiceError::McpError(error) => {
                format!("MCP server `{server}` refused the call to `{tool}`: {}", error.message)
            }
            other => format!("MCP server `{server}`: the call to `{tool}` failed: {other}"),
        })
    }
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
    /// Connects over any rmcp transport (a child process, streamable HTTP, an in-memory pipe, …).
    pub async fn connect<T, E, A>(name: impl Into<String>, transport: T) -> Result<Self, McpError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let name = name.into();
        let routes = Arc::new(ProgressRoutes::default());
        let client = Client {
            routes: Arc::clone(&routes),
        };
        let service = client.serve(transport).await.map_err(|source| McpError::Handshake {
            server: name.clone(),
            source: Box::new(source),
        })?;
        Ok(McpServer {
            connection: Arc::new(Connection { name, service, routes }),
        })
    }

    /// Starts `command` and speaks MCP over its stdin and stdout (its stderr is the caller's). The process is
    /// stopped when the server handle and all its tools are dropped.
    pub async fn stdio(name: impl Into<String>, mut command: tokio::process::Command) -> Result<Self, McpError> {
        let name = name.into();
        command.kill_on_drop(true);
        let program = command.as_std().get_program().to_string_lossy().into_owned();
        let transport = TokioChildProcess::new(command).map_err(|source| McpError::Spawn {
            server: name.clone(),
            command: program,
            source,
        })?;
        Self::connect(name, transport).await
    }

    /// Connects to a streamable HTTP endpoint (`http://…/mcp`, or `https://` with rustls and the ring provider).
    pub async fn http(name: impl Into<String>, url: impl Into<String>) -> Result<Self, McpError> {
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
        Self::connect(name, StreamableHttpClientTransport::with_client(client, config)).await
    }

    /// The server's name, the prefix of its tools' names.
    pub fn name(&self) -> &str {
        &self.connection.name
    }

    /// The server's tools as it describes them (`tools/list`, every page).
    pub async fn list(&self) -> Result<Vec<rmcp::model::Tool>, McpError> {
        self.connection
            .service
            .peer()
            .list_all_tools()
            .await
            .map_err(|source| McpError::Protocol {
                server: self.connection.name.clone(),
                operation: "tools/list",
                source: Box::new(source),
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
