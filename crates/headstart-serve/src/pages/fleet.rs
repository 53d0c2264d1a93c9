//! `/fleet`: the workers of a queue store, what each holds and until when, and the takeovers.

use std::time::{SystemTime, UNIX_EPOCH};

use headstart_timeline::visible::{visible, Lines};
use maud::{html, Markup};

use super::layout::page;
use super::session::encode;
use crate::fleet::Fleet;

/// The fleet page.
pub fn fleet_page(fleet: &Fleet) -> Markup {
    let now_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| i64::try_from(since.as_micros()).unwrap_or(i64::MAX));
    page(
        "fleet",
        false,
        html! {
            h1 { "Fleet" }
            @if !fleet.queue {
                p.empty { "This store has no queued sessions: no fleet has used it (see headstart submit and headstart worker)." }
            } @else {
                p { (fleet.pending) " pending · " (fleet.workers.len()) " workers seen · " (fleet.takeovers.len()) " sessions taken over" }
                @if !fleet.queues.is_empty() {
                    table.queues {
                        thead { tr { th { "queue" } th { "pending" } th { "of which retrying (provider outage)" } th { "running" } } }
                        tbody {
                            @for queue in &fleet.queues {
                                tr.queue data-queue=(queue.name) {
                                    td { (visible(&queue.name, Lines::Escape)) }
                                    td.number { (queue.pending) }
                                    td.number { (queue.retrying) }
                                    td.number { (queue.running) }
                                }
                            }
                        }
                    }
                }
                table.workers {
                    thead { tr { th { "worker" } th { "holds (epoch, lease)" } th { "completed" } th { "failed" } } }
                    tbody {
                        @for worker in &fleet.workers {
                            tr.worker data-worker=(worker.name) {
                                td { (visible(&worker.name, Lines::Escape)) }
                                td {
                                    @if worker.running.is_empty() { "—" }
                                    @for held in &worker.running {
                                        div {
                                            a href=(format!("/sessions/{}", encode(&held.session))) { (held.session) }
                                            " (epoch " (held.epoch) ", " (lease(held.lease_expires_at_us, now_us)) ")"
                                        }
                                    }
                                }
                                td.number { (worker.completed) }
                                td.number { (worker.failed) }
                            }
                        }
                    }
                }
                @if !fleet.takeovers.is_empty() {
                    h2 { "Takeovers" }
                    table.takeovers {
                        thead { tr { th { "session" } th { "claims" } th { "worker" } th { "state" } } }
                        tbody {
                            @for takeover in &fleet.takeovers {
                                tr {
                                    td { a href=(format!("/sessions/{}", encode(&takeover.session))) { (takeover.session) } }
                                    td.number { (takeover.epoch) }
                                    td { (visible(takeover.owner.as_deref().unwrap_or("—"), Lines::Escape)) }
                                    td { (takeover.state) }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// A lease's end relative to now: `lease ends in 12 s`, `lease expired 3 s ago`.
fn lease(expires_at_us: Option<i64>, now_us: i64) -> String {
    match expires_at_us {
        None => "no lease".to_owned(),
        Some(at) if at >= now_us => format!("lease ends in {} s", (at - now_us) / 1_000_000),
        Some(at) => format!("lease expired {} s ago", (now_us - at) / 1_000_000),
    }
}
