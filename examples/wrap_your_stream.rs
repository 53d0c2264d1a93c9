//! Wrapping your own LLM token stream: build a `futures::Stream` of delta events (here with
//! `async_stream::stream!`, as a provider adapter would), give headstart two tools and a hook, and watch the
//! agent events. The async `search` call starts while the stream is still going; the sync `save` call waits
//! for the end of the stream.
//!
//! Run with `cargo run --example wrap_your_stream`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::{DoneReason, Usage};
use headstart::store::SqliteStore;
use headstart::{
    AgentEvent, Arguments, CancellationToken, Decision, DeltaEvent, Engine, HookError, Hooks, Tool, ToolCall,
    ToolContext, ToolError, ToolHook, ToolOutput, Toolbox, TranscriptStore,
};

/// An async tool: safe to start as soon as the model has sealed the call.
struct Search;

#[async_trait]
impl Tool for Search {
    fn name(&self) -> &str {
        "search"
    }
    fn is_async(&self) -> bool {
        true
    }
    async fn execute(&self, args: Arguments, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(ToolOutput::text(format!("3 results for {}", args["q"])))
    }
}

/// A sync tool: runs after the response ended, with the other sync calls.
struct Save;

#[async_trait]
impl Tool for Save {
    fn name(&self) -> &str {
        "save"
    }
    async fn execute(&self, _args: Arguments, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("saved"))
    }
}

/// A hook: log every call before it runs, and block any call to `save` named "secrets".
struct AuditHook;

#[async_trait]
impl ToolHook for AuditHook {
    async fn before_tool_call(&self, call: &ToolCall, args: &Arguments) -> Result<Decision, HookError> {
        println!("    audit: {} {}", call.name, serde_json::Value::Object(args.clone()));
        if args.get("name").and_then(|v| v.as_str()) == Some("secrets") {
            return Ok(Decision::Block(Some("not allowed".into())));
        }
        Ok(Decision::Continue)
    }
}

/// Your model's stream, already converted to delta events.
fn my_model_stream() -> impl futures::Stream<Item = Result<DeltaEvent, headstart::ModelError>> + Send + 'static {
    async_stream::stream! {
        let tick = || tokio::time::sleep(Duration::from_millis(50));
        yield Ok(DeltaEvent::Start { model: Some("my-model".into()), response_id: None });
        yield Ok(DeltaEvent::ToolcallStart { index: 0, id: "c1".into(), name: "search".into(), is_async: false });
        yield Ok(DeltaEvent::ToolcallDelta { index: 0, delta: r#"{"q": "tokio"}"#.into() });
        yield Ok(DeltaEvent::ToolcallEnd { index: 0, arguments: None });
        yield Ok(DeltaEvent::TextStart { index: 1 });
        for word in ["Searching ", "while ", "I ", "keep ", "talking."] {
            tick().await;
            yield Ok(DeltaEvent::TextDelta { index: 1, delta: word.into() });
        }
        yield Ok(DeltaEvent::TextEnd { index: 1 });
        yield Ok(DeltaEvent::ToolcallStart { index: 2, id: "c2".into(), name: "save".into(), is_async: false });
        yield Ok(DeltaEvent::ToolcallEnd { index: 2, arguments: Some(serde_json::json!({"name": "notes"})) });
        yield Ok(DeltaEvent::Done { stop_reason: DoneReason::ToolUse, usage: Usage { input: 12, output: 30, ..Usage::default() } });
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = Arc::new(SqliteStore::open_in_memory()?);
    let engine = Engine::builder(store.clone())
        .toolbox(Toolbox::new().with(Search)?.with(Save)?)
        .hooks(Hooks::new().with(AuditHook))
        .build();
    let session = store.create_session(0).await?;
    let started = std::time::Instant::now();
    let mut events = engine.wrap(&session, 0, my_model_stream(), CancellationToken::new());
    while let Some(event) = events.next().await {
        let at = started.elapsed().as_millis();
        match &event {
            AgentEvent::MessageUpdate { .. } => {} // one per delta: too chatty to print
            AgentEvent::MessageEnd { seq, message } => println!("{at:5} ms  message_end #{seq:?} ({})", message.role()),
            AgentEvent::ToolExecutionStart { call } => {
                println!("{at:5} ms  tool_execution_start {} ({})", call.id, call.name)
            }
            AgentEvent::ToolExecutionEnd {
                tool_call_id, is_error, ..
            } => {
                println!("{at:5} ms  tool_execution_end {tool_call_id} (error: {is_error})")
            }
            other => println!("{at:5} ms  {}", other.type_name()),
        }
    }
    println!("stored transcript:");
    for stored in store.load_log(&session).await? {
        println!("  #{} {}", stored.seq, serde_json::to_string(&stored.message)?);
    }
    Ok(())
}
