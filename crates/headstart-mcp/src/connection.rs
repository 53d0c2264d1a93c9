//! One live connection to an MCP server: the handshake, listing its tools, and the calls made over it.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use headstart::{Arguments, ToolContext, ToolError, ToolOutput};
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, PaginatedRequestParams, ServerResult};
use rmcp::service::{PeerRequestOptions, RequestHandle, RunningService};
use rmcp::transport::IntoTransport;
use rmcp::{ClientCacheConfig, RoleClient, ServiceError, ServiceExt};
use tokio::time::Instant;

use crate::content::{cap_outcome, into_output};
use crate::error::McpError;
use crate::limits::{bytes_text, cut_at_boundary, duration_text, json_size, McpLimits};
use crate::progress::{Client, ProgressRoutes};

/// How much longer than [`McpLimits::call_timeout`] the engine waits for an MCP call ([`headstart::ToolSpec::timeout`]):
/// the call ends itself at its timeout, with an error naming the server; the engine's is a backstop.
const ENGINE_BACKSTOP: Duration = Duration::from_secs(5);

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
    /// The handshake, within [`McpLimits::initialize_timeout`]; on failure the transport is dropped (and a stdio
    /// server's process killed).
    pub(crate) async fn establish<T, E, A>(
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
        Ok(Connection {
            name,
            service,
            routes,
            limits,
            overflow: process.overflow,
            _child: process.child,
        })
    }

    /// The server's name, the prefix of its tools' names.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The limits the server is held to.
    pub(crate) fn limits(&self) -> &McpLimits {
        &self.limits
    }

    /// Every page of `tools/list`, within the page, tool and size limits (the time limit is the caller's).
    pub(crate) async fn list_tools(&self) -> Result<Vec<rmcp::model::Tool>, McpError> {
        let limits = &self.limits;
        let mut tools = Vec::new();
        let mut cursor = None;
        for _ in 0..limits.max_list_pages {
            let params = cursor.map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)));
            let page = self
                .service
                .peer()
                .list_tools(params)
                .await
                .map_err(|source| self.request_error("tools/list", source))?;
            for mut tool in page.tools {
                if tools.len() == limits.max_tools {
                    return Err(McpError::TooManyTools {
                        server: self.name.clone(),
                        limit: limits.max_tools,
                    });
                }
                cut_description(&mut tool, limits.max_description_bytes);
                let bytes = json_size(&tool);
                if bytes > limits.max_tool_bytes {
                    return Err(McpError::ToolTooLarge {
                        server: self.name.clone(),
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
            server: self.name.clone(),
            limit: limits.max_list_pages,
        })
    }

    /// The time the engine gives a call ([`headstart::ToolSpec::timeout`]).
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
pub(crate) struct Process {
    pub(crate) child: Option<tokio::process::Child>,
    pub(crate) overflow: Arc<OnceLock<usize>>,
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
