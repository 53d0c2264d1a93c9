//! Renders a [`Timeline`] as a self-contained SVG Gantt chart, by plain string building.
//!
//! Layout, top to bottom: a title and a one-line summary; the lanes (per request: one model-stream lane, then one
//! lane per tool call) over a time axis in ms; the comparison with end-of-stream batching; a legend.
//!
//! `<rect>` elements are used for executed tool calls only (one per call that started), so the picture can be
//! checked mechanically; every other shape is a `<path>`, `<line>` or `<circle>`.
//!
//! One concern per file: `style` (dimensions, palette), `primitives` (the document, escaping, text measures),
//! `axis` (the scale and the time axis), `marks` (the shapes lanes and legend share), `lanes`, `comparison`
//! and `legend`; this file lays the page out.

mod axis;
mod comparison;
mod lanes;
mod legend;
mod marks;
mod primitives;
mod style;

use std::fmt::Write as _;

use crate::format::format_ms;
use crate::timeline::Timeline;
use axis::Scale;
use primitives::{escape, plural, truncate, Svg};
use style::{FONT, FONT_SIZE, INK, MARGIN, MUTED, RIGHT_GUTTER, ROW_H, WIDTH};

/// Renders the timeline as an SVG document (no XML declaration; starts with `<svg`).
pub fn render(timeline: &Timeline) -> String {
    let savings = timeline.savings();
    let rows = lanes::rows(timeline, &savings);

    let plot_x = MARGIN + lanes::label_width(&rows);
    let plot_w = WIDTH - plot_x - RIGHT_GUTTER;
    let last = savings.batching_end_ms.max(timeline.last_ms()).max(1.0);
    let scale = Scale::covering(plot_x, plot_w, last);

    let mut svg = Svg { out: String::new() };
    let lanes_top = 84.0;
    let (placed, lanes_bottom) = lanes::place(&rows, lanes_top);
    let axis_y = lanes_bottom + 8.0;
    let compare_top = axis_y + 46.0;
    let compare_rows_top = compare_top + 14.0;
    let legend_top = compare_rows_top + 2.0 * ROW_H + 26.0;
    let legend = legend::items(timeline);
    let legend_height = legend::layout(&legend, 0.0).1;
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

    // Back to front: lane backgrounds, the grid and axis, the stream ends, the lanes' marks.
    lanes::draw_backgrounds(&mut svg, &placed);
    axis::draw(&mut svg, &scale, lanes_top, axis_y);
    lanes::draw_stream_ends(&mut svg, &scale, &placed);
    lanes::draw(&mut svg, &scale, &placed, timeline);

    comparison::draw(&mut svg, &scale, compare_top, compare_rows_top, &savings);
    legend::draw(&mut svg, &legend, legend_top);

    svg.raw("</svg>");
    svg.out
}

#[cfg(test)]
mod tests {
    use super::style::OUTCOMES;
    use super::*;
    use crate::timeline::{CallSpan, RequestSpan};

    fn call(id: &str, started: Option<f64>, ended: Option<f64>, outcome: Option<&str>) -> CallSpan {
        CallSpan {
            id: id.to_owned(),
            name: "lookup".to_owned(),
            request: 0,
            sealed_ms: None,
            admitted_ms: 30.0,
            started_ms: started,
            ended_ms: ended,
            outcome: outcome.map(str::to_owned),
            provider_async: None,
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
