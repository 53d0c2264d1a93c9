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
use headstart::schemars::JsonSchema;
use headstart::store::SqliteStore;
use headstart::{
    tool_fn, AgentEvent, Arguments, CancellationToken, Decision, DeltaEvent, Engine, Hooks, ToolCall, ToolContext,
    ToolError, ToolHook, Toolbox,
};
use serde::Deserialize;

/// What the model searches for.
#[derive(Deserialize, JsonSchema)]
struct SearchArgs {
    /// The search terms.
    q: String,
}

/// What to save.
#[derive(Deserialize, JsonSchema)]
struct SaveArgs {
    /// The note's name.
    name: String,
}

fn toolbox() -> Result<Toolbox, headstart::ToolboxError> {
    // An early tool: safe to start as soon as the model has sealed the call.
    let search = tool_fn("search", |args: SearchArgs, _ctx: ToolContext| async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(format!("3 results for {}", args.q))
    })
    .early();
    // A sync tool: runs after the response ended, with the other sync calls.
    let save = tool_fn("save", |args: SaveArgs, _ctx: ToolContext| async move {
        Ok(format!("saved {}", args.name))
    });
    Toolbox::new().with(search)?.with(save)
}

/// A hook: log every call before it runs, and block any call to `save` named "secrets".
struct AuditHook;

#[async_trait]
impl ToolHook for AuditHook {
    async fn before_tool_call(&self, call: &ToolCall, args: &Arguments) -> Result<Decision, ToolError> {
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
        yield Ok(DeltaEvent::ToolcallStart { index: 0, id: "c1".into(), name: "search".into(), early: false, provider_async: false });
        yield Ok(DeltaEvent::ToolcallDelta { index: 0, delta: r#"{"q": "tokio"}"#.into() });
        yield Ok(DeltaEvent::ToolcallEnd { index: 0, arguments: None });
        yield Ok(DeltaEvent::TextStart { index: 1 });
        for word in ["Searching ", "while ", "I ", "keep ", "talking."] {
            tick().await;
            yield Ok(DeltaEvent::TextDelta { index: 1, delta: word.into() });
        }
        yield Ok(DeltaEvent::TextEnd { index: 1 });
        yield Ok(DeltaEvent::ToolcallStart { index: 2, id: "c2".into(), name: "save".into(), early: false, provider_async: false });
        yield Ok(DeltaEvent::ToolcallEnd { index: 2, arguments: Some(serde_json::json!({"name": "notes"})) });
        yield Ok(DeltaEvent::Done { stop_reason: DoneReason::ToolUse, usage: Usage { input: 12, output: 30, ..Usage::default() } });
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::builder(Arc::new(SqliteStore::open_in_memory()?))
        .toolbox(toolbox()?)
        .hooks(Hooks::new().with(AuditHook))
        .build();
    let session = engine.create_session().await?;
    let started = std::time::Instant::now();
    let mut events = engine
        .wrap_next(&session, my_model_stream(), CancellationToken::new())
        .await?;
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
    for stored in engine.store().load_log(&session).await? {
        println!("  #{} {}", stored.seq, serde_json::to_string(&stored.message)?);
    }
    Ok(())
}
