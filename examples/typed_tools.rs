//! Typed tools: arguments are Rust types whose JSON Schema `schemars` derives, bodies use `?` on any error, and the
//! flags are builder methods. The `search` call starts while the model is still streaming (it is early and
//! idempotent); the `write_note` call writes a file after the stream ended, and a second one, to a path that cannot
//! exist, fails with the `io::Error`'s text as its result.
//!
//! Run with `cargo run --example typed_tools`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use headstart::core::{DoneReason, Usage};
use headstart::schemars::JsonSchema;
use headstart::{tool_fn, CancellationToken, DeltaEvent, Engine, Message, SqliteStore, ToolContext, Toolbox};
use serde::Deserialize;

/// Which documents to search.
#[derive(Deserialize, JsonSchema)]
struct SearchArgs {
    /// The search terms.
    q: String,
    /// At most this many results.
    #[serde(default = "default_limit")]
    limit: u32,
    /// Restrict to a date range (a nested type: the schema gets a `$defs` entry).
    since: Option<DateRange>,
}

fn default_limit() -> u32 {
    3
}

/// A range of years.
#[derive(Deserialize, JsonSchema)]
struct DateRange {
    /// The first year.
    from: u16,
}

/// A note to write.
#[derive(Deserialize, JsonSchema)]
struct NoteArgs {
    /// The note's file name, inside the notes folder.
    name: String,
    /// What to write.
    text: String,
}

/// What the example did, for its test.
#[derive(Debug)]
pub struct Summary {
    /// Agent event names, in order.
    pub events: Vec<&'static str>,
    /// Each stored tool result: (call id, is_error, text).
    pub results: Vec<(String, bool, String)>,
}

/// A model stream: an early `search` call, more text, then two `write_note` calls.
fn model_stream() -> impl futures::Stream<Item = Result<DeltaEvent, headstart::ModelError>> + Send + 'static {
    async_stream::stream! {
        yield Ok(DeltaEvent::Start { model: Some("my-model".into()), response_id: None });
        yield Ok(DeltaEvent::ToolcallStart { index: 0, id: "c1".into(), name: "search".into(), early: false, provider_async: false });
        yield Ok(DeltaEvent::ToolcallDelta { index: 0, delta: r#"{"q": "tokio", "since": {"from": 2020}}"#.into() });
        yield Ok(DeltaEvent::ToolcallEnd { index: 0, arguments: None });
        yield Ok(DeltaEvent::TextStart { index: 1 });
        for word in ["Searching ", "while ", "I ", "keep ", "talking."] {
            tokio::time::sleep(Duration::from_millis(20)).await;
            yield Ok(DeltaEvent::TextDelta { index: 1, delta: word.into() });
        }
        yield Ok(DeltaEvent::TextEnd { index: 1 });
        let note = serde_json::json!({"name": "tokio.txt", "text": "read the tokio docs"});
        yield Ok(DeltaEvent::ToolcallStart { index: 2, id: "c2".into(), name: "write_note".into(), early: false, provider_async: false });
        yield Ok(DeltaEvent::ToolcallEnd { index: 2, arguments: Some(note) });
        let bad = serde_json::json!({"name": "no-such-dir/x.txt", "text": "lost"});
        yield Ok(DeltaEvent::ToolcallStart { index: 3, id: "c3".into(), name: "write_note".into(), early: false, provider_async: false });
        yield Ok(DeltaEvent::ToolcallEnd { index: 3, arguments: Some(bad) });
        yield Ok(DeltaEvent::Done { stop_reason: DoneReason::ToolUse, usage: Usage::default() });
    }
}

/// The tools, over a notes folder.
pub fn toolbox(notes: PathBuf) -> Result<Toolbox, headstart::ToolboxError> {
    let search = tool_fn("search", |args: SearchArgs, _ctx: ToolContext| async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let since = args
            .since
            .map_or(String::new(), |range| format!(" since {}", range.from));
        Ok(format!("{} results for {}{since}", args.limit, args.q))
    })
    .description("Searches the documents")
    .early()
    .idempotent()
    .timeout(Duration::from_secs(5));
    let write_note = tool_fn("write_note", move |args: NoteArgs, _ctx: ToolContext| {
        let path = notes.join(&args.name);
        async move {
            tokio::fs::write(&path, args.text).await?; // an io::Error becomes the call's error result
            Ok(format!("wrote {}", path.display()))
        }
    })
    .description("Writes a note")
    // Writes to one file keep their source order; writes to different files may overlap.
    .conflict_key(|args: &NoteArgs| Some(args.name.clone()));
    Toolbox::new().with(search)?.with(write_note)
}

/// Runs one response through the engine.
pub async fn run() -> Result<Summary, Box<dyn std::error::Error>> {
    let notes = std::env::temp_dir().join(format!("headstart-notes-{}", std::process::id()));
    tokio::fs::create_dir_all(&notes).await?;
    let engine = Engine::builder(Arc::new(SqliteStore::open_in_memory()?))
        .toolbox(toolbox(notes.clone())?)
        .build();
    println!(
        "search's parameters: {}",
        serde_json::to_string(&engine.toolbox().definitions()[0].parameters)?
    );
    let session = engine.create_session().await?;
    let mut stream = engine
        .wrap_next(&session, model_stream(), CancellationToken::new())
        .await?;
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        if event.type_name() != "message_update" {
            println!("  {}", event.type_name());
        }
        events.push(event.type_name());
    }
    let mut results = Vec::new();
    for stored in engine.store().load_log(&session).await? {
        if let Message::ToolResult(result) = stored.message {
            println!("  result {}: {}", result.tool_call_id, result.text());
            results.push((result.tool_call_id.clone(), result.is_error, result.text()));
        }
    }
    tokio::fs::remove_dir_all(&notes).await?;
    Ok(Summary { events, results })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    run().await?;
    Ok(())
}
