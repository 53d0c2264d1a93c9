//! The marks a lane draws, each in one place so the legend shows exactly what the lanes draw.

use std::fmt::Write as _;

use super::primitives::Svg;
use super::style::{GHOST, INK, MODEL_FILL, MODEL_STROKE, MUTED, TICK};

/// A model stream: a box from the request's start to its stream end.
pub(super) fn model_stream(svg: &mut Svg, x: f64, y: f64, w: f64, h: f64) {
    svg.box_path(
        x,
        y,
        w,
        h,
        &format!(r#"fill="{MODEL_FILL}" stroke="{MODEL_STROKE}" stroke-width="1""#),
    );
}

/// A fragment commit: a short thick vertical tick.
pub(super) fn fragment_commit(svg: &mut Svg, x: f64, y1: f64, y2: f64) {
    svg.line(
        x,
        y1,
        x,
        y2,
        &format!(r#"stroke="{TICK}" stroke-width="2" stroke-linecap="round""#),
    );
}

/// A stream end: a dashed vertical line.
pub(super) fn stream_end(svg: &mut Svg, x: f64, y1: f64, y2: f64) {
    svg.line(
        x,
        y1,
        x,
        y2,
        &format!(r#"stroke="{MODEL_STROKE}" stroke-width="1" stroke-dasharray="3 3""#),
    );
}

/// A call's admission: a small triangle pointing down at `(x, y)`.
pub(super) fn admitted(svg: &mut Svg, x: f64, y: f64) {
    let _ = writeln!(svg.out, r#"<path d="M{x:.1} {y:.1}l4.5 -6h-9z" fill="{INK}"/>"#);
}

/// Where end-of-stream batching would have run a call: a dashed empty box.
pub(super) fn batching_ghost(svg: &mut Svg, x: f64, y: f64, w: f64, h: f64) {
    svg.box_path(
        x,
        y,
        w,
        h,
        &format!(r#"fill="none" stroke="{GHOST}" stroke-width="1" stroke-dasharray="4 3""#),
    );
}

/// The style of an unfinished call's bar: its colour, faded, with a dashed outline.
pub(super) fn unfinished_style(colour: &str) -> String {
    format!(r#"fill="{colour}" fill-opacity="0.45" stroke="{MUTED}" stroke-dasharray="3 2""#)
}
