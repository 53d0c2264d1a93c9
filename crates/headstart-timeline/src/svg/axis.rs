//! The time axis: the horizontal scale from milliseconds to px, its tick step, and the grid and axis drawn under the
//! lanes.

use super::primitives::Svg;
use super::style::{GRID, MARGIN, MUTED};
use crate::format::format_ms;

/// The horizontal scale: `[0, domain]` ms onto `[x0, x0 + width]` px, with a tick every `step` ms.
pub(super) struct Scale {
    x0: f64,
    width: f64,
    domain: f64,
    step: f64,
}

impl Scale {
    /// A scale over `[x0, x0 + width]` px covering `last` ms, rounded up to a whole tick of about eight.
    pub(super) fn covering(x0: f64, width: f64, last: f64) -> Scale {
        let step = nice_step(last, 8.0);
        Scale {
            x0,
            width,
            domain: (last / step).ceil() * step,
            step,
        }
    }

    /// The x coordinate of `ms` (clamped to the domain).
    pub(super) fn x(&self, ms: f64) -> f64 {
        self.x0 + ms.clamp(0.0, self.domain) / self.domain * self.width
    }
}

/// A step of 1, 2 or 5 × 10ⁿ giving about `target` intervals over `range`.
pub(super) fn nice_step(range: f64, target: f64) -> f64 {
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

/// Draws the vertical grid lines from `lanes_top` down to the axis at `axis_y`, the ticks with their labels, and
/// the axis line with its caption.
pub(super) fn draw(svg: &mut Svg, scale: &Scale, lanes_top: f64, axis_y: f64) {
    let mut tick = 0.0;
    while tick <= scale.domain + scale.step / 2.0 {
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
        tick += scale.step;
    }
    svg.line(
        scale.x0,
        axis_y,
        scale.x0 + scale.width,
        axis_y,
        &format!(r#"stroke="{MUTED}" stroke-width="1""#),
    );
    svg.text(
        MARGIN + 8.0,
        axis_y + 19.0,
        &format!(r#"font-size="11" fill="{MUTED}""#),
        "time (ms)",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
