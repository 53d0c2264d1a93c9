//! [`McpTool`]: one tool of an MCP server as a headstart [`Tool`].

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use headstart::{Arguments, ExecutionMode, Tool, ToolContext, ToolError, ToolOutput};
use serde_json::Value;

use crate::connection::Connection;
use crate::policy::ToolFlags;

/// One tool of an MCP server: its `inputSchema` as parameters, its flags from a [`crate::ToolPolicy`].
pub struct McpTool {
    name: String,
    definition: rmcp::model::Tool,
    parameters: Value,
    flags: ToolFlags,
    connection: Arc<Connection>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("mcp_name", &self.definition.name)
            .field("flags", &self.flags)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    pub(crate) fn new(
        name: String,
        definition: rmcp::model::Tool,
        flags: ToolFlags,
        connection: Arc<Connection>,
    ) -> Self {
        McpTool {
            name,
            parameters: definition.schema_as_json_value(),
            definition,
            flags,
            connection,
        }
    }

    /// The name the model calls it by (`{server}__{tool}`, see [`crate::tool_name`]).
    pub fn headstart_name(&self) -> &str {
        &self.name
    }

    /// The tool's name on its server.
    pub fn mcp_name(&self) -> &str {
        &self.definition.name
    }

    /// The tool as the server listed it (annotations included).
    pub fn definition(&self) -> &rmcp::model::Tool {
        &self.definition
    }

    /// The flags headstart applies, with their reasons.
    pub fn flags(&self) -> &ToolFlags {
        &self.flags
    }
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        self.definition.description.as_deref().unwrap_or("")
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn early(&self) -> bool {
        self.flags.early
    }

    // Callers of the deprecated name get the same answer until it goes.
    fn is_async(&self) -> bool {
        self.flags.early
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::sequential_if(self.flags.sequential)
    }

    fn conflict_key(&self, _arguments: &Arguments) -> Option<String> {
        self.flags.conflict_key.clone()
    }

    fn idempotent(&self) -> bool {
        self.flags.idempotent
    }

    /// A backstop a few seconds past [`crate::McpLimits::call_timeout`]: the call ends itself at that timeout with
    /// an error naming the server, and tells the server to stop.
    fn timeout(&self) -> Option<Duration> {
        Some(self.connection.engine_timeout())
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        self.connection.call(&self.definition.name, arguments, &context).await
    }
}
