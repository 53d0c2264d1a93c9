//! Tools from an MCP server: connect to it, register its tools in a `Toolbox`, and let the engine run them. The
//! server here is an in-process rmcp server over an in-memory pipe, so the example needs nothing installed; a real
//! one is a line away (`McpServer::stdio("files", command)` or `McpServer::http("search", url)`).
//!
//! The server is trusted, so its annotations count: `search_notes` says `readOnlyHint`, so headstart starts it as
//! soon as the model has sealed the call, while the model keeps talking; `add_note` is a write, so it waits for the
//! end of the response (and writes to this server keep source order).
//!
//! Run with `cargo run --example mcp_tools`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use headstart::core::{DoneReason, Usage};
use headstart::{AgentEvent, CancellationToken, DeltaEvent, Engine, SqliteStore, Toolbox, TranscriptStore};
use headstart_mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use headstart_mcp::rmcp::service::RequestContext;
use headstart_mcp::rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use headstart_mcp::{McpServer, ToolPolicy};
use serde_json::{json, Value};

/// A notes server: `search_notes` (read-only, takes a moment) and `add_note` (a write).
#[derive(Default)]
struct Notes {
    notes: Mutex<Vec<String>>,
}

fn string_argument(name: &str) -> Arc<serde_json::Map<String, Value>> {
    let schema = json!({"type": "object", "properties": {name: {"type": "string"}}, "required": [name]});
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("search_notes", "Search the notes", string_argument("query"))
                .annotate(ToolAnnotations::new().read_only(true)),
            Tool::new("add_note", "Add a note", string_argument("text"))
                .annotate(ToolAnnotations::new().read_only(false)),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let argument = |key: &str| {
            request
                .arguments
                .as_ref()
                .and_then(|arguments| arguments.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let text = match request.name.as_ref() {
            "search_notes" => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let query = argument("query");
                let notes = self.notes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let hits: Vec<&String> = notes.iter().filter(|note| note.contains(&query)).collect();
                format!("{} note(s) about {query}: {hits:?}", hits.len())
            }
            "add_note" => {
                let text = argument("text");
                self.notes
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(text.clone());
                format!("added {text:?}")
            }
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text(text),
        ])))
    }
}

/// The model's response: search (sealed first), talk for a while, then add a note.
fn model_stream() -> impl futures::Stream<Item = Result<DeltaEvent, headstart::ModelError>> + Send + 'static {
    let call = |index: usize, id: &str, name: &str, arguments: Value| {
        [
            DeltaEvent::ToolcallStart {
                index,
                id: id.into(),
                name: name.into(),
                early: false,
                provider_async: false,
            },
            DeltaEvent::ToolcallEnd {
                index,
                arguments: Some(arguments),
            },
        ]
    };
    let head = [DeltaEvent::Start {
        model: Some("my-model".into()),
        response_id: None,
    }]
    .into_iter()
    .chain(call(0, "c1", "notes__search_notes", json!({"query": "rust"})))
    .chain([DeltaEvent::TextStart { index: 1 }]);
    let words = ["Looking ", "that ", "up ", "while ", "I ", "write."].map(|word| DeltaEvent::TextDelta {
        index: 1,
        delta: word.into(),
    });
    let tail = [DeltaEvent::TextEnd { index: 1 }]
        .into_iter()
        .chain(call(2, "c2", "notes__add_note", json!({"text": "rust is fun"})))
        .chain([DeltaEvent::Done {
            stop_reason: DoneReason::ToolUse,
            usage: Usage::default(),
        }]);
    let paced = futures::stream::iter(words).then(|delta| async move {
        tokio::time::sleep(Duration::from_millis(60)).await;
        delta
    });
    futures::stream::iter(head)
        .chain(paced)
        .chain(futures::stream::iter(tail))
        .map(Ok)
}

/// Runs the example and returns what it prints, one line per event worth showing.
pub async fn run() -> Result<Vec<String>, Box<dyn std::error::Error>> {
    // The server, in process; with a real one: `McpServer::stdio("notes", tokio::process::Command::new(…))`.
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let server = tokio::spawn(async move { Notes::default().serve(server_io).await });
    let notes = McpServer::connect("notes", client_io).await?;
    let _server = server.await??; // keeps the server running

    let mut toolbox = Toolbox::new();
    let mut lines = Vec::new();
    for tool in notes.tools(&ToolPolicy::trusted()).await? {
        let flags = tool.flags();
        lines.push(format!(
            "tool {}: early={} idempotent={} conflict_key={:?} ({})",
            tool.headstart_name(),
            flags.early,
            flags.idempotent,
            flags.conflict_key,
            flags.reasons["async"]
        ));
        toolbox.register(tool)?;
    }

    let store = Arc::new(SqliteStore::open_in_memory()?);
    let engine = Engine::builder(store.clone()).toolbox(toolbox).build();
    let session = store.create_session(0).await?;
    let started = Instant::now();
    let mut events = engine.wrap(&session, 0, model_stream(), CancellationToken::new());
    while let Some(event) = events.next().await {
        let at = started.elapsed().as_millis();
        let line = match &event {
            AgentEvent::MessageUpdate {
                delta: DeltaEvent::TextDelta { delta, .. },
                ..
            } => format!("model says {delta:?}"),
            AgentEvent::ToolExecutionStart { call } => format!("tool_execution_start {} ({})", call.id, call.name),
            AgentEvent::MessageEnd { message, .. } => match message.as_ref() {
                headstart::Message::ToolResult(result) => format!(
                    "result {}: {}",
                    result.tool_call_id,
                    result
                        .content
                        .iter()
                        .filter_map(|block| block.as_text())
                        .collect::<String>()
                ),
                _ => continue,
            },
            AgentEvent::ResponseEnd { .. } => "turn_end".to_owned(),
            _ => continue,
        };
        lines.push(format!("{at:5} ms  {line}"));
    }
    Ok(lines)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    for line in run().await? {
        println!("{line}");
    }
    Ok(())
}
