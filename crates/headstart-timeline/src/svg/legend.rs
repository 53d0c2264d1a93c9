//! The legend: what each mark means and the colour of each outcome.

use super::marks;
use super::primitives::{escape, text_width, Svg};
use super::style::{outcome_colour, MARGIN, MUTED, OUTCOMES, WIDTH};
use crate::timeline::Timeline;

/// A legend entry.
pub(super) enum Swatch {
    Outcome(String),
    Model,
    Fragment,
    Admitted,
    Ghost,
    StreamEnd,
    Unfinished,
}

pub(super) struct LegendItem {
    swatch: Swatch,
    label: String,
}

/// The legend's entries: the marks, every outcome, then outcomes and states only this timeline has.
pub(super) fn items(timeline: &Timeline) -> Vec<LegendItem> {
    let mut items = vec![
        LegendItem {
            swatch: Swatch::Model,
            label: "model stream".to_owned(),
        },
        LegendItem {
            swatch: Swatch::Fragment,
            label: "fragment commit".to_owned(),
        },
        LegendItem {
            swatch: Swatch::StreamEnd,
            label: "stream end".to_owned(),
        },
        LegendItem {
            swatch: Swatch::Admitted,
            label: "call admitted".to_owned(),
        },
        LegendItem {
            swatch: Swatch::Ghost,
            label: "where end-of-stream batching would run it".to_owned(),
        },
    ];
    items.extend(OUTCOMES.iter().map(|outcome| LegendItem {
        swatch: Swatch::Outcome((*outcome).to_owned()),
        label: (*outcome).to_owned(),
    }));
    let mut extra: Vec<&str> = Vec::new();
    for outcome in timeline.calls.iter().filter_map(|call| call.outcome.as_deref()) {
        if !OUTCOMES.contains(&outcome) && !extra.contains(&outcome) {
            extra.push(outcome);
        }
    }
    for outcome in extra {
        items.push(LegendItem {
            swatch: Swatch::Outcome(outcome.to_owned()),
            label: outcome.to_owned(),
        });
    }
    if timeline.calls.iter().any(|call| call.outcome.is_none()) {
        items.push(LegendItem {
            swatch: Swatch::Unfinished,
            label: "unfinished".to_owned(),
        });
    }
    items
}

const SWATCH_W: f64 = 16.0;
const LEGEND_ROW: f64 = 20.0;

/// Positions of the legend items (relative to the legend's top) and the legend's height.
pub(super) fn layout(items: &[LegendItem], top: f64) -> (Vec<(f64, f64)>, f64) {
    let mut positions = Vec::with_capacity(items.len());
    let start_x = MARGIN + 8.0;
    let max_x = WIDTH - MARGIN;
    // Markers on the first rows, outcomes after them.
    let mut x = start_x + 60.0;
    let mut y = top;
    let mut was_outcome = false;
    for item in items {
        let is_outcome = matches!(item.swatch, Swatch::Outcome(_) | Swatch::Unfinished);
        let width = SWATCH_W + 6.0 + text_width(&item.label, 11.0) + 18.0;
        if (is_outcome && !was_outcome) || x + width > max_x {
            x = start_x + 60.0;
            y += LEGEND_ROW;
        }
        was_outcome = is_outcome;
        positions.push((x, y));
        x += width;
    }
    (positions, y - top + LEGEND_ROW)
}

/// Draws the legend with its top at `top`.
pub(super) fn draw(svg: &mut Svg, items: &[LegendItem], top: f64) {
    let (positions, _) = layout(items, top);
    let first_outcome_row = items
        .iter()
        .zip(&positions)
        .find(|(item, _)| matches!(item.swatch, Swatch::Outcome(_)))
        .map(|(_, (_, y))| *y);
    svg.text(
        MARGIN + 8.0,
        top + 4.0,
        &format!(r#"font-size="11" font-weight="600" fill="{MUTED}""#),
        "marks",
    );
    if let Some(y) = first_outcome_row {
        svg.text(
            MARGIN + 8.0,
            y + 4.0,
            &format!(r#"font-size="11" font-weight="600" fill="{MUTED}""#),
            "outcome",
        );
    }
    for (item, (x, y)) in items.iter().zip(positions) {
        let mid = y;
        match &item.swatch {
            Swatch::Outcome(outcome) => {
                let colour = outcome_colour(Some(outcome));
                svg.box_path(x, mid - 5.0, SWATCH_W, 10.0, &format!(r#"fill="{colour}""#));
            }
            Swatch::Unfinished => svg.box_path(
                x,
                mid - 5.0,
                SWATCH_W,
                10.0,
                &marks::unfinished_style(outcome_colour(None)),
            ),
            Swatch::Model => marks::model_stream(svg, x, mid - 4.0, SWATCH_W, 8.0),
            Swatch::Fragment => marks::fragment_commit(svg, x + SWATCH_W / 2.0, mid - 7.0, mid + 7.0),
            Swatch::StreamEnd => marks::stream_end(svg, x + SWATCH_W / 2.0, mid - 8.0, mid + 8.0),
            Swatch::Admitted => marks::admitted(svg, x + SWATCH_W / 2.0, mid + 3.0),
            Swatch::Ghost => marks::batching_ghost(svg, x, mid - 5.0, SWATCH_W, 10.0),
        }
        svg.text(x + SWATCH_W + 6.0, mid + 4.0, r#"font-size="11""#, &escape(&item.label));
    }
}
