//! # headstart-timeline
//!
//! What a run did, on one time axis, for the `headstart` commands that show it (`run --timeline`, `timeline`,
//! `inspect`, `demo`) and for the simulator that writes replay reports:
//!
//! - [`report`]: the replay report (`docs/scenario-format.md`, "Report"), written by `headstart replay` and read
//!   back by `headstart timeline --report`;
//! - [`Timeline`]: model requests and tool calls on one axis, built from a stored session or from a report, and
//!   its comparison with end-of-stream batching ([`Savings`]), and each call's and response's figures (headroom,
//!   overlap, tool-round time: [`Figures`], summarized over many sessions by [`FigureStats`]);
//! - [`svg`]: the timeline as a self-contained SVG Gantt chart;
//! - [`visible`]: outside text with its control characters shown as escapes.
//!
//! Pure: no I/O, no clock. Running an agent on a real provider and drawing it needs this crate, not the simulator.
#![warn(missing_docs)]

pub mod answers;
mod build;
mod figures;
mod figures_json;
mod format;
pub mod json_path;
pub mod report;
mod savings;
pub mod stored;
pub mod svg;
mod timeline;
pub mod visible;

pub use figures::{percentile, CallFigures, FigureStats, Figures, ResponseFigures, Spread};
pub use figures_json::response_models;
pub use format::format_ms;
pub use report::{Report, ReportError};
pub use savings::{RequestSavings, Savings};
pub use timeline::{CallSpan, Delivery, RequestSpan, Timeline};
