//! The lanes: per request one model-stream lane (its stream, fragment commits and batching delay), then one lane per
//! tool call (admitted, started, ended, coloured by outcome, with where batching would have run it).

use std::fmt::Write as _;

use super::axis::Scale;
use super::marks;
use super::primitives::{escape, plural, text_width, truncate, Svg};
use super::style::{
    outcome_colour, text_on, BAR_H, FONT_SIZE, GHOST, GRID, GROUP_GAP, INK, MARGIN, MUTED, ROW_H, STRIPE, WIDTH,
};
use crate::format::format_ms;
use crate::savings::{RequestSavings, Savings};
use crate::timeline::{CallSpan, Delivery, RequestSpan, Timeline};

/// One lane of the chart.
pub(super) enum Row<'a> {
    Model(&'a RequestSpan, Option<RequestSavings>),
    Call(&'a CallSpan),
}

/// A lane and the y of its top.
pub(super) type Placed<'r, 'a> = (f64, &'r Row<'a>);

/// The lanes in display order: per request its model lane, then its calls; calls of unknown requests last.
pub(super) fn rows<'a>(timeline: &'a Timeline, savings: &Savings) -> Vec<Row<'a>> {
    let mut rows = Vec::new();
    for request in &timeline.requests {
        let request_savings = savings.requests.iter().find(|s| s.request == request.request).copied();
        rows.push(Row::Model(request, request_savings));
        for call in timeline.calls_of(request.request) {
            rows.push(Row::Call(call));
        }
    }
    for call in &timeline.calls {
        if !timeline.requests.iter().any(|request| request.request == call.request) {
            rows.push(Row::Call(call));
        }
    }
    rows
}

/// The width of the label column: room for the longest lane label, within bounds.
pub(super) fn label_width(rows: &[Row<'_>]) -> f64 {
    let label_chars = rows
        .iter()
        .map(|row| match row {
            Row::Model(request, _) => format!("model · request {}", request.request).chars().count(),
            Row::Call(call) => call.id.chars().count() + 1 + call.name.chars().count(),
        })
        .chain(std::iter::once(28))
        .max()
        .unwrap_or(28)
        .min(44);
    #[allow(clippy::cast_precision_loss)]
    let label_width = (label_chars as f64 * FONT_SIZE * 0.6 + 24.0).clamp(200.0, 340.0);
    label_width
}

/// Stacks the lanes from `top` down, with a gap between request groups; returns them and the y below the last.
pub(super) fn place<'r, 'a>(rows: &'r [Row<'a>], top: f64) -> (Vec<Placed<'r, 'a>>, f64) {
    let mut y = top;
    let mut placed = Vec::new();
    let mut previous_request = None;
    for row in rows {
        let request = match row {
            Row::Model(request, _) => Some(request.request),
            Row::Call(..) => None,
        };
        if request.is_some() && previous_request.is_some() {
            y += GROUP_GAP;
        }
        if request.is_some() {
            previous_request = request;
        }
        placed.push((y, row));
        y += ROW_H;
    }
    (placed, y)
}

/// Lane stripes and the separators between request groups (drawn before the grid).
pub(super) fn draw_backgrounds(svg: &mut Svg, placed: &[Placed<'_, '_>]) {
    for (index, (top, row)) in placed.iter().enumerate() {
        if index % 2 == 1 {
            svg.box_path(
                MARGIN,
                *top,
                WIDTH - 2.0 * MARGIN,
                ROW_H,
                &format!(r#"fill="{STRIPE}""#),
            );
        }
        if index > 0 && matches!(row, Row::Model(..)) {
            let line_y = top - GROUP_GAP / 2.0;
            svg.line(
                MARGIN,
                line_y,
                WIDTH - MARGIN,
                line_y,
                &format!(r#"stroke="{GRID}" stroke-width="1""#),
            );
        }
    }
}

/// Stream-end lines, one per request group, under the lanes' marks.
pub(super) fn draw_stream_ends(svg: &mut Svg, scale: &Scale, placed: &[Placed<'_, '_>]) {
    for (index, (top, row)) in placed.iter().enumerate() {
        if let Row::Model(request, _) = row {
            let Some(end) = request.stream_end_ms else { continue };
            let group_bottom = placed[index + 1..]
                .iter()
                .take_while(|(_, row)| matches!(row, Row::Call(..)))
                .last()
                .map_or(top + ROW_H, |(top, _)| top + ROW_H);
            marks::stream_end(svg, scale.x(end), top + 2.0, group_bottom - 2.0);
        }
    }
}

/// The lanes' labels and marks.
pub(super) fn draw(svg: &mut Svg, scale: &Scale, placed: &[Placed<'_, '_>], timeline: &Timeline) {
    for (top, row) in placed {
        match row {
            Row::Model(request, request_savings) => model_lane(svg, scale, *top, request, *request_savings),
            Row::Call(call) => call_lane(svg, scale, *top, call, timeline),
        }
    }
}

/// Draws a lane's label in the label column.
fn lane_label(svg: &mut Svg, top: f64, strong: &str, rest: &str) {
    let max = 44usize;
    let strong = truncate(strong, max);
    let rest = truncate(rest, max.saturating_sub(strong.chars().count() + 1));
    svg.text(
        MARGIN + 8.0,
        top + ROW_H / 2.0 + 4.0,
        "",
        &format!(
            r#"<tspan font-weight="600">{}</tspan><tspan dx="6" fill="{MUTED}">{}</tspan>"#,
            escape(&strong),
            escape(&rest)
        ),
    );
}

fn model_lane(svg: &mut Svg, scale: &Scale, top: f64, request: &RequestSpan, savings: Option<RequestSavings>) {
    let mid = top + ROW_H / 2.0;
    let detail = match &request.stop_reason {
        Some(reason) => format!("request {} · {reason}", request.request),
        None => format!("request {}", request.request),
    };
    lane_label(svg, top, "model", &detail);
    let start = scale.x(request.start_ms);
    let Some(end_ms) = request.stream_end_ms else {
        svg.text(
            start + 6.0,
            mid + 4.0,
            &format!(r#"fill="{MUTED}" font-style="italic""#),
            "no response",
        );
        return;
    };
    let end = scale.x(end_ms).max(start + 2.0);
    let _ = writeln!(
        svg.out,
        r#"<g><title>{}</title>"#,
        escape(&format!(
            "request {}: {} → {} ms, {} fragment{}{}",
            request.request,
            format_ms(request.start_ms),
            format_ms(end_ms),
            request.fragments_ms.len(),
            plural(request.fragments_ms.len()),
            request
                .stop_reason
                .as_deref()
                .map(|reason| format!(", stop {reason}"))
                .unwrap_or_default()
        ))
    );
    marks::model_stream(svg, start, mid - 5.0, end - start, 10.0);
    for &fragment in &request.fragments_ms {
        marks::fragment_commit(svg, scale.x(fragment), mid - 8.0, mid + 8.0);
    }
    svg.raw("</g>");

    if let Some(savings) = savings.filter(|savings| savings.saved_ms() > 0.0) {
        // The request's own batching delay: from when it settled to when batching would have settled it.
        let from = scale.x(savings.actual_settle_ms);
        let to = scale.x(savings.batching_settle_ms);
        let attrs = format!(r#"stroke="{GHOST}" stroke-width="1.5""#);
        svg.line(from, mid, to, mid, &format!(r#"{attrs} stroke-dasharray="4 3""#));
        svg.line(to, mid - 5.0, to, mid + 5.0, &attrs);
        let label = format!("batching: +{} ms", format_ms(savings.saved_ms()));
        end_label(svg, (from, to.max(end)), mid, &label, MUTED);
    }
}

/// Writes a lane's note right of `right`; when it would not fit there, left of `left` (the lane's first mark);
/// failing both, right-aligned to the margin.
fn end_label(svg: &mut Svg, (left, right): (f64, f64), mid: f64, label: &str, colour: &str) {
    let width = text_width(label, 11.0);
    let attrs = format!(r#"font-size="11" fill="{colour}""#);
    if right + 8.0 + width <= WIDTH - MARGIN {
        svg.text(right + 8.0, mid + 4.0, &attrs, &escape(label));
    } else if left - 8.0 - width >= MARGIN + 8.0 {
        svg.text(
            left - 8.0,
            mid + 4.0,
            &format!(r#"{attrs} text-anchor="end""#),
            &escape(label),
        );
    } else {
        svg.text(WIDTH - MARGIN - width, mid + 4.0, &attrs, &escape(label));
    }
}

fn call_lane(svg: &mut Svg, scale: &Scale, top: f64, call: &CallSpan, timeline: &Timeline) {
    let mid = top + ROW_H / 2.0;
    let name = match call.provider_async {
        None => call.name.clone(),
        Some(Delivery::In(request)) => format!("{} · async → request {request}", call.name),
        Some(Delivery::Pending) => format!("{} · async, pending", call.name),
    };
    lane_label(svg, top, &call.id, &name);
    let outcome = call.outcome.as_deref();
    let colour = outcome_colour(outcome);
    let admitted = scale.x(call.admitted_ms);
    let bar_top = mid - BAR_H / 2.0;
    let mut right = admitted + 4.0;

    // Where end-of-stream batching would have run an early call.
    let mut ghost_start = None;
    if let Some((from_ms, to_ms)) = timeline.batching_run(call) {
        let from = scale.x(from_ms);
        let to = scale.x(to_ms).max(from + 2.0);
        marks::batching_ghost(svg, from, bar_top, to - from, BAR_H);
        right = right.max(to);
        ghost_start = Some(from);
    }

    let label;
    let mut inside = None;
    let own_end;
    if let Some(start_ms) = call.started_ms {
        let start = scale.x(start_ms);
        if start > admitted + 1.0 {
            svg.line(
                admitted,
                mid,
                start,
                mid,
                &format!(r#"stroke="{MUTED}" stroke-width="1" stroke-dasharray="2 2""#),
            );
        }
        let (end_ms, unfinished) = match call.ended_ms {
            Some(end) => (end, false),
            None => (timeline.last_ms(), true),
        };
        let end = scale.x(end_ms).max(start + 2.0);
        let tooltip = format!(
            "{} {}: admitted {} ms, ran {} → {} ms ({} ms), {}",
            call.id,
            call.name,
            format_ms(call.admitted_ms),
            format_ms(start_ms),
            if unfinished {
                "…".to_owned()
            } else {
                format_ms(end_ms)
            },
            format_ms(end_ms - start_ms),
            outcome.unwrap_or("unfinished")
        );
        let style = if unfinished {
            marks::unfinished_style(colour)
        } else {
            format!(r#"fill="{colour}""#)
        };
        let _ = writeln!(
            svg.out,
            r#"<rect class="call" data-call-id="{}" data-outcome="{}" x="{start:.1}" y="{bar_top:.1}" width="{:.1}" height="{BAR_H:.1}" rx="2.5" {style}><title>{}</title></rect>"#,
            escape(&call.id),
            escape(outcome.unwrap_or("unfinished")),
            end - start,
            escape(&tooltip)
        );
        own_end = end;
        right = right.max(end);
        inside = Some((start, end, text_on(outcome)));
        let duration = format!("{} ms", format_ms(end_ms - start_ms));
        label = match outcome {
            Some("finished") => duration,
            Some(outcome) => format!("{duration} · {outcome}"),
            None => "unfinished (started, no result)".to_owned(),
        };
    } else {
        // Never executed: a cross where its result was written (or where it was admitted).
        let at = scale.x(call.ended_ms.unwrap_or(call.admitted_ms));
        if at > admitted + 1.0 {
            svg.line(
                admitted,
                mid,
                at,
                mid,
                &format!(r#"stroke="{MUTED}" stroke-width="1" stroke-dasharray="2 2""#),
            );
        }
        let _ = writeln!(
            svg.out,
            r#"<path d="M{:.1} {:.1}l8 8m0 -8l-8 8" stroke="{colour}" stroke-width="2.5" stroke-linecap="round"><title>{}</title></path>"#,
            at - 4.0,
            mid - 4.0,
            escape(&format!(
                "{} {}: admitted {} ms, never started, {}",
                call.id,
                call.name,
                format_ms(call.admitted_ms),
                outcome.unwrap_or("unfinished")
            ))
        );
        own_end = at + 4.0;
        right = right.max(own_end);
        label = match outcome {
            Some(outcome) => format!("{outcome} · not run"),
            None => "unfinished (admitted, never started)".to_owned(),
        };
    }

    // The admitted marker, pointing at the bar.
    marks::admitted(svg, admitted, bar_top - 1.0);

    match inside {
        Some((start, end, text_colour)) if end - start >= text_width(&label, 11.0) + 12.0 => svg.text(
            start + 6.0,
            mid + 4.0,
            &format!(r#"font-size="11" font-weight="600" fill="{text_colour}""#),
            &escape(&label),
        ),
        // Right of the call's own mark when that leaves the batching ghost clear, else right of everything.
        _ => match ghost_start {
            Some(ghost) if own_end + 8.0 + text_width(&label, 11.0) + 8.0 <= ghost => {
                end_label(svg, (admitted - 5.0, own_end), mid, &label, INK);
            }
            _ => end_label(svg, (admitted - 5.0, right), mid, &label, INK),
        },
    }
}
