//! `/sessions/{id}`: the transcript beside the timeline, both replaced by the live events while the session runs.

use headstart_timeline::svg;
use headstart_timeline::visible::{visible, Lines};
use maud::{html, Markup, PreEscaped};

use super::layout::page;
use super::transcript::transcript;
use crate::data::SessionData;
use crate::restate::Turns;

/// The session page; with `restate`, the session's turns as a Restate server sees them under its header.
pub fn session_page(data: &SessionData, restate: Option<&Turns>) -> Markup {
    let id = &data.info.id.0;
    let parts = Parts::of(data);
    page(
        &format!("session {id}"),
        true,
        html! {
            div #session data-events=(format!("/sessions/{}/events", encode(id))) {
                header {
                    h1 { "session " span.id { (id) } }
                    p #status { (parts.status) }
                    p.links {
                        a href=(format!("/api/sessions/{}", encode(id))) { "JSON" }
                        " · " span #live { "not live" }
                    }
                    @if let Some(turns) = restate {
                        (restate_turns(turns))
                    }
                }
                div.columns {
                    section #transcript { (parts.transcript) }
                    section #timeline { (parts.timeline) }
                }
            }
        },
    )
}

/// The parts of the page a live update replaces.
pub struct Parts {
    /// The state line.
    pub status: Markup,
    /// The transcript.
    pub transcript: Markup,
    /// The timeline SVG (the renderer escapes every text it draws).
    pub timeline: Markup,
}

impl Parts {
    /// The parts for `data`.
    pub fn of(data: &SessionData) -> Parts {
        Parts {
            status: status(data),
            transcript: transcript(data),
            timeline: html! { (PreEscaped(svg::render(&data.timeline()))) },
        }
    }
}

fn status(data: &SessionData) -> Markup {
    let info = &data.info;
    html! {
        span.state data-state=(info.state.as_str()) { (visible(&data.state_words(), Lines::Escape)) }
        " · " (info.messages) " messages"
        @if let Some(model) = &info.settings.model {
            " · model " (visible(model, Lines::Escape))
        }
        @if let Some(system) = &info.settings.system {
            details.system data-key="system" {
                summary { "system prompt" }
                pre { (visible(system, Lines::Keep)) }
            }
        }
    }
}

/// The session's turns on Restate: one row each, oldest first, or why they could not be read.
fn restate_turns(turns: &Turns) -> Markup {
    html! {
        section #restate {
            h2 { "Restate turns" }
            @match turns {
                Err(error) => p.error { "Restate could not be asked: " (visible(error, Lines::Escape)) },
                Ok(turns) if turns.is_empty() => p { "none kept by the server" },
                Ok(turns) => table {
                    thead { tr { th { "invocation" } th { "status" } th { "retries" } th { "submitted" } th { "last failure" } } }
                    tbody {
                        @for turn in turns {
                            tr {
                                td.id { (visible(&turn.invocation, Lines::Escape)) }
                                td data-status=(turn.status) { (visible(&turn.status, Lines::Escape)) }
                                td { (turn.retries) }
                                td { (visible(turn.created_at.as_deref().unwrap_or(""), Lines::Escape)) }
                                td { (visible(turn.last_failure.as_deref().unwrap_or(""), Lines::Escape)) }
                            }
                            @for call in &turn.failing_calls {
                                tr.failing-call {
                                    td.id { "waits on Tools/run_call " (visible(&call.invocation, Lines::Escape)) }
                                    td data-status=(call.status) { (visible(&call.status, Lines::Escape)) }
                                    td { (call.retries) }
                                    td {}
                                    td { (visible(call.last_failure.as_deref().unwrap_or(""), Lines::Escape)) }
                                }
                            }
                        }
                    }
                },
            }
        }
    }
}

/// A session id as one URL path segment (ids the store makes are UUIDs; others may hold anything).
pub fn encode(id: &str) -> String {
    form_urlencoded::byte_serialize(id.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}
