//! `headstart inspect --stats`: every session's figures (`Timeline::figures`) grouped by the model that produced
//! each response, and summarized per group (`FigureStats`). The store does not record the provider, so the groups
//! are by model alone.

use std::collections::BTreeMap;

use headstart::store::{StoredMessage, ToolRun};
use headstart_timeline::response_models;
use headstart_timeline::{format_ms, CallFigures, FigureStats, ResponseFigures, Spread, Timeline};
use serde_json::{json, Value};

/// What the header says the groups are.
const GROUPED_BY: &str = "model (the provider is not stored)";

/// The name of the group of responses whose fragments name no model.
const UNKNOWN_MODEL: &str = "(unknown)";

/// The figures collected so far, per model.
#[derive(Debug, Default)]
pub struct Groups {
    groups: BTreeMap<String, (Vec<ResponseFigures>, Vec<CallFigures>)>,
}

impl Groups {
    /// Adds one session's responses and calls, each to the group of its response's model.
    pub fn add(&mut self, log: &[StoredMessage], runs: &[ToolRun]) {
        let models = response_models(log);
        let model_of = |request: u32| models.get(&request).map_or(UNKNOWN_MODEL, String::as_str).to_owned();
        let figures = Timeline::from_store("", log, runs).figures();
        for response in figures.responses {
            self.groups
                .entry(model_of(response.request))
                .or_default()
                .0
                .push(response);
        }
        for call in figures.calls {
            self.groups.entry(model_of(call.request)).or_default().1.push(call);
        }
    }

    fn stats(&self) -> impl Iterator<Item = (&str, FigureStats)> {
        self.groups
            .iter()
            .map(|(model, (responses, calls))| (model.as_str(), FigureStats::of(responses, calls)))
    }

    /// `{"grouped_by": …, "groups": [{"model", "responses", "calls", "tool_round_ms", "batching_round_ms",
    /// "overlap_ms", "headroom_ms"}]}`, each figure `{"count", "median", "p95"}` (ms, null without samples).
    pub fn to_json(&self) -> Value {
        let spread = |spread: Spread| json!({"count": spread.count, "median": spread.median_ms, "p95": spread.p95_ms});
        let groups: Vec<Value> = self
            .stats()
            .map(|(model, stats)| {
                json!({
                    "model": model,
                    "responses": stats.responses,
                    "calls": stats.calls,
                    "tool_round_ms": spread(stats.tool_round),
                    "batching_round_ms": spread(stats.batching_round),
                    "overlap_ms": spread(stats.overlap),
                    "headroom_ms": spread(stats.headroom),
                })
            })
            .collect();
        json!({ "grouped_by": GROUPED_BY, "groups": groups })
    }

    /// The same as text: a header, then one block per model.
    pub fn to_text(&self) -> String {
        let spread = |spread: Spread| match (spread.median_ms, spread.p95_ms) {
            (Some(median), Some(p95)) => {
                format!(
                    "median {} ms, p95 {} ms ({} samples)",
                    format_ms(median),
                    format_ms(p95),
                    spread.count
                )
            }
            _ => "none".to_owned(),
        };
        let mut out = format!("figures per {GROUPED_BY}\n");
        for (model, stats) in self.stats() {
            out.push_str(&format!(
                "\n{model}: {} responses, {} calls\n",
                stats.responses, stats.calls
            ));
            let lines = [
                ("tool round", stats.tool_round),
                ("end-of-stream batching's round", stats.batching_round),
                ("overlap", stats.overlap),
                ("headroom", stats.headroom),
            ];
            for (label, figure) in lines {
                out.push_str(&format!("  {:<32}{}\n", format!("{label}:"), spread(figure)));
            }
        }
        out
    }
}
