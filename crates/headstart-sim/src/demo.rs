//! The demo: a simulated streaming model answering "research three crates and write a summary file" on the wall
//! clock, with early lookups interleaved in its text and a sync file write at the end.
//!
//! Shared by `headstart demo` (which adds a live terminal view) and `examples/simulated_model.rs`. Nothing here
//! needs a network or configuration: the model's responses and the lookups' answers are scripted, the waits real.

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::delta_log::TimedDelta;
use headstart::core::{DeltaEvent, DoneReason, Usage};
use headstart::store::{SessionId, SqliteOptions, SqliteStore, TranscriptStore};
use headstart::{
    Agent, AgentEvent, AgentStop, Arguments, CancellationToken, Clock, DeltaStream, Engine, Model, ModelError,
    ModelRequest, SystemClock, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, Toolbox, ToolboxError, UserMessage,
};
use headstart_timeline::Timeline;
use serde_json::json;

use crate::sim_model::timed_stream;

/// Milliseconds between two streamed tokens: 40 tokens per second, a typical rate for a large model.
pub const TOKEN_INTERVAL_MS: u64 = 25;

/// The demo's user prompt.
pub const PROMPT: &str = "Research tokio, serde and rusqlite and write a short summary to summary.md.";

/// Builds a scripted response: text streamed token by token, tool calls with streamed arguments.
#[derive(Debug, Default)]
struct Script {
    events: Vec<TimedDelta>,
    now_ms: u64,
    next_index: usize,
}

impl Script {
    fn new() -> Self {
        let mut script = Script::default();
        script.push(
            0,
            DeltaEvent::Start {
                model: Some("simulated-model".into()),
                response_id: None,
            },
        );
        script
    }

    fn push(&mut self, after_ms: u64, event: DeltaEvent) {
        self.now_ms += after_ms;
        self.events.push(TimedDelta {
            at_ms: self.now_ms,
            event,
        });
    }

    /// Streams `text` as one block, a word per token.
    fn text(mut self, text: &str) -> Self {
        let index = self.next_index;
        self.next_index += 1;
        self.push(TOKEN_INTERVAL_MS, DeltaEvent::TextStart { index });
        for word in text.split_inclusive(' ') {
            self.push(
                TOKEN_INTERVAL_MS,
                DeltaEvent::TextDelta {
                    index,
                    delta: word.to_owned(),
                },
            );
        }
        self.push(0, DeltaEvent::TextEnd { index });
        self
    }

    /// Streams a tool call whose JSON arguments arrive in a few chunks.
    fn call(mut self, id: &str, name: &str, arguments: serde_json::Value) -> Self {
        let index = self.next_index;
        self.next_index += 1;
        self.push(
            TOKEN_INTERVAL_MS,
            DeltaEvent::ToolcallStart {
                index,
                id: id.to_owned(),
                name: name.to_owned(),
                early: false,
                provider_async: false,
            },
        );
        let text = arguments.to_string();
        let chunk = text.len().div_ceil(4).max(1);
        let mut rest = text.as_str();
        while !rest.is_empty() {
            let mut cut = chunk.min(rest.len());
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            let (head, tail) = rest.split_at(cut);
            self.push(
                TOKEN_INTERVAL_MS,
                DeltaEvent::ToolcallDelta {
                    index,
                    delta: head.to_owned(),
                },
            );
            rest = tail;
        }
        self.push(0, DeltaEvent::ToolcallEnd { index, arguments: None });
        self
    }

    fn done(mut self, stop_reason: DoneReason, output_tokens: u64) -> Vec<TimedDelta> {
        let usage = Usage {
            input: 420,
            output: output_tokens,
            ..Usage::default()
        };
        self.push(TOKEN_INTERVAL_MS, DeltaEvent::Done { stop_reason, usage });
        self.events
    }
}

const SUMMARY: &str = "# tokio, serde and rusqlite\n\n\
- tokio: the async runtime: tasks, timers, I/O.\n\
- serde: the serialization framework, derive-based.\n\
- rusqlite: ergonomic SQLite bindings, bundled SQLite optional.\n";

/// The scripted responses, one per model request.
pub fn responses() -> Vec<Vec<TimedDelta>> {
    let research = Script::new()
        .text("I'll look up each crate while I plan the summary. First tokio, the async runtime.")
        .call("lookup_tokio", "lookup_crate", json!({"name": "tokio"}))
        .text("Next serde, which most of the ecosystem uses for serialization.")
        .call("lookup_serde", "lookup_crate", json!({"name": "serde"}))
        .text("And rusqlite, for the embedded database side.")
        .call("lookup_rusqlite", "lookup_crate", json!({"name": "rusqlite"}))
        .text("I also want the download trend to decide the order of the summary, so one more lookup.")
        .call("lookup_trends", "lookup_crate", json!({"name": "trends"}))
        .text("While those run: the summary will have one line per crate, what it is for and why it matters.")
        .done(DoneReason::ToolUse, 180);
    let write = Script::new()
        .text("All three lookups are back. Writing the summary now.")
        .call(
            "write_summary",
            "write_file",
            json!({"path": "summary.md", "content": SUMMARY}),
        )
        .done(DoneReason::ToolUse, 90);
    let finish = Script::new()
        .text("Done: summary.md lists tokio, serde and rusqlite with one line each.")
        .done(DoneReason::Stop, 20);
    vec![research, write, finish]
}

/// The simulated model: answers request n with `responses()[n]`, on the wall clock.
#[derive(Debug, Clone)]
pub struct DemoModel {
    responses: Arc<Vec<Vec<TimedDelta>>>,
}

impl Default for DemoModel {
    fn default() -> Self {
        DemoModel {
            responses: Arc::new(responses()),
        }
    }
}

#[async_trait]
impl Model for DemoModel {
    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let turn = usize::try_from(request.request).unwrap_or(usize::MAX);
        let events = self.responses.get(turn).cloned().ok_or_else(|| {
            ModelError::new(format!(
                "the demo model has no response for request {}",
                request.request
            ))
        })?;
        Ok(timed_stream(events))
    }
}

/// `lookup_crate`: an early lookup that takes 300–1200 ms.
#[derive(Debug, Clone, Copy)]
pub struct LookupCrate;

fn lookup(name: &str) -> (u64, &'static str) {
    match name {
        "tokio" => (
            1100,
            "tokio 1.x: async runtime with a work-stealing scheduler, timers and async I/O.",
        ),
        "serde" => (
            700,
            "serde 1.x: derive-based serialization framework; formats live in separate crates.",
        ),
        "rusqlite" => (
            900,
            "rusqlite: SQLite bindings; the `bundled` feature compiles SQLite in.",
        ),
        "trends" => (
            400,
            "downloads: serde > tokio > rusqlite (all three are among the most used crates).",
        ),
        _ => (300, "no such crate in the simulated registry."),
    }
}

#[async_trait]
impl Tool for LookupCrate {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec::new("lookup_crate")
                .description("Look a crate up in the (simulated) registry.")
                .parameters(json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}))
                .early(true)
                .idempotent(true)
        });
        &SPEC
    }

    async fn execute(&self, arguments: Arguments, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let name = arguments.get("name").and_then(|v| v.as_str()).unwrap_or_default();
        let (delay_ms, answer) = lookup(name);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(delay_ms)) => Ok(ToolOutput::text(answer)),
            () = context.cancel.cancelled() => Err(ToolError::new("cancelled")),
        }
    }
}

/// `write_file`: a sync tool that really writes a file, inside the demo's output folder only.
#[derive(Debug, Clone)]
pub struct WriteFile {
    out_dir: PathBuf,
}

impl WriteFile {
    /// Writes into `out_dir`.
    pub fn new(out_dir: PathBuf) -> Self {
        WriteFile { out_dir }
    }
}

#[async_trait]
impl Tool for WriteFile {
    fn spec(&self) -> &ToolSpec {
        static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
            ToolSpec::new("write_file")
                .description("Write a text file in the output folder.")
                .parameters(json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                    "required": ["path", "content"]
                }))
        });
        &SPEC
    }

    async fn execute(&self, arguments: Arguments, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        let path = arguments.get("path").and_then(|v| v.as_str()).unwrap_or_default();
        let content = arguments.get("content").and_then(|v| v.as_str()).unwrap_or_default();
        // Only a plain file name: the model must not escape the output folder.
        let name = std::path::Path::new(path)
            .file_name()
            .filter(|name| *name == std::ffi::OsStr::new(path))
            .ok_or_else(|| ToolError::new(format!("refusing to write outside the output folder: {path}")))?;
        let target = self.out_dir.join(name);
        tokio::fs::create_dir_all(&self.out_dir)
            .await
            .map_err(|err| ToolError::new(err.to_string()))?;
        tokio::fs::write(&target, content)
            .await
            .map_err(|err| ToolError::new(err.to_string()))?;
        Ok(ToolOutput::text(format!(
            "wrote {} bytes to {}",
            content.len(),
            target.display()
        )))
    }
}

/// The demo's tools.
pub fn toolbox(out_dir: PathBuf) -> Result<Toolbox, ToolboxError> {
    Toolbox::new().with(LookupCrate)?.with(WriteFile::new(out_dir))
}

/// What a finished demo run measured.
#[derive(Debug)]
pub struct DemoOutcome {
    /// The run as stored, on one time axis, with its comparison against end-of-stream batching.
    pub timeline: Timeline,
    /// Why the agent stopped.
    pub stop: AgentStop,
    /// The session the transcript is stored under.
    pub session: SessionId,
}

/// Runs the demo against the SQLite file `db`, writing tool output into `out_dir`, calling `observe` with every
/// agent event and its time in milliseconds since the start.
pub async fn run(
    db: &Path,
    out_dir: PathBuf,
    mut observe: impl FnMut(&AgentEvent, f64),
) -> Result<DemoOutcome, String> {
    let store = SqliteStore::open(db, SqliteOptions::default()).map_err(|err| err.to_string())?;
    let store: Arc<dyn TranscriptStore> = Arc::new(store);
    let engine = Engine::builder(Arc::clone(&store))
        .toolbox(toolbox(out_dir).map_err(|err| err.to_string())?)
        .build();
    let agent = Agent::new(engine, Arc::new(DemoModel::default()));
    let session = store
        .create_session(SystemClock.now_us())
        .await
        .map_err(|err| err.to_string())?;
    let started = std::time::Instant::now();
    let mut events = agent.run(&session, UserMessage::new(PROMPT), CancellationToken::new());
    let mut stop = AgentStop::Completed;
    while let Some(event) = events.next().await {
        observe(&event, started.elapsed().as_secs_f64() * 1000.0);
        if let AgentEvent::AgentEnd { stop: end } = &event {
            stop = end.clone();
        }
    }
    // The summary is computed from what was stored, exactly as `headstart timeline` draws it.
    let log = store.load_log(&session).await.map_err(|err| err.to_string())?;
    let runs = store.tool_runs(&session).await.map_err(|err| err.to_string())?;
    let timeline = Timeline::from_store(session.to_string(), &log, &runs);
    Ok(DemoOutcome {
        timeline,
        stop,
        session,
    })
}
