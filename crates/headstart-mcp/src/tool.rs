//! [`McpTool`]: one tool of an MCP server as a headstart [`Tool`].

use std::sync::Arc;

use async_trait::async_trait;
use headstart::{Arguments, ExecutionMode, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

use crate::connection::Connection;
use crate::policy::ToolFlags;

/// One tool of an MCP server: its `inputSchema` as parameters, its flags from a [`crate::ToolPolicy`].
pub struct McpTool {
    spec: ToolSpec,
    definition: rmcp::model::Tool,
    flags: ToolFlags,
    connection: Arc<Connection>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.spec.name)
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
        // The timeout is a backstop a few seconds past [`crate::McpLimits::call_timeout`]: the call ends itself at that
        // timeout with an error naming the server, and tells the server to stop.
        let spec = ToolSpec::new(name)
            .description(definition.description.as_deref().unwrap_or(""))
            .parameters(definition.schema_as_json_value())
            .early(flags.early)
            .idempotent(flags.idempotent)
            .execution_mode(ExecutionMode::sequential_if(flags.sequential))
            .timeout(Some(connection.engine_timeout()));
        McpTool {
            spec,
            definition,
            flags,
            connection,
        }
    }

    /// The name the model calls it by (`{server}__{tool}`, see [`crate::tool_name`]).
    pub fn headstart_name(&self) -> &str {
        &self.spec.name
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
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn conflict_key(&self, _arguments: &Arguments) -> Option<String> {
        self.flags.conflict_key.clone()
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        self.connection.call(&self.definition.name, arguments, &context).await
    }
}
