//! `/`: the sessions, newest first, a page at a time, filtered by state.

use headstart::store::SessionState;
use headstart_timeline::format_ms;
use headstart_timeline::visible::{visible, Lines};
use maud::{html, Markup};

use super::layout::page;
use super::session::encode;
use crate::params::ListParams;
use crate::summary::Summary;
use crate::time::clock;

/// The states the filter offers.
const STATES: [Option<SessionState>; 6] = [
    None,
    Some(SessionState::Unqueued),
    Some(SessionState::Pending),
    Some(SessionState::Running),
    Some(SessionState::Completed),
    Some(SessionState::Failed),
];

/// The listing page: `rows` are page `params.page` of `total` matching sessions.
pub fn listing_page(params: ListParams, rows: &[Summary], total: u64) -> Markup {
    let pages = ListParams::pages(total);
    let link = |page: u64| {
        let mut href = format!("/?page={page}");
        if let Some(state) = params.state {
            href.push_str(&format!("&state={}", state.as_str()));
        }
        href
    };
    page(
        "sessions",
        false,
        html! {
            h1 { "Sessions" }
            p.filter {
                "State: "
                @for state in STATES {
                    @let name = state.map_or("all", SessionState::as_str);
                    @if state == params.state {
                        strong { (name) }
                    } @else {
                        a href=(format!("/?state={name}")) { (name) }
                    }
                    " "
                }
            }
            @if rows.is_empty() {
                p.empty { "No sessions." }
            } @else {
                table.sessions {
                    thead {
                        tr {
                            th { "session" } th { "state" } th { "prompt" } th { "requests" }
                            th title="early / after the stream / failed / interrupted" { "calls (early · after · failed · interrupted)" }
                            th { "saved" } th { "last activity" }
                        }
                    }
                    tbody {
                        @for row in rows {
                            tr.session data-session-id=(row.session) data-state=(row.state) {
                                td.id { a href=(format!("/sessions/{}", encode(&row.session))) { (row.session) } }
                                td.state { (visible(&row.state_words, Lines::Escape)) }
                                td.prompt { (visible(&cut(&row.prompt, 120), Lines::Escape)) }
                                td.number { (row.requests) }
                                td.calls {
                                    span.early title="early" { (row.early) } " · "
                                    span.after title="after the stream" { (row.after_stream) } " · "
                                    span.failed[row.failed > 0] title="failed" { (row.failed) } " · "
                                    span.interrupted[row.interrupted > 0] title="interrupted" { (row.interrupted) }
                                    @if row.unfinished > 0 {
                                        " · " span.unfinished title="admitted, no result yet" { (row.unfinished) " unfinished" }
                                    }
                                }
                                td.number { (format_ms(row.saved_ms)) " ms" }
                                td.at { (clock(row.last_activity_us)) }
                            }
                        }
                    }
                }
            }
            p.pages {
                @if params.page > 1 {
                    a rel="prev" href=(link(params.page - 1)) { "← newer" } " "
                }
                "page " (params.page) " of " (pages) " (" (total) (if total == 1 { " session)" } else { " sessions)" })
                @if params.page < pages {
                    " " a rel="next" href=(link(params.page + 1)) { "older →" }
                }
            }
        },
    )
}

/// At most `max` characters, ending in "…" when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max - 1).collect();
    out.push('…');
    out
}
