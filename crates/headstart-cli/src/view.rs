//! The terminal view of a run, shared by `headstart demo` and `headstart run`: a live view (indicatif: the model's
//! streaming text, one line per tool call with its state and elapsed time) or plain lines, and the summary of the
//! time early execution saved.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use headstart::core::DeltaEvent;
use headstart::{AgentEvent, Message, ResponseOutcome};
use headstart_timeline::Timeline;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use headstart_timeline::visible::{one_line, visible, Lines};

/// Prints what the stored timings say: the run's duration and what end-of-stream batching would have taken with
/// the same measured durations, per request too. `stop` says how the run ended.
pub fn print_savings(timeline: &Timeline, stop: &str) {
    let savings = timeline.savings();
    let seconds = |ms: f64| ms / 1000.0;
    println!();
    println!(
        "Finished in {:.2} s: {} model requests, {} tool calls ({stop}).",
        seconds(savings.actual_end_ms),
        timeline.requests.len(),
        timeline.calls.len(),
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
}

/// A view: live when the output is a terminal, plain lines otherwise.
pub struct View(Box<dyn Render>);

impl View {
    /// The live view, or plain lines.
    pub fn new(live: bool) -> Self {
        if live {
            View(Box::new(LiveView::new()))
        } else {
            View(Box::new(PlainView::default()))
        }
    }

    /// Shows one event, `at_ms` after the start.
    pub fn event(&mut self, event: &AgentEvent, at_ms: f64) {
        self.0.event(event, at_ms);
    }

    /// Ends the view (the live one stops its spinners).
    pub fn finish(&mut self) {
        self.0.finish();
    }
}

/// Renders agent events for a person.
trait Render {
    fn event(&mut self, event: &AgentEvent, at_ms: f64);
    fn finish(&mut self) {}
}

/// `request N settled (stop reason)`, with the error when the response failed (a timeout, a refused stream); the
/// error may quote the provider, so it is made visible.
fn settled(request: u32, outcome: &ResponseOutcome) -> String {
    match &outcome.error {
        Some(error) => format!(
            "request {request} settled ({}: {})",
            outcome.stop_reason,
            one_line(error)
        ),
        None => format!("request {request} settled ({})", outcome.stop_reason),
    }
}

/// `name(argument)` for a call, with the name and the argument made visible (they come from the model).
fn tool_label(call: &headstart::ToolCall) -> String {
    let argument = call
        .arguments
        .as_object()
        .and_then(|args| {
            args.get("name")
                .or_else(|| args.get("path"))
                .or_else(|| args.get("url"))
        })
        .and_then(|value| value.as_str())
        .unwrap_or("");
    one_line(&format!("{}({argument})", call.name)).into_owned()
}

/// Plain lines, one per notable event.
#[derive(Default)]
struct PlainView {
    line: String,
    labels: HashMap<String, (String, f64)>,
}

impl Render for PlainView {
    fn event(&mut self, event: &AgentEvent, at_ms: f64) {
        let at = at_ms / 1000.0;
        match event {
            AgentEvent::ResponseStart { request } => println!("[{at:6.2}s] request {request} starts"),
            AgentEvent::MessageUpdate {
                delta: DeltaEvent::TextDelta { delta, .. },
                ..
            } => self.line.push_str(delta),
            AgentEvent::MessageUpdate {
                delta: DeltaEvent::TextEnd { .. },
                ..
            } => {
                println!("[{at:6.2}s] model: {}", visible(self.line.trim(), Lines::Keep));
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
            AgentEvent::ResponseEnd { request, outcome } => {
                println!("[{at:6.2}s] {}", settled(*request, outcome));
            }
            _ => {}
        }
    }
}

/// The live view: a line for the model's streaming text and one per tool call with its state and elapsed time.
struct LiveView {
    bars: MultiProgress,
    model: ProgressBar,
    /// The last [`TEXT_WIDTH`] characters of the streamed text, as shown: only the tail is kept, so the cost of a
    /// delta is its own length, not the length of the text so far.
    tail: VecDeque<char>,
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
            tail: VecDeque::with_capacity(TEXT_WIDTH + 1),
            tools: HashMap::new(),
        }
    }
}

impl LiveView {
    /// Appends streamed text to the shown tail: line breaks become spaces (the view is one line), every other
    /// control character a visible escape.
    fn push_text(&mut self, delta: &str) {
        for c in delta.chars() {
            if c == '\n' {
                self.tail.push_back(' ');
            } else {
                let mut buffer = [0u8; 4];
                self.tail.extend(one_line(c.encode_utf8(&mut buffer)).chars());
            }
            while self.tail.len() > TEXT_WIDTH {
                self.tail.pop_front();
            }
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

impl Render for LiveView {
    fn event(&mut self, event: &AgentEvent, at_ms: f64) {
        match event {
            AgentEvent::ResponseStart { request } => {
                self.tail.clear();
                self.model.set_prefix(format!("model (request {request})"));
            }
            AgentEvent::MessageUpdate {
                delta: DeltaEvent::TextDelta { delta, .. },
                ..
            } => {
                self.push_text(delta);
                self.model.set_message(self.tail.iter().collect::<String>());
            }
            AgentEvent::MessageUpdate {
                delta: DeltaEvent::TextEnd { .. },
                ..
            } => self.push_text(" "),
            AgentEvent::MessageUpdate {
                delta: DeltaEvent::ToolcallStart { name, .. },
                ..
            } => {
                self.model.set_message(format!("… calling {}", one_line(name)));
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
            AgentEvent::ResponseEnd { request, outcome } => {
                self.model.set_message(settled(*request, outcome));
            }
            _ => {}
        }
    }

    fn finish(&mut self) {
        self.model.finish_with_message("finished");
        let _ = self.bars.println("");
    }
}
