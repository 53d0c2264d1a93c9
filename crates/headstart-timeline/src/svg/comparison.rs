//! The comparison under the axis: how long the run took against how long end-of-stream batching would have taken.

use super::axis::Scale;
use super::primitives::{escape, Svg};
use super::style::{ACTUAL, GHOST, MARGIN, ROW_H, SAVED};
use crate::format::format_ms;
use crate::savings::Savings;

/// Draws the heading at `heading_y` and, from `rows_top`, the two bars: the run as it was and as end-of-stream
/// batching would have made it, with the time saved.
pub(super) fn draw(svg: &mut Svg, scale: &Scale, heading_y: f64, rows_top: f64, savings: &Savings) {
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
