//! The human view of a stored session: fragments grouped by model request, each tool call with its run (outcome,
//! durations) and its result indented under it, unfinished calls flagged. Pure: the caller loads the records.

use std::collections::{HashMap, HashSet};

use headstart::core::model::{AssistantMessage, ContentBlock, ToolArguments, ToolCall, ToolResultMessage, Usage};
use headstart::store::{RunState, StoredMessage, ToolRun, UnfinishedCall};
use headstart::Message;
use headstart_timeline::answers::{Answers, CallKey};
use headstart_timeline::{format_ms, Figures, Timeline};

use headstart_timeline::visible::{visible, Lines};

/// Width of the `#seq  +time` column; content lines are indented by it.
const GUTTER: usize = 19;
/// Longest line of result or message text shown.
const MAX_LINE: usize = 160;
/// Lines of a tool result shown.
const RESULT_LINES: usize = 4;
/// Lines of one assistant text block shown.
const TEXT_LINES: usize = 20;
/// Longest argument text shown.
const MAX_ARGUMENTS: usize = 120;

/// Renders a session (its durable log in write order, its tool runs and its unfinished calls, as the store
/// returns them) for people. Times are relative to the session's first message. Everything stored came from the
/// model, tools or a provider, so the whole text is made [`visible`]: no control character reaches the terminal.
pub fn render(log: &[StoredMessage], runs: &[ToolRun], unfinished: &[UnfinishedCall]) -> String {
    visible(&render_raw(log, runs, unfinished), Lines::Keep).into_owned()
}

fn render_raw(log: &[StoredMessage], runs: &[ToolRun], unfinished: &[UnfinishedCall]) -> String {
    let origin = log.first().map_or(0, |stored| stored.at_us);

    // Fragments per request, to write each request's header before its first fragment; the calls in the log, and
    // the call each result answers (a call is its request and id: ids repeat across responses, contract §7.2.2).
    let answers = Answers::of(log);
    let mut fragments: HashMap<u32, Vec<(&StoredMessage, &AssistantMessage)>> = HashMap::new();
    for stored in log {
        if let Message::Assistant(assistant) = &stored.message {
            fragments
                .entry(stored.request.unwrap_or(u32::MAX))
                .or_default()
                .push((stored, assistant));
        }
    }
    let view = View {
        origin,
        runs: runs
            .iter()
            .map(|run| ((Some(run.request), run.call_id.as_str()), run))
            .collect(),
        unfinished: unfinished
            .iter()
            .map(|call| ((Some(call.run.request), call.run.call_id.as_str()), call))
            .collect(),
        results: answers.results.clone(),
        answers: &answers,
        figures: Timeline::from_store("", log, runs).figures(),
    };

    let mut out = String::new();
    let requests = fragments.len();
    out.push_str(&format!(
        "  {} message{} · {} request{} · {} tool run{}{}\n",
        log.len(),
        plural(log.len()),
        requests,
        plural(requests),
        runs.len(),
        plural(runs.len()),
        if unfinished.is_empty() {
            String::new()
        } else {
            format!(" · {} UNFINISHED", unfinished.len())
        }
    ));

    let mut headed: HashSet<u32> = HashSet::new();
    for stored in log {
        match &stored.message {
            Message::User(user) => {
                out.push('\n');
                if user.text.contains('\n') {
                    out.push_str(&view.head(stored, "user:"));
                    push_text(&mut out, GUTTER, &user.text, TEXT_LINES);
                } else {
                    out.push_str(&view.head(stored, &format!("user: {}", cut(&user.text, MAX_LINE))));
                }
            }
            Message::Assistant(assistant) => {
                let request = stored.request.unwrap_or(u32::MAX);
                let group = &fragments[&request];
                let later_request = fragments.keys().any(|&other| other > request && other != u32::MAX);
                let ended = group.last().is_some_and(|(_, last)| stream_ended(last, later_request));
                if headed.insert(request) {
                    out.push('\n');
                    out.push_str(&request_header(stored.request, group, ended, &view));
                }
                let position = group.iter().position(|(s, _)| s.seq == stored.seq).unwrap_or(0) + 1;
                let terminal = if position == group.len() && ended {
                    " (terminal)"
                } else {
                    ""
                };
                out.push_str(&view.head(stored, &format!("fragment {position}/{}{terminal}", group.len())));
                for block in &assistant.content {
                    match block {
                        ContentBlock::Text { text } => push_text(&mut out, GUTTER, text, TEXT_LINES),
                        ContentBlock::Thinking { thinking, .. } => {
                            let line = one_line(thinking, MAX_LINE);
                            out.push_str(&format!("{:GUTTER$}thinking: {line}\n", ""));
                        }
                        ContentBlock::ToolCall(call) => view.call(&mut out, stored.request, call),
                    }
                }
            }
            Message::ToolResult(result) => {
                // Results are shown under their calls; only a result whose call is not in the log stands alone.
                if !answers.answers_a_call_in_the_log(stored.seq) {
                    out.push_str(&view.head(
                        stored,
                        &format!(
                            "result for {} {} (call not in the log)",
                            result.tool_call_id, result.tool_name
                        ),
                    ));
                    push_result_text(&mut out, GUTTER + 2, result);
                }
            }
        }
    }

    // Unfinished calls whose fragment is missing from the log would otherwise go unseen.
    let missing: Vec<&UnfinishedCall> = unfinished
        .iter()
        .filter(|call| {
            !answers
                .calls
                .contains(&(Some(call.run.request), call.run.call_id.as_str()))
        })
        .collect();
    for call in missing {
        out.push('\n');
        view.call(&mut out, Some(call.run.request), &call.call);
    }

    if !unfinished.is_empty() {
        let list: Vec<String> = unfinished
            .iter()
            .map(|call| {
                format!(
                    "{} {} ({})",
                    call.run.call_id,
                    call.run.tool_name,
                    state_words(call.run.state)
                )
            })
            .collect();
        out.push_str(&format!(
            "\n  ! {} UNFINISHED call{} (admitted, no result): {}\n",
            unfinished.len(),
            plural(unfinished.len()),
            list.join(", ")
        ));
    }
    out
}

/// Lookups shared by the rendering steps.
struct View<'a> {
    origin: i64,
    runs: HashMap<CallKey<'a>, &'a ToolRun>,
    unfinished: HashMap<CallKey<'a>, &'a UnfinishedCall>,
    results: HashMap<CallKey<'a>, (&'a StoredMessage, &'a ToolResultMessage)>,
    /// Which calls answer what, and which request carried each result (contract §3.7.5).
    answers: &'a Answers<'a>,
    /// Headroom, overlap and each response's tool round, from the stored times (issue 29).
    figures: Figures,
}

impl View<'_> {
    /// `+123 ms` relative to the session's first message.
    fn at(&self, at_us: i64) -> String {
        #[allow(clippy::cast_precision_loss)]
        let ms = (at_us - self.origin) as f64 / 1000.0;
        format!("+{} ms", format_ms(ms))
    }

    /// The first line of a message: `#seq  +time  what`.
    fn head(&self, stored: &StoredMessage, what: &str) -> String {
        let seq = format!("#{}", stored.seq);
        format!("  {seq:<5}{:>10}  {what}\n", self.at(stored.at_us))
    }

    /// A tool call of request `request` with its run and its result under it.
    fn call(&self, out: &mut String, request: Option<u32>, call: &ToolCall) {
        let arguments = match &call.arguments {
            ToolArguments::Valid(map) => one_line(&serde_json::to_string(map).unwrap_or_default(), MAX_ARGUMENTS),
            ToolArguments::Invalid { raw, .. } => format!("(invalid arguments) {}", one_line(raw, MAX_ARGUMENTS)),
        };
        // The provider's model went on without this call's result (contract §3.7).
        let marker = if call.provider_async { " (async)" } else { "" };
        out.push_str(&format!(
            "{:GUTTER$}call {} {}{marker} {arguments}\n",
            "", call.id, call.name
        ));
        let indent = GUTTER + 2;
        let key = (request, call.id.as_str());
        let run = self.runs.get(&key).copied();
        let result = self.results.get(&key).copied();
        let unfinished = self.unfinished.get(&key).map(|call| &call.run).or_else(|| {
            // A run without a result is unfinished even if the caller did not list it.
            run.filter(|run| result.is_none() && matches!(run.state, RunState::Admitted | RunState::Started))
        });

        let mut status = Vec::new();
        if let Some(run) = unfinished.filter(|_| call.provider_async) {
            // The model went on without it (contract §3.7.5): pending while its session runs, unfinished after a crash.
            status.push(format!(
                "PENDING (async: {}, no result yet; unfinished if its process is gone)",
                state_words(run.state)
            ));
        } else if let Some(run) = unfinished {
            status.push(format!("UNFINISHED ({}, no result)", state_words(run.state)));
        } else if let Some(run) = run {
            status.push(
                run.outcome
                    .map_or_else(|| run.state.as_str().to_owned(), |o| o.as_str().to_owned()),
            );
        } else {
            status.push("not executed (never admitted)".to_owned());
        }
        if let Some(run) = unfinished.or(run) {
            status.push(format!("admitted {}", self.at(run.admitted_at_us)));
            match (run.started_at_us, run.ended_at_us) {
                (Some(start), Some(end)) => status.push(format!(
                    "ran {} → {} ({} ms)",
                    self.at(start),
                    self.at(end),
                    format_us(end - start)
                )),
                (Some(start), None) => status.push(format!("started {}", self.at(start))),
                (None, _) if unfinished.is_none() => status.push("never started".to_owned()),
                (None, _) => {}
            }
        }
        out.push_str(&format!("{:indent$}{}\n", "", status.join(" · ")));
        if let Some(line) = self.figures.call_summary(request, &call.id) {
            out.push_str(&format!("{:indent$}{line}\n", ""));
        }

        if let Some((stored, result)) = result {
            let mut head = format!("result #{} {}", stored.seq, self.at(stored.at_us));
            if call.provider_async {
                match self.answers.delivered_in(stored.seq, result.ready_during) {
                    Some(carried) => head.push_str(&format!(" (delivered in request {carried})")),
                    None => head.push_str(" (not delivered yet)"),
                }
            }
            if result.is_error {
                head.push_str(" ERROR");
            }
            if result.terminate {
                head.push_str(" (terminate)");
            }
            let text = result.text();
            let mut lines = text.lines();
            match (lines.next(), lines.next()) {
                (None, _) => out.push_str(&format!("{:indent$}{head}: (no text)\n", "")),
                (Some(first), None) => out.push_str(&format!("{:indent$}{head}: {}\n", "", cut(first, MAX_LINE))),
                (Some(_), Some(_)) => {
                    out.push_str(&format!("{:indent$}{head}:\n", ""));
                    push_result_text(out, indent + 2, result);
                }
            }
        }
    }
}

/// Whether a request's last fragment is its terminal one. A prefix fragment (contract §3.2) ends with the call that
/// triggered it, stops for `tool_use` and carries no usage; so a last fragment that is empty, ends with anything but
/// a call, stops otherwise or carries a usage is terminal, and so is any fragment followed by a later request.
/// Usage alone does not tell: some providers report none, and their terminal fragments carry zero.
fn stream_ended(last: &AssistantMessage, later_request: bool) -> bool {
    let ends_with_call = matches!(last.content.last(), Some(ContentBlock::ToolCall(_)));
    !ends_with_call || last.stop_reason.as_str() != "tool_use" || !last.usage.is_zero() || later_request
}

fn request_header(
    request: Option<u32>,
    group: &[(&StoredMessage, &AssistantMessage)],
    ended: bool,
    view: &View<'_>,
) -> String {
    let Some((last_stored, last)) = group.last() else {
        return String::new();
    };
    let turn = &last.turn_id;
    // The terminal fragment carries the response's usage; prefix fragments carry zero.
    let usage = group
        .iter()
        .rev()
        .map(|(_, fragment)| fragment.usage)
        .find(|usage| !usage.is_zero())
        .unwrap_or_default();
    let name = request.map_or_else(|| "request ?".to_owned(), |r| format!("request {r}"));
    let fragments = format!("{} fragment{}", group.len(), plural(group.len()));
    let mut header = if ended {
        format!(
            "  ── {name} · response {turn} · stop {} · usage {} · {fragments} · stream end {}\n",
            last.stop_reason,
            usage_words(&usage),
            view.at(last_stored.at_us)
        )
    } else {
        format!(
            "  ── {name} · response {turn} · {fragments} · ends with a call and no usage: a prefix whose stream was cut \
             off, or a terminal fragment without usage · last fragment {}\n",
            view.at(last_stored.at_us)
        )
    };
    if let Some(error) = &last.error_message {
        header.push_str(&format!("     error: {}\n", one_line(error, MAX_LINE)));
    }
    if let Some(round) = request.and_then(|request| view.figures.round_summary(request)) {
        header.push_str(&format!("     {round}\n"));
    }
    header
}

fn usage_words(usage: &Usage) -> String {
    let mut words = format!("{} in / {} out", usage.input, usage.output);
    if usage.cache_read > 0 || usage.cache_write > 0 {
        words.push_str(&format!(
            " / cache {} read, {} write",
            usage.cache_read, usage.cache_write
        ));
    }
    words.push_str(&format!(" (total {})", usage.total()));
    words
}

fn state_words(state: RunState) -> &'static str {
    match state {
        RunState::Admitted => "admitted, never started",
        RunState::Started => "started",
        RunState::Finished => "finished",
        RunState::Cancelled => "cancelled",
        RunState::Skipped => "skipped",
    }
}

fn format_us(us: i64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let ms = us as f64 / 1000.0;
    format_ms(ms)
}

fn plural(count: usize) -> &'static str {
    if count == 1 {
        ""
    } else {
        "s"
    }
}

/// At most `max` characters, ending in "…" when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The text on one line (newlines as spaces), cut to `max`.
fn one_line(text: &str, max: usize) -> String {
    let joined: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .collect();
    cut(&joined.join(" "), max)
}

/// Writes up to `max_lines` lines of `text` at `indent`, each cut to [`MAX_LINE`], then how much was left out.
fn push_text(out: &mut String, indent: usize, text: &str, max_lines: usize) {
    let lines: Vec<&str> = text.lines().collect();
    for line in lines.iter().take(max_lines) {
        out.push_str(&format!("{:indent$}{}\n", "", cut(line, MAX_LINE)));
    }
    if lines.len() > max_lines {
        let more = lines.len() - max_lines;
        out.push_str(&format!("{:indent$}… ({more} more line{})\n", "", plural(more)));
    }
}

fn push_result_text(out: &mut String, indent: usize, result: &ToolResultMessage) {
    push_text(out, indent, &result.text(), RESULT_LINES);
}

#[cfg(test)]
mod tests;
