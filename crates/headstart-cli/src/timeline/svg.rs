//! Renders a [`Timeline`] as a self-contained SVG Gantt chart, by plain string building.
//!
//! Layout, top to bottom: a title and a one-line summary; the lanes (per request: one model-stream lane, then one
//! lane per tool call) over a time axis in ms; the comparison with end-of-stream batching; a legend.
//!
//! `<rect>` elements are used for executed tool calls only (one per call that started), so the picture can be
//! checked mechanically; every other shape is a `<path>`, `<line>` or `<circle>`.

use std::fmt::Write as _;

use super::data::{format_ms, CallSpan, RequestSavings, RequestSpan, Savings, Timeline};

/// Total width of the picture in px.
const WIDTH: f64 = 1000.0;
/// Outer margin in px.
const MARGIN: f64 = 20.0;
/// Space right of the plot for end labels.
const RIGHT_GUTTER: f64 = 150.0;
/// Height of one lane.
const ROW_H: f64 = 28.0;
/// Vertical space between request groups.
const GROUP_GAP: f64 = 10.0;
/// Height of a call bar.
const BAR_H: f64 = 14.0;
/// Base font size.
const FONT_SIZE: f64 = 12.0;
/// Sans-serif font stack.
const FONT: &str = "'Segoe UI', 'Helvetica Neue', Helvetica, Arial, 'DejaVu Sans', sans-serif";

const INK: &str = "#1f2937";
const MUTED: &str = "#6b7280";
const GRID: &str = "#e8ebef";
const STRIPE: &str = "#f7f8fa";
const MODEL_FILL: &str = "#dbe6fb";
const MODEL_STROKE: &str = "#5b7fd6";
const TICK: &str = "#1e3a8a";
const GHOST: &str = "#9ca3af";
const ACTUAL: &str = "#2563eb";
const SAVED: &str = "#16a34a";

/// The outcomes every legend lists, in order, with their colours.
const OUTCOMES: [&str; 9] = [
    "finished",
    "error",
    "panicked",
    "cancelled",
    "blocked",
    "invalid",
    "not_found",
    "timed_out",
    "skipped",
];

/// The fill colour of an outcome (`None`: unfinished).
fn outcome_colour(outcome: Option<&str>) -> &'static str {
    match outcome {
        Some("finished") => "#2f9e62",
        Some("error") => "#dc3c3c",
        Some("panicked") => "#9d2a8a",
        Some("cancelled") => "#e8891c",
        Some("blocked") => "#8b6a45",
        Some("invalid") => "#7c5ccf",
        Some("not_found") => "#4b6584",
        Some("timed_out") => "#c29a12",
        Some("skipped") => "#a3aab4",
        Some(_) => "#b23b5a",
        None => "#9ca3af",
    }
}

/// The colour of text written on a bar of this outcome.
fn text_on(outcome: Option<&str>) -> &'static str {
    match outcome {
        Some("skipped" | "timed_out") | None => INK,
        Some(_) => "#ffffff",
    }
}

/// Escapes text for XML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0.
            ch if ch.is_control() => out.push(' '),
            ch => out.push(ch),
        }
    }
    out
}

/// Estimated width of `text` in px at `size` (generous, so labels do not collide).
fn text_width(text: &str, size: f64) -> f64 {
    let chars = text.chars().count();
    // Label lengths are tiny; the cast cannot lose anything that matters.
    #[allow(clippy::cast_precision_loss)]
    let chars = chars as f64;
    chars * size * 0.6
}

/// Cuts `text` to at most `max` characters, ending in "…" when cut.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A step of 1, 2 or 5 × 10ⁿ giving about `target` intervals over `range`.
pub fn nice_step(range: f64, target: f64) -> f64 {
    if range <= 0.0 || !range.is_finite() {
        return 1.0;
    }
    let raw = range / target;
    let magnitude = 10f64.powf(raw.log10().floor());
    let normalized = raw / magnitude;
    // The nearest of 1, 2, 5, 10 (on a log scale), so the tick count stays close to the target.
    let factor = if normalized < 1.5 {
        1.0
    } else if normalized < 3.5 {
        2.0
    } else if normalized < 7.5 {
        5.0
    } else {
        10.0
    };
    factor * magnitude
}

/// One lane of the chart.
enum Row<'a> {
    Model(&'a RequestSpan, Option<RequestSavings>),
    Call(&'a CallSpan),
}

/// The horizontal scale.
struct Scale {
    x0: f64,
    width: f64,
    domain: f64,
}

impl Scale {
    fn x(&self, ms: f64) -> f64 {
        self.x0 + ms.clamp(0.0, self.domain) / self.domain * self.width
    }
}

/// An SVG document being built.
struct Svg {
    out: String,
}

impl Svg {
    fn raw(&mut self, text: &str) {
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn text(&mut self, x: f64, y: f64, attrs: &str, body: &str) {
        let _ = writeln!(self.out, r#"<text x="{x:.1}" y="{y:.1}" {attrs}>{body}</text>"#);
    }

    fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, attrs: &str) {
        let _ = writeln!(
            self.out,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" {attrs}/>"#
        );
    }

    /// A box as a path (`<rect>` is reserved for call bars).
    fn box_path(&mut self, x: f64, y: f64, w: f64, h: f64, attrs: &str) {
        let _ = writeln!(
            self.out,
            r#"<path d="M{x:.1} {y:.1}h{w:.1}v{h:.1}h{:.1}z" {attrs}/>"#,
            -w
        );
    }
}

/// Renders the timeline as an SVG document (no XML declaration; starts with `<svg`).
pub fn render(timeline: &Timeline) -> String {
    let savings = timeline.savings();
    let rows = rows(timeline, &savings);

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
    let plot_x = MARGIN + label_width;
    let plot_w = WIDTH - plot_x - RIGHT_GUTTER;

    let last = savings.batching_end_ms.max(timeline.last_ms()).max(1.0);
    let step = nice_step(last, 8.0);
    let domain = (last / step).ceil() * step;
    let scale = Scale {
        x0: plot_x,
        width: plot_w,
        domain,
    };

    let mut svg = Svg { out: String::new() };
    let lanes_top = 84.0;
    let mut y = lanes_top;
    let mut placed: Vec<(f64, &Row)> = Vec::new();
    let mut previous_request = None;
    for row in &rows {
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
    let lanes_bottom = y;
    let axis_y = lanes_bottom + 8.0;
    let compare_top = axis_y + 46.0;
    let compare_rows_top = compare_top + 14.0;
    let legend_top = compare_rows_top + 2.0 * ROW_H + 26.0;
    let legend = legend_items(timeline);
    let legend_height = layout_legend(&legend, 0.0).1;
    let height = legend_top + legend_height + MARGIN;

    let _ = writeln!(
        svg.out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH:.0}" height="{height:.0}" viewBox="0 0 {WIDTH:.0} {height:.0}" font-family="{FONT}" font-size="{FONT_SIZE}" fill="{INK}">"#
    );
    let _ = writeln!(
        svg.out,
        "<title>headstart timeline: {}</title>",
        escape(&timeline.title)
    );
    svg.box_path(0.0, 0.0, WIDTH, height, r##"fill="#ffffff""##);

    // Title and summary.
    svg.text(
        MARGIN,
        32.0,
        r#"font-size="17" font-weight="600""#,
        &format!("headstart timeline · {}", escape(&truncate(&timeline.title, 70))),
    );
    let summary = format!(
        "{} request{} · {} tool call{} · actual {} ms · end-of-stream batching {} ms · saved {} ms ({:.0}%)",
        timeline.requests.len(),
        plural(timeline.requests.len()),
        timeline.calls.len(),
        plural(timeline.calls.len()),
        format_ms(savings.actual_end_ms),
        format_ms(savings.batching_end_ms),
        format_ms(savings.saved_ms()),
        savings.saved_percent()
    );
    svg.text(
        MARGIN,
        54.0,
        &format!(r#"font-size="13" fill="{MUTED}""#),
        &escape(&summary),
    );

    // Lane stripes and group separators.
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

    // Grid and axis.
    let mut tick = 0.0;
    while tick <= domain + step / 2.0 {
        let x = scale.x(tick);
        svg.line(
            x,
            lanes_top - 6.0,
            x,
            axis_y,
            &format!(r#"stroke="{GRID}" stroke-width="1""#),
        );
        svg.line(
            x,
            axis_y,
            x,
            axis_y + 5.0,
            &format!(r#"stroke="{MUTED}" stroke-width="1""#),
        );
        svg.text(
            x,
            axis_y + 19.0,
            &format!(r#"font-size="11" fill="{MUTED}" text-anchor="middle""#),
            &format_ms(tick),
        );
        tick += step;
    }
    svg.line(
        plot_x,
        axis_y,
        plot_x + plot_w,
        axis_y,
        &format!(r#"stroke="{MUTED}" stroke-width="1""#),
    );
    svg.text(
        MARGIN + 8.0,
        axis_y + 19.0,
        &format!(r#"font-size="11" fill="{MUTED}""#),
        "time (ms)",
    );

    // Stream-end lines, one per request group, under the lanes' marks.
    for (index, (top, row)) in placed.iter().enumerate() {
        if let Row::Model(request, _) = row {
            let Some(end) = request.stream_end_ms else { continue };
            let group_bottom = placed[index + 1..]
                .iter()
                .take_while(|(_, row)| matches!(row, Row::Call(..)))
                .last()
                .map_or(top + ROW_H, |(top, _)| top + ROW_H);
            let x = scale.x(end);
            svg.line(
                x,
                top + 2.0,
                x,
                group_bottom - 2.0,
                &format!(r#"stroke="{MODEL_STROKE}" stroke-width="1" stroke-dasharray="3 3""#),
            );
        }
    }

    for (top, row) in &placed {
        match row {
            Row::Model(request, request_savings) => model_lane(&mut svg, &scale, *top, request, *request_savings),
            Row::Call(call) => call_lane(&mut svg, &scale, *top, call, timeline),
        }
    }

    comparison(&mut svg, &scale, compare_top, compare_rows_top, &savings);
    draw_legend(&mut svg, &legend, legend_top);

    svg.raw("</svg>");
    svg.out
}

fn plural(count: usize) -> &'static str {
    if count == 1 {
        ""
    } else {
        "s"
    }
}

/// The lanes in display order: per request its model lane, then its calls; calls of unknown requests last.
fn rows<'a>(timeline: &'a Timeline, savings: &Savings) -> Vec<Row<'a>> {
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
    svg.box_path(
        start,
        mid - 5.0,
        end - start,
        10.0,
        &format!(r#"fill="{MODEL_FILL}" stroke="{MODEL_STROKE}" stroke-width="1""#),
    );
    for &fragment in &request.fragments_ms {
        let x = scale.x(fragment);
        svg.line(
            x,
            mid - 8.0,
            x,
            mid + 8.0,
            &format!(r#"stroke="{TICK}" stroke-width="2" stroke-linecap="round""#),
        );
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
    lane_label(svg, top, &call.id, &call.name);
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
        svg.box_path(
            from,
            bar_top,
            to - from,
            BAR_H,
            &format!(r#"fill="none" stroke="{GHOST}" stroke-width="1" stroke-dasharray="4 3""#),
        );
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
            format!(r#"fill="{colour}" fill-opacity="0.45" stroke="{MUTED}" stroke-dasharray="3 2""#)
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

    // The admitted marker: a small triangle pointing at the bar.
    let _ = writeln!(
        svg.out,
        r#"<path d="M{:.1} {:.1}l4.5 -6h-9z" fill="{INK}"/>"#,
        admitted,
        bar_top - 1.0
    );

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

fn comparison(svg: &mut Svg, scale: &Scale, heading_y: f64, rows_top: f64, savings: &Savings) {
    svg.text(
        MARGIN,
        heading_y,
        r#"font-size="13" font-weight="600""#,
        "Response time vs end-of-stream batching",
    );
    let bars = [
        ("headstart (early execution)", savings.actual_end_ms, ACTUAL),
        ("end-of-stream batching", savings.batching_end_ms, GHOST),
    ];
    for (index, (label, end_ms, colour)) in bars.iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let top = rows_top + index as f64 * ROW_H;
        let mid = top + ROW_H / 2.0;
        svg.text(MARGIN + 8.0, mid + 4.0, "", &escape(label));
        let from = scale.x(0.0);
        let to = scale.x(*end_ms).max(from + 2.0);
        svg.box_path(from, mid - 7.0, to - from, 14.0, &format!(r#"fill="{colour}""#));
        let text = format!("{} ms", format_ms(*end_ms));
        if index == 0 && savings.saved_ms() > 0.0 {
            svg.text(
                to - 6.0,
                mid + 4.0,
                r##"font-size="11" fill="#ffffff" text-anchor="end" font-weight="600""##,
                &text,
            );
            let saved_to = scale.x(savings.batching_end_ms);
            svg.box_path(
                to,
                mid - 7.0,
                saved_to - to,
                14.0,
                &format!(r#"fill="{SAVED}" fill-opacity="0.15" stroke="{SAVED}" stroke-dasharray="3 2""#),
            );
            svg.text(
                saved_to + 8.0,
                mid + 4.0,
                &format!(r#"font-size="12" font-weight="600" fill="{SAVED}""#),
                &escape(&format!(
                    "saved {} ms ({:.0}%)",
                    format_ms(savings.saved_ms()),
                    savings.saved_percent()
                )),
            );
        } else {
            svg.text(to + 8.0, mid + 4.0, r#"font-size="11""#, &text);
        }
    }
}

/// A legend entry.
enum Swatch {
    Outcome(String),
    Model,
    Fragment,
    Admitted,
    Ghost,
    StreamEnd,
    Unfinished,
}

struct LegendItem {
    swatch: Swatch,
    label: String,
}

fn legend_items(timeline: &Timeline) -> Vec<LegendItem> {
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
fn layout_legend(items: &[LegendItem], top: f64) -> (Vec<(f64, f64)>, f64) {
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

fn draw_legend(svg: &mut Svg, items: &[LegendItem], top: f64) {
    let (positions, _) = layout_legend(items, top);
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
                &format!(
                    r#"fill="{}" fill-opacity="0.45" stroke="{MUTED}" stroke-dasharray="3 2""#,
                    outcome_colour(None)
                ),
            ),
            Swatch::Model => svg.box_path(
                x,
                mid - 4.0,
                SWATCH_W,
                8.0,
                &format!(r#"fill="{MODEL_FILL}" stroke="{MODEL_STROKE}" stroke-width="1""#),
            ),
            Swatch::Fragment => svg.line(
                x + SWATCH_W / 2.0,
                mid - 7.0,
                x + SWATCH_W / 2.0,
                mid + 7.0,
                &format!(r#"stroke="{TICK}" stroke-width="2" stroke-linecap="round""#),
            ),
            Swatch::StreamEnd => svg.line(
                x + SWATCH_W / 2.0,
                mid - 8.0,
                x + SWATCH_W / 2.0,
                mid + 8.0,
                &format!(r#"stroke="{MODEL_STROKE}" stroke-width="1" stroke-dasharray="3 3""#),
            ),
            Swatch::Admitted => {
                let _ = writeln!(
                    svg.out,
                    r#"<path d="M{:.1} {:.1}l4.5 -6h-9z" fill="{INK}"/>"#,
                    x + SWATCH_W / 2.0,
                    mid + 3.0
                );
            }
            Swatch::Ghost => svg.box_path(
                x,
                mid - 5.0,
                SWATCH_W,
                10.0,
                &format!(r#"fill="none" stroke="{GHOST}" stroke-width="1" stroke-dasharray="4 3""#),
            ),
        }
        svg.text(x + SWATCH_W + 6.0, mid + 4.0, r#"font-size="11""#, &escape(&item.label));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, started: Option<f64>, ended: Option<f64>, outcome: Option<&str>) -> CallSpan {
        CallSpan {
            id: id.to_owned(),
            name: "lookup".to_owned(),
            request: 0,
            admitted_ms: 30.0,
            started_ms: started,
            ended_ms: ended,
            outcome: outcome.map(str::to_owned),
        }
    }

    fn timeline(calls: Vec<CallSpan>) -> Timeline {
        Timeline {
            title: "a <b> & \"c\"".to_owned(),
            requests: vec![RequestSpan {
                request: 0,
                start_ms: 0.0,
                stream_end_ms: Some(400.0),
                fragments_ms: vec![30.0, 120.0, 400.0],
                stop_reason: Some("tool_use".to_owned()),
            }],
            calls,
            end_ms: 400.0,
        }
    }

    #[test]
    fn escapes_xml_text() {
        assert_eq!(escape("a<b>&\"c\"'d'"), "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;");
        assert_eq!(escape("x\u{1}y"), "x y");
    }

    #[test]
    fn nice_steps_are_1_2_5() {
        assert_eq!(nice_step(450.0, 8.0), 50.0);
        assert_eq!(nice_step(750.0, 8.0), 100.0);
        assert_eq!(nice_step(4213.0, 8.0), 500.0);
        assert_eq!(nice_step(160.0, 8.0), 20.0);
        assert_eq!(nice_step(3000.0, 8.0), 500.0);
        assert_eq!(nice_step(7.0, 8.0), 1.0);
        assert_eq!(nice_step(0.0, 8.0), 1.0);
    }

    #[test]
    fn one_rect_per_executed_call_and_labels_escaped() {
        let svg = render(&timeline(vec![
            call("call_1", Some(30.0), Some(330.0), Some("finished")),
            call("call_2", Some(120.0), Some(220.0), Some("error")),
            call("b<1>", None, Some(30.0), Some("blocked")),
            call("h1", Some(40.0), None, None),
        ]));
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<rect").count(), 3, "call_1, call_2 and the unfinished h1");
        assert!(svg.contains(r#"data-call-id="call_1" data-outcome="finished""#));
        assert!(svg.contains(r#"data-call-id="h1" data-outcome="unfinished""#));
        assert!(svg.contains("b&lt;1&gt;"));
        assert!(!svg.contains("b<1>"));
        assert!(svg.contains("a &lt;b&gt; &amp; &quot;c&quot;"));
        assert!(svg.contains("unfinished (started, no result)"));
        assert!(svg.contains("blocked · not run"));
        // The saved time: call_1 ran 300 ms before the stream end.
        assert!(svg.contains("saved 300 ms"), "{svg}");
        for outcome in OUTCOMES {
            assert!(svg.contains(&format!(">{outcome}</text>")), "legend lists {outcome}");
        }
        // Balanced elements (a cheap well-formedness check).
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        assert_eq!(svg.matches("<g>").count(), svg.matches("</g>").count());
    }

    #[test]
    fn empty_timeline_renders() {
        let svg = render(&Timeline {
            title: "empty".to_owned(),
            requests: Vec::new(),
            calls: Vec::new(),
            end_ms: 0.0,
        });
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<rect").count(), 0);
        assert!(!svg.contains("NaN"));
    }
}
