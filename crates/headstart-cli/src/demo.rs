//! `headstart demo [--db headstart.db] [--out-dir DIR] [--no-progress]`: the simulated agent run on the wall
//! clock, with a live view (indicatif) or plain lines, and a summary of the time early execution saved.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use headstart::core::DeltaEvent;
use headstart::{AgentEvent, AgentStop, Message};
use headstart_sim::demo::{self, DemoOutcome};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// Arguments of `headstart demo`.
#[derive(clap::Args)]
pub struct Args {
    /// The SQLite transcript file (created if missing; each run adds a session).
    #[arg(long, default_value = "headstart.db")]
    db: PathBuf,
    /// Where the demo's `write_file` tool writes (default: a `headstart-demo` folder in the system temp dir).
    #[arg(long)]
    out_dir: Option<PathBuf>,
    /// Print plain lines instead of the live view (the default when stdout is not a terminal).
    #[arg(long)]
    no_progress: bool,
}

/// Runs the demo; exit status 1 if it could not run.
pub fn run(args: &Args) -> u8 {
    let out_dir = args
        .out_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("headstart-demo"));
    let live = !args.no_progress && std::io::stdout().is_terminal();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("headstart demo: cannot start a runtime: {error}");
            return 1;
        }
    };
    println!("headstart demo: {}", demo::PROMPT);
    println!("(simulated model at 40 tokens/s; lookup_crate is async and runs while the model streams; write_file is sync)\n");
    let mut view: Box<dyn View> = if live {
        Box::new(LiveView::new())
    } else {
        Box::new(PlainView::default())
    };
    let outcome = runtime.block_on(demo::run(&args.db, out_dir.clone(), |event, at_ms| {
        view.event(event, at_ms)
    }));
    view.finish();
    match outcome {
        Ok(outcome) => {
            print_summary(&outcome, args, &out_dir);
            0
        }
        Err(error) => {
            eprintln!("headstart demo: {error}");
            1
        }
    }
}

fn print_summary(outcome: &DemoOutcome, args: &Args, out_dir: &std::path::Path) {
    let timeline = &outcome.timeline;
    let savings = timeline.savings();
    let seconds = |ms: f64| ms / 1000.0;
    println!();
    println!(
        "Finished in {:.2} s: {} model requests, {} tool calls ({:?}).",
        seconds(savings.actual_end_ms),
        timeline.requests.len(),
        timeline.calls.len(),
        outcome.stop
    );
    println!(
        "End-of-stream batching would have taken {:.2} s with the same measured durations: \
         early execution saved {:.2} s ({:.0}%).",
        seconds(savings.batching_end_ms),
        seconds(savings.saved_ms()),
        savings.saved_percent()
    );
    for request in &savings.requests {
        println!(
            "  request {}: stream ended {:.2} s, settled {:.2} s (batching: {:.2} s)",
            request.request,
            seconds(request.stream_end_ms),
            seconds(request.actual_settle_ms),
            seconds(request.batching_settle_ms)
        );
    }
    let db = args.db.display();
    println!("Transcript: {db} (session {}). Look at it with:", outcome.session);
    println!("  headstart inspect {db}");
    println!("  headstart timeline {db} --out timeline.svg");
    println!("Files written by the agent: {}", out_dir.display());
    if !matches!(outcome.stop, AgentStop::Completed) {
        println!("note: the run ended with {:?}", outcome.stop);
    }
}

/// Renders agent events for a person.
trait View {
    fn event(&mut self, event: &AgentEvent, at_ms: f64);
    fn finish(&mut self) {}
}

fn tool_label(call: &headstart::ToolCall) -> String {
    let argument = call
        .arguments
        .as_object()
        .and_then(|args| args.get("name").or_else(|| args.get("path")))
        .and_then(|value| value.as_str())
        .unwrap_or("");
    format!("{}({argument})", call.name)
}

/// Plain lines, one per notable event.
#[derive(Default)]
struct PlainView {
    line: String,
    labels: HashMap<String, (String, f64)>,
}

impl View for PlainView {
    fn event(&mut self, event: &AgentEvent, at_ms: f64) {
        let at = at_ms / 1000.0;
        match event {
            AgentEvent::TurnStart { request } => println!("[{at:6.2}s] request {request} starts"),
            AgentEvent::MessageUpdate {
                delta: DeltaEvent::TextDelta { delta, .. },
                ..
            } => self.line.push_str(delta),
            AgentEvent::MessageUpdate {
                delta: DeltaEvent::TextEnd { .. },
                ..
            } => {
                println!("[{at:6.2}s] model: {}", self.line.trim());
                self.line.clear();
            }
            AgentEvent::MessageEnd { message, seq } if matches!(**message, Message::Assistant(_)) => {
                println!(
                    "[{at:6.2}s] fragment stored (seq {})",
                    seq.map_or("-".to_owned(), |s| s.to_string())
                );
            }
            AgentEvent::ToolExecutionStart { call } => {
                let label = tool_label(call);
                println!("[{at:6.2}s] ▶ {label} started");
                self.labels.insert(call.id.clone(), (label, at_ms));
            }
            AgentEvent::ToolExecutionEnd {
                tool_call_id, is_error, ..
            } => {
                let (label, started) = self.labels.get(tool_call_id).cloned().unwrap_or_default();
                let mark = if *is_error { "✗" } else { "✓" };
                println!("[{at:6.2}s] {mark} {label} done in {:.2}s", (at_ms - started) / 1000.0);
            }
            AgentEvent::TurnEnd { request, outcome } => {
                println!("[{at:6.2}s] request {request} settled ({})", outcome.stop_reason);
            }
            _ => {}
        }
    }
}

/// The live view: a line for the model's streaming text and one per tool call with its state and elapsed time.
struct LiveView {
    bars: MultiProgress,
    model: ProgressBar,
    text: String,
    tools: HashMap<String, (ProgressBar, String)>,
}

const TEXT_WIDTH: usize = 72;

impl LiveView {
    fn new() -> Self {
        let bars = MultiProgress::new();
        let model = bars.add(ProgressBar::new_spinner());
        model.set_style(spinner_style("{spinner:.cyan} {prefix:.bold} {msg}"));
        model.set_prefix("model");
        model.enable_steady_tick(Duration::from_millis(80));
        LiveView {
            bars,
            model,
            text: String::new(),
            tools: HashMap::new(),
        }
    }
}

fn spinner_style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .with_key(
            "seconds",
            |state: &indicatif::ProgressState, out: &mut dyn std::fmt::Write| {
                let _ = write!(out, "{:.2}s", state.elapsed().as_secs_f64());
            },
        )
}

impl View for LiveView {
    fn event(&mut self, event: &AgentEvent, at_ms: f64) {
        match event {
            AgentEvent::TurnStart { request } => {
                self.text.clear();
                self.model.set_prefix(format!("model (request {request})"));
            }
            AgentEvent::MessageUpdate {
                delta: DeltaEvent::TextDelta { delta, .. },
                ..
            } => {
                self.text.push_str(delta);
                let tail: String = {
                    let chars: Vec<char> = self.text.chars().collect();
                    chars[chars.len().saturating_sub(TEXT_WIDTH)..].iter().collect()
                };
                self.model.set_message(tail);
            }
            AgentEvent::MessageUpdate {
                delta: DeltaEvent::TextEnd { .. },
                ..
            } => self.text.push(' '),
            AgentEvent::MessageUpdate {
                delta: DeltaEvent::ToolcallStart { name, .. },
                ..
            } => {
                self.model.set_message(format!("… calling {name}"));
            }
            AgentEvent::ToolExecutionStart { call } => {
                let label = tool_label(call);
                let bar = self.bars.add(ProgressBar::new_spinner());
                bar.set_style(spinner_style("  {spinner:.yellow} {prefix:28} running {seconds}"));
                bar.set_prefix(label.clone());
                let label = format!("{label:28} started at {:5.2}s,", at_ms / 1000.0);
                bar.enable_steady_tick(Duration::from_millis(80));
                self.tools.insert(call.id.clone(), (bar, label));
            }
            AgentEvent::ToolExecutionEnd {
                tool_call_id, is_error, ..
            } => {
                if let Some((bar, label)) = self.tools.get(tool_call_id) {
                    let seconds = bar.elapsed().as_secs_f64();
                    bar.set_style(spinner_style("  {msg}"));
                    let mark = if *is_error { "✗ failed" } else { "✓ done  " };
                    bar.finish_with_message(format!("{label} {mark} in {seconds:.2}s"));
                }
            }
            AgentEvent::TurnEnd { request, outcome } => {
                self.model
                    .set_message(format!("request {request} settled ({})", outcome.stop_reason));
            }
            _ => {}
        }
    }

    fn finish(&mut self) {
        self.model.finish_with_message("finished");
        let _ = self.bars.println("");
    }
}
