//! A session's transcript as HTML: each message in write order, thinking collapsed, each call with its arguments,
//! its run and its result under it, errors marked. Rendered for the page and again for each live update.
//!
//! Everything shown came from the model, tools or a provider: maud escapes it for HTML, and [`visible`] shows
//! control characters and bidirectional overrides as escapes. Very long texts are cut for the page (the JSON API
//! has them whole).

use std::collections::{HashMap, HashSet};

use headstart::core::model::{ContentBlock, ToolArguments, ToolCall, ToolResultMessage};
use headstart::store::{RunOutcome, StoredMessage, ToolRun};
use headstart::Message;
use headstart_timeline::answers::{Answers, CallKey};
use headstart_timeline::visible::{visible, Lines};
use headstart_timeline::{Figures, Timeline};
use maud::{html, Markup};

use crate::data::SessionData;
use crate::time::offset;

/// Longest text shown in one block (characters).
const MAX_SHOWN: usize = 20_000;

/// The transcript of `data`.
pub fn transcript(data: &SessionData) -> Markup {
    let calls = Calls::new(data);
    let origin = data.log.first().map_or(data.info.created_at_us, |stored| stored.at_us);
    html! {
        @if data.log.is_empty() {
            p.empty { "No messages yet." }
        }
        ol.transcript {
            @for stored in &data.log {
                @match &stored.message {
                    Message::User(user) => {
                        li.message.user data-seq=(stored.seq) {
                            div.head { span.seq { "#" (stored.seq) } " user " span.at { (offset(stored.at_us, origin)) } }
                            (text_block("text", &user.text))
                        }
                    }
                    Message::Assistant(assistant) => {
                        li.message.assistant data-seq=(stored.seq) {
                            div.head {
                                span.seq { "#" (stored.seq) }
                                " assistant · request " (stored.request.map_or("?".to_owned(), |r| r.to_string()))
                                " · stop " (assistant.stop_reason.as_str()) " "
                                span.at { (offset(stored.at_us, origin)) }
                            }
                            @if let Some(error) = &assistant.error_message {
                                div.error { "error: " (visible(error, Lines::Keep)) }
                            }
                            @if let Some(round) = calls.round_after(stored) {
                                div.round { (round) }
                            }
                            @for (index, block) in assistant.content.iter().enumerate() {
                                @match block {
                                    ContentBlock::Text { text } => (text_block("text", text)),
                                    ContentBlock::Thinking { thinking, .. } => {
                                        details.thinking data-key=(format!("thinking-{}-{index}", stored.seq)) {
                                            summary { "thinking (" (thinking.chars().count()) " characters)" }
                                            (text_block("text", thinking))
                                        }
                                    }
                                    ContentBlock::ToolCall(call) => {
                                        ul.calls { (calls.call(stored.request, call, origin)) }
                                    }
                                }
                            }
                        }
                    }
                    Message::ToolResult(result) => {
                        @if !calls.answers_a_call_in_the_log(stored.seq) {
                            li.message.orphan data-seq=(stored.seq) {
                                div.head {
                                    span.seq { "#" (stored.seq) }
                                    " result for " (visible(&result.tool_call_id, Lines::Escape))
                                    " (call not in the log) "
                                    span.at { (offset(stored.at_us, origin)) }
                                }
                                (result_block(result))
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Text in a `<pre>`, made visible and cut to [`MAX_SHOWN`].
fn text_block(class: &str, text: &str) -> Markup {
    let shown = visible(text, Lines::Keep);
    let total = shown.chars().count();
    html! {
        @if total > MAX_SHOWN {
            pre class=(class) { (shown.chars().take(MAX_SHOWN).collect::<String>()) }
            p.cut { "… " (total - MAX_SHOWN) " more characters (the JSON API has the whole text)" }
        } @else {
            pre class=(class) { (shown) }
        }
    }
}

/// A result's text, marked when it is an error.
fn result_block(result: &ToolResultMessage) -> Markup {
    html! {
        div.result.error[result.is_error] data-call-id=(result.tool_call_id) {
            div.label {
                @if result.is_error { "error result" } @else { "result" }
                @if result.terminate { " (terminate)" }
            }
            (text_block("text", &result.text()))
        }
    }
}

/// The runs and results of a session's calls, by call.
struct Calls<'a> {
    runs: HashMap<CallKey<'a>, &'a ToolRun>,
    results: HashMap<CallKey<'a>, &'a ToolResultMessage>,
    unfinished: HashSet<CallKey<'a>>,
    /// Which result answers which call.
    answers: Answers<'a>,
    /// Each call's headroom and overlap, each response's tool round (issue 29).
    figures: Figures,
    /// Each request's last fragment in the log.
    last_fragment: HashMap<u32, u64>,
}

impl<'a> Calls<'a> {
    fn new(data: &'a SessionData) -> Calls<'a> {
        let answers = Answers::of(&data.log);
        Calls {
            runs: data
                .runs
                .iter()
                .map(|run| ((Some(run.request), run.call_id.as_str()), run))
                .collect(),
            results: answers
                .results
                .iter()
                .map(|(&call, &(_, result))| (call, result))
                .collect(),
            unfinished: data
                .unfinished
                .iter()
                .map(|call| (Some(call.run.request), call.run.call_id.as_str()))
                .collect(),
            answers,
            figures: Timeline::from_store("", &data.log, &data.runs).figures(),
            last_fragment: data
                .log
                .iter()
                .filter(|stored| matches!(stored.message, Message::Assistant(_)))
                .filter_map(|stored| Some((stored.request?, stored.seq)))
                .collect(),
        }
    }

    /// The response's tool round in a line, on its request's last fragment, for a response with calls.
    fn round_after(&self, stored: &StoredMessage) -> Option<String> {
        let request = stored.request?;
        if self.last_fragment.get(&request) != Some(&stored.seq) {
            return None;
        }
        self.figures.round_summary(request)
    }

    fn answers_a_call_in_the_log(&self, seq: u64) -> bool {
        self.answers.answers_a_call_in_the_log(seq)
    }

    /// One call: name, id, arguments, its run's state and times, its result.
    fn call(&self, request: Option<u32>, call: &ToolCall, origin: i64) -> Markup {
        let key = (request, call.id.as_str());
        let run = self.runs.get(&key).copied();
        let result = self.results.get(&key).copied();
        let state = match run {
            None => "not-executed",
            Some(run) => run.outcome.map_or(run.state.as_str(), RunOutcome::as_str),
        };
        let failed = result.is_some_and(|result| result.is_error)
            || run.is_some_and(|run| {
                run.outcome
                    .is_some_and(|outcome| !matches!(outcome, RunOutcome::Finished | RunOutcome::Cancelled))
            });
        let arguments = match &call.arguments {
            ToolArguments::Valid(map) => serde_json::to_string_pretty(map).unwrap_or_default(),
            ToolArguments::Invalid { raw, .. } => format!("(invalid arguments) {raw}"),
        };
        // A provider-async call's result reaches the model in the first request after it (contract §3.7.5).
        let delivery = call.provider_async.then(|| match self.answers.results.get(&key) {
            Some((stored, result)) => match self.answers.delivered_in(stored.seq, result.ready_during) {
                Some(carried) => format!("result delivered in request {carried}"),
                None => "result not delivered yet".to_owned(),
            },
            None => "pending: the model went on, no result yet".to_owned(),
        });
        html! {
            li.call.failed[failed] data-call-id=(call.id) data-state=(state) {
                div.head {
                    span.name { (visible(&call.name, Lines::Escape)) }
                    " " span.id { (visible(&call.id, Lines::Escape)) }
                    " " span.state { (state.replace('-', " ")) }
                    @if call.provider_async { " " span.flag title="the model went on without its result" { "ASYNC" } }
                    @if self.unfinished.contains(&key) { " " span.flag { "UNFINISHED" } }
                }
                details.arguments data-key=(format!("arguments-{}-{}", request.map_or(-1, i64::from), call.id)) {
                    summary { "arguments" }
                    (text_block("text", &arguments))
                }
                @if let Some(run) = run {
                    div.times {
                        "admitted " (offset(run.admitted_at_us, origin))
                        @if let Some(start) = run.started_at_us {
                            " · started " (offset(start, origin))
                        }
                        @if let (Some(start), Some(end)) = (run.started_at_us, run.ended_at_us) {
                            " · ended " (offset(end, origin)) " (" (offset(end, start).trim_start_matches('+')) ")"
                        }
                    }
                }
                @if let Some(figures) = self.figures.call_summary(request, &call.id) {
                    div.figures { (figures) }
                }
                @if let Some(delivery) = delivery {
                    div.delivery { (delivery) }
                }
                @if let Some(result) = result {
                    (result_block(result))
                }
            }
        }
    }
}
