//! `headstart bench provider-async`: two independent calls, one slow and one quick, with OpenAI's async tool
//! calling on and off and against end-of-stream batching (issue 30; the figures hermes-agent #103020 asks for).
//!
//! Every run is a real agent loop (`Agent` over `HttpModel`, Responses over HTTP) against the replay server, which
//! paces each SSE event by `--pace-ms`. The model's first response calls `research` (slow) and `lookup` (quick), then
//! goes on with a commentary; the second is a commentary that needs only the lookup; the third answers. Three
//! contenders, alternating, `runs` times each:
//! - **batching**: `early_execution = false`: both calls run after the first stream ends, the next request waits
//!   for both (what most agent loops do);
//! - **early**: headstart's default: both calls start at their seal, the next request waits for both;
//! - **provider-async**: the calls are declared and marked `async`: they start at their seal, the first response
//!   ends without waiting for `research`, and its result reaches the model in the first request after it is ready.
//!
//! Batching and early end after the second response (it has no call and every result was delivered); the
//! provider-async loop makes the third request to deliver `research`. Figures, from the engine's own event times:
//! - **tool round**: from the first response's stream end to the next request's stream opening, the time the model
//!   sat idle on the calls (the gap end-of-stream batching spends whole);
//! - **model idle**: all such gaps until the research result reached the model;
//! - **overlap**: the share of the two calls' run time during which a response streamed;
//! - **research delivered**: from the prompt to the opening of the request that carried the research result;
//! - **total**: from the prompt to `agent_end`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use headstart::layer::{ProviderAsyncLayer, ToolLayer};
use headstart::{Agent, AgentEvent, CancellationToken, Engine, EngineConfig, SqliteStore, Tool, Toolbox, UserMessage};
use headstart_providers::http::{HttpModel, HttpModelConfig};
use headstart_providers::replay_server::{responses_stream, ReplayServer, Reply};
use headstart_providers::WireFormat;
use serde::Serialize;
use serde_json::{json, Value};

use crate::tools::BenchTool;
use crate::{median, percentile, round3, BenchError};

/// Options of the provider-async benchmark (reported as given).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderAsyncOptions {
    /// Runs of each contender.
    pub runs: usize,
    /// The replay server's pause before each SSE event (ms).
    pub pace_ms: u64,
    /// Commentary deltas after the calls in the first response, and in the second.
    pub commentary: usize,
    /// How long `research` works (ms).
    pub slow_ms: u64,
    /// How long `lookup` works (ms).
    pub quick_ms: u64,
}

impl Default for ProviderAsyncOptions {
    fn default() -> Self {
        ProviderAsyncOptions {
            runs: 15,
            pace_ms: 25,
            commentary: 40,
            slow_ms: 1_500,
            quick_ms: 150,
        }
    }
}

/// One contender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Contender {
    /// Every call after the stream.
    Batching,
    /// Calls at their seal; the next request waits for both.
    Early,
    /// Calls at their seal; the response ends without the slow one.
    ProviderAsync,
}

impl Contender {
    const ALL: [Contender; 3] = [Contender::Batching, Contender::Early, Contender::ProviderAsync];

    fn name(self) -> &'static str {
        match self {
            Contender::Batching => "batching",
            Contender::Early => "early",
            Contender::ProviderAsync => "provider-async",
        }
    }
}

/// One run's figures (ms).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RunFigures {
    /// First stream end → next request opened.
    pub tool_round_ms: f64,
    /// Every stream end → next request gap until the research result reached the model.
    pub model_idle_ms: f64,
    /// The calls' run time during which a response streamed, over their whole run time.
    pub overlap: f64,
    /// Prompt → the request that carried the research result.
    pub research_delivered_ms: f64,
    /// Prompt → `agent_end`.
    pub total_ms: f64,
    /// Model requests made.
    pub requests: usize,
}

/// A contender's figures over its runs.
#[derive(Debug, Clone, Serialize)]
pub struct ContenderReport {
    /// Which.
    pub contender: Contender,
    /// Every run.
    pub runs: Vec<RunFigures>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderAsyncReport {
    /// What ran.
    pub options: ProviderAsyncOptions,
    /// Per contender.
    pub contenders: Vec<ContenderReport>,
}

/// Runs the benchmark.
pub fn run(options: &ProviderAsyncOptions) -> Result<ProviderAsyncReport, BenchError> {
    if options.runs == 0 {
        return Err(BenchError::new("--runs must be at least 1"));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| BenchError::new(format!("cannot start the runtime: {error}")))?;
    let mut runs: HashMap<Contender, Vec<RunFigures>> = HashMap::new();
    for _ in 0..options.runs {
        for contender in Contender::ALL {
            let figures = runtime.block_on(run_once(contender, options))?;
            runs.entry(contender).or_default().push(figures);
        }
    }
    Ok(ProviderAsyncReport {
        options: options.clone(),
        contenders: (Contender::ALL.iter())
            .map(|&contender| ContenderReport {
                contender,
                runs: runs.remove(&contender).unwrap_or_default(),
            })
            .collect(),
    })
}

/// One agent run of `contender`, on a server of its own.
async fn run_once(contender: Contender, options: &ProviderAsyncOptions) -> Result<RunFigures, BenchError> {
    let marked = contender == Contender::ProviderAsync;
    let calls = [
        ("call_research", "research", options.slow_ms),
        ("call_lookup", "lookup", options.quick_ms),
    ];
    let replies = vec![
        Reply::Events(response("resp_1", &calls, marked, options.commentary)),
        Reply::Events(response("resp_2", &[], false, options.commentary)),
        Reply::Events(response("resp_3", &[], false, 1)),
    ];
    let server = ReplayServer::start(replies, HashMap::new(), Duration::from_millis(options.pace_ms))
        .await
        .map_err(|error| BenchError::new(format!("cannot start the replay server: {error}")))?;
    let mut config = HttpModelConfig::new(WireFormat::OpenAiResponses, "bench")
        .with_base_url(server.url("/v1"))
        .with_api_key_env(None);
    config.provider_async = marked;
    let model = HttpModel::new(config).map_err(|error| BenchError::new(error.to_string()))?;
    let mut toolbox = Toolbox::new();
    for (_, name, _) in calls {
        let tool: Arc<dyn Tool> = Arc::new(BenchTool::new(name, true, None));
        let tool = if marked { ProviderAsyncLayer.layer(tool) } else { tool };
        toolbox
            .register_arc(tool)
            .map_err(|error| BenchError::new(error.to_string()))?;
    }
    let store = Arc::new(SqliteStore::open_in_memory().map_err(|error| BenchError::new(error.to_string()))?);
    let engine = Engine::builder(store)
        .toolbox(toolbox)
        .config(EngineConfig::default().early_execution(contender != Contender::Batching))
        .build();
    let session = engine
        .create_session()
        .await
        .map_err(|error| BenchError::new(error.to_string()))?;
    let agent = Agent::new(engine, Arc::new(model));
    let mut events = agent.run(&session, UserMessage::new("Research it."), CancellationToken::new());
    let mut times = Times::default();
    while let Some(emitted) = events.next_emitted().await {
        times.note(emitted.at_us, &emitted.event);
    }
    times.figures()
}

/// The event times one run's figures come from (µs, engine clock).
#[derive(Default)]
struct Times {
    began: Option<i64>,
    /// Per request: opened, stream ended (its terminal fragment stored).
    opened: Vec<i64>,
    stream_ends: Vec<i64>,
    /// Per call id: started, ended.
    started: HashMap<String, i64>,
    ended: HashMap<String, i64>,
    /// When the research result was stored.
    research_at: Option<i64>,
    ended_at: Option<i64>,
}

impl Times {
    fn note(&mut self, at: i64, event: &AgentEvent) {
        self.began.get_or_insert(at);
        match event {
            AgentEvent::ResponseStart { .. } => self.opened.push(at),
            AgentEvent::MessageEnd { message, .. } => match message.as_ref() {
                // The last fragment of a response before its end is its terminal one: keep the latest.
                headstart::Message::Assistant(_) => {
                    if self.stream_ends.len() < self.opened.len() {
                        self.stream_ends.push(at);
                    } else if let Some(last) = self.stream_ends.last_mut() {
                        *last = at;
                    }
                }
                headstart::Message::ToolResult(result) if result.tool_call_id == "call_research" => {
                    self.research_at = Some(at);
                }
                _ => {}
            },
            AgentEvent::ToolExecutionStart { call } => {
                self.started.insert(call.id.clone(), at);
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, .. } => {
                self.ended.insert(tool_call_id.clone(), at);
            }
            AgentEvent::AgentEnd { .. } => self.ended_at = Some(at),
            _ => {}
        }
    }

    fn figures(&self) -> Result<RunFigures, BenchError> {
        let missing = || BenchError::new("the run ended before the research result reached the model");
        let began = self.began.ok_or_else(missing)?;
        let research_at = self.research_at.ok_or_else(missing)?;
        // The request that carried it: the first opened after it was stored.
        let carrier = self
            .opened
            .iter()
            .position(|&opened| opened > research_at)
            .ok_or_else(missing)?;
        let ms = |us: i64| us as f64 / 1_000.0;
        let gap = |request: usize| ms(self.opened[request + 1] - self.stream_ends[request]);
        let streaming: Vec<(i64, i64)> = self
            .opened
            .iter()
            .copied()
            .zip(self.stream_ends.iter().copied())
            .collect();
        let (mut run, mut hidden) = (0.0, 0.0);
        for (id, &start) in &self.started {
            let end = self.ended.get(id).copied().unwrap_or(start);
            run += ms(end - start);
            hidden += (streaming.iter())
                .map(|&(from, to)| ms((end.min(to) - start.max(from)).max(0)))
                .sum::<f64>();
        }
        Ok(RunFigures {
            tool_round_ms: gap(0),
            model_idle_ms: (0..carrier).map(gap).sum(),
            overlap: if run > 0.0 { hidden / run } else { 0.0 },
            research_delivered_ms: ms(self.opened[carrier] - began),
            total_ms: ms(self.ended_at.unwrap_or(began) - began),
            requests: self.opened.len(),
        })
    }
}

/// A Responses stream: `calls` (id, tool, the `ms` it works), `async: true` on each when `marked`, then a message of
/// `deltas` text deltas, then `response.completed`.
fn response(id: &str, calls: &[(&str, &str, u64)], marked: bool, deltas: usize) -> Vec<String> {
    let calls: Vec<(&str, &str, Value)> = (calls.iter())
        .map(|&(call_id, name, ms)| (call_id, name, json!({"ms": ms})))
        .collect();
    responses_stream::calls_then_commentary(id, &calls, marked, deltas)
}

impl ProviderAsyncReport {
    /// The figures side by side: p50 and p95 of each, and each contender's ratio to batching.
    pub fn table(&self) -> String {
        let o = &self.options;
        let mut out = format!(
            "provider-async: {} runs each · SSE pace {} ms · {} commentary deltas · research {} ms, lookup {} ms\n",
            o.runs, o.pace_ms, o.commentary, o.slow_ms, o.quick_ms
        );
        let _ = writeln!(
            out,
            "{:<15} {:>17} {:>17} {:>9} {:>19} {:>17} {:>8}",
            "contender",
            "tool round p50/95",
            "model idle p50/95",
            "overlap",
            "research at p50/95",
            "total p50/95",
            "requests"
        );
        let batching_total = self.contenders.first().map(|c| median(&totals(c))).unwrap_or_default();
        for contender in &self.contenders {
            let pick = |f: fn(&RunFigures) -> f64| -> Vec<f64> { contender.runs.iter().map(f).collect() };
            let pair = |values: Vec<f64>| format!("{:.0}/{:.0}", median(&values), percentile(&values, 95.0));
            let total = totals(contender);
            let _ = writeln!(
                out,
                "{:<15} {:>17} {:>17} {:>8.0}% {:>19} {:>17} {:>8}   total {:.2}× batching",
                contender.contender.name(),
                pair(pick(|r| r.tool_round_ms)),
                pair(pick(|r| r.model_idle_ms)),
                100.0 * median(&pick(|r| r.overlap)),
                pair(pick(|r| r.research_delivered_ms)),
                pair(total.clone()),
                contender.runs.first().map_or(0, |r| r.requests),
                round3(median(&total) / batching_total.max(f64::MIN_POSITIVE)),
            );
        }
        out
    }
}

fn totals(contender: &ContenderReport) -> Vec<f64> {
    contender.runs.iter().map(|r| r.total_ms).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use headstart::core::{AssistantMessage, StopReason, ToolArguments, ToolCall, ToolResultMessage, Usage};
    use headstart::{AgentEvent, AgentStop, Message};

    use super::Times;

    fn fragment() -> AgentEvent {
        let message = AssistantMessage {
            turn_id: "turn".into(),
            stop_reason: StopReason::Stop,
            content: Vec::new(),
            usage: Usage::default(),
            model: None,
            error_message: None,
        };
        AgentEvent::MessageEnd {
            seq: Some(1),
            message: Arc::new(Message::Assistant(message)),
        }
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: ToolArguments::default(),
            provider_async: true,
        }
    }

    #[test]
    fn the_figures_come_from_the_event_times() {
        let research = call("call_research");
        let result = ToolResultMessage::error(&research, "done");
        let events = [
            (0, AgentEvent::ResponseStart { request: 0 }),
            (
                100,
                AgentEvent::ToolExecutionStart {
                    call: Arc::new(research),
                },
            ),
            (1_000, fragment()),
            (1_050, AgentEvent::ResponseStart { request: 1 }),
            (
                1_600,
                AgentEvent::ToolExecutionEnd {
                    tool_call_id: "call_research".into(),
                    is_error: false,
                    outcome: None,
                },
            ),
            (
                1_600,
                AgentEvent::MessageEnd {
                    seq: Some(2),
                    message: Arc::new(Message::ToolResult(result)),
                },
            ),
            (2_000, fragment()),
            (2_100, AgentEvent::ResponseStart { request: 2 }),
            (2_200, fragment()),
            (
                2_300,
                AgentEvent::AgentEnd {
                    stop: AgentStop::Completed,
                },
            ),
        ];
        let mut times = Times::default();
        for (ms, event) in &events {
            times.note(ms * 1_000, event);
        }
        let figures = times.figures().expect("the research reached the model");
        assert_eq!(figures.tool_round_ms, 50.0);
        assert_eq!(
            figures.model_idle_ms, 150.0,
            "both gaps before the request that carried it"
        );
        assert_eq!(figures.research_delivered_ms, 2_100.0);
        assert_eq!(figures.total_ms, 2_300.0);
        assert_eq!(figures.requests, 3);
        // 1,500 ms of run, streaming 100–1,000 and 1,050–1,600: 1,450 ms hidden.
        assert!(
            (figures.overlap - 1_450.0 / 1_500.0).abs() < 1e-9,
            "{}",
            figures.overlap
        );
    }
}
