//! Exporting headstart's OpenTelemetry GenAI spans over OTLP: the engine emits plain `tracing` spans
//! (`invoke_agent`, `chat {model}`, `execute_tool {tool}`) with the semantic conventions' attribute names, and a
//! `tracing-opentelemetry` layer hands them to an OTLP exporter (HTTP + protobuf). A second, in-process exporter
//! prints what was exported, so the example shows its spans without a collector.
//!
//! Run with `cargo run --example otel`; set `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (default
//! `http://127.0.0.1:4318/v1/traces`) to reach a collector (Jaeger, Tempo, an OpenTelemetry collector…). Without
//! one the export fails after a short timeout, the example says so and exits cleanly.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::{DoneReason, Usage};
use headstart::schemars::JsonSchema;
use headstart::{
    tool_fn, Agent, CancellationToken, DeltaEvent, DeltaStream, Engine, Model, ModelError, ModelRequest, SqliteStore,
    ToolContext, Toolbox, UserMessage,
};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use tracing_subscriber::prelude::*;

/// A model that calls the early `lookup` tool, keeps talking for 200 ms, and answers once it has the result.
struct ScriptedModel;

#[async_trait]
impl Model for ScriptedModel {
    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let first = request.request == 0;
        Ok(async_stream::stream! {
            yield Ok(DeltaEvent::Start { model: Some("scripted-1".into()), response_id: Some(format!("resp_{}", request.request)) });
            if first {
                yield Ok(DeltaEvent::ToolcallStart { index: 0, id: "call_1".into(), name: "lookup".into(), early: false, provider_async: false });
                yield Ok(DeltaEvent::ToolcallEnd { index: 0, arguments: Some(serde_json::json!({"q": "tokio"})) });
            }
            let index = usize::from(first);
            yield Ok(DeltaEvent::TextStart { index });
            for word in ["Looking ", "that ", "up ", "while ", "I ", "talk."] {
                tokio::time::sleep(Duration::from_millis(30)).await;
                yield Ok(DeltaEvent::TextDelta { index, delta: word.into() });
            }
            yield Ok(DeltaEvent::TextEnd { index });
            let stop_reason = if first { DoneReason::ToolUse } else { DoneReason::Stop };
            yield Ok(DeltaEvent::Done { stop_reason, usage: Usage { input: 40, output: 12, cache_read: 32, cache_write: 0 } });
        }
        .boxed())
    }

    fn provider(&self) -> Option<&str> {
        Some("scripted")
    }

    fn model_name(&self) -> Option<&str> {
        Some("scripted-1")
    }
}

/// What to look up.
#[derive(serde::Deserialize, JsonSchema)]
struct LookupArgs {
    /// The search terms.
    q: String,
}

/// Keeps the finished spans, to print them (and for the example's test).
#[derive(Debug, Clone, Default)]
struct Collected(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Collected {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if let Ok(mut spans) = self.0.lock() {
            spans.extend(batch);
        }
        Ok(())
    }
}

/// One exported span: its name and attributes.
#[derive(Debug, Clone)]
pub struct ExportedSpan {
    /// The span's name (`otel.name`).
    pub name: String,
    /// Its attributes, `key=value`.
    pub attributes: Vec<String>,
}

/// Runs one agent run with the spans exported to `endpoint`; returns the spans the in-process exporter saw and the
/// OTLP export's error, if it failed (no collector).
pub fn run(endpoint: &str) -> Result<(Vec<ExportedSpan>, Option<String>), Box<dyn std::error::Error>> {
    // Built outside the tokio runtime: the blocking HTTP client the batch processor uses runs a runtime of its own.
    let otlp = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(endpoint)
        .with_timeout(Duration::from_millis(500))
        .build()?;
    let collected = Collected::default();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(otlp)
        .with_simple_exporter(collected.clone())
        .with_resource(Resource::builder().with_service_name("headstart-example").build())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("headstart-example")));
    let _default = tracing::subscriber::set_default(subscriber);

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let lookup = tool_fn("lookup", |args: LookupArgs, _ctx: ToolContext| async move {
            tokio::time::sleep(Duration::from_millis(80)).await;
            Ok(format!("3 results for {}", args.q))
        })
        .early();
        let engine = Engine::builder(Arc::new(SqliteStore::open_in_memory()?))
            .toolbox(Toolbox::new().with(lookup)?)
            .build();
        let session = engine.create_session().await?;
        let agent = Agent::new(engine, Arc::new(ScriptedModel));
        let mut events = agent.run(&session, UserMessage::new("look up tokio"), CancellationToken::new());
        while events.next().await.is_some() {}
        Ok::<(), Box<dyn std::error::Error>>(())
    })?;
    drop(runtime);

    // Flushing sends the batch: without a collector this fails once the timeout passes, which is not an error here.
    let export_error = provider.force_flush().err().map(|error| error.to_string());
    // Shutting down after a failed flush may report the same failure again; nothing is left to lose.
    let _ = provider.shutdown();
    let spans = collected
        .0
        .lock()
        .map_err(|_| "the span collector's lock is poisoned")?
        .iter()
        .map(|span| ExportedSpan {
            name: span.name.to_string(),
            attributes: span
                .attributes
                .iter()
                .map(|kv| format!("{}={}", kv.key, kv.value))
                .collect(),
        })
        .collect();
    Ok((spans, export_error))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let endpoint = std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .unwrap_or_else(|_| "http://127.0.0.1:4318/v1/traces".to_owned());
    let (spans, export_error) = run(&endpoint)?;
    for span in &spans {
        // The semantic conventions' attributes and headstart's own; tracing-opentelemetry adds code locations too.
        let shown: Vec<&str> = span
            .attributes
            .iter()
            .map(String::as_str)
            .filter(|kv| {
                ["gen_ai.", "headstart.", "error."]
                    .iter()
                    .any(|prefix| kv.starts_with(prefix))
            })
            .collect();
        println!("{}  {}", span.name, shown.join(" "));
    }
    match export_error {
        None => println!("exported {} spans to {endpoint}", spans.len()),
        Some(error) => println!("no collector at {endpoint} ({error}): the spans above were not exported"),
    }
    Ok(())
}
