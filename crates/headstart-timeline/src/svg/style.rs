//! The picture's dimensions, font and palette, and the colour of each call outcome.

/// Total width of the picture in px.
pub(super) const WIDTH: f64 = 1000.0;
/// Outer margin in px.
pub(super) const MARGIN: f64 = 20.0;
/// Space right of the plot for end labels.
pub(super) const RIGHT_GUTTER: f64 = 150.0;
/// Height of one lane.
pub(super) const ROW_H: f64 = 28.0;
/// Vertical space between request groups.
pub(super) const GROUP_GAP: f64 = 10.0;
/// Height of a call bar.
pub(super) const BAR_H: f64 = 14.0;
/// Base font size.
pub(super) const FONT_SIZE: f64 = 12.0;
/// Sans-serif font stack.
pub(super) const FONT: &str = "'Segoe UI', 'Helvetica Neue', Helvetica, Arial, 'DejaVu Sans', sans-serif";

pub(super) const INK: &str = "#1f2937";
pub(super) const MUTED: &str = "#6b7280";
pub(super) const GRID: &str = "#e8ebef";
pub(super) const STRIPE: &str = "#f7f8fa";
pub(super) const MODEL_FILL: &str = "#dbe6fb";
pub(super) const MODEL_STROKE: &str = "#5b7fd6";
pub(super) const TICK: &str = "#1e3a8a";
pub(super) const GHOST: &str = "#9ca3af";
pub(super) const ACTUAL: &str = "#2563eb";
pub(super) const SAVED: &str = "#16a34a";

/// The outcomes every legend lists, in order, with their colours.
pub(super) const OUTCOMES: [&str; 9] = [
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
pub(super) fn outcome_colour(outcome: Option<&str>) -> &'static str {
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
pub(super) fn text_on(outcome: Option<&str>) -> &'static str {
    match outcome {
        Some("skipped" | "timed_out") | None => INK,
        Some(_) => "#ffffff",
    }
}
