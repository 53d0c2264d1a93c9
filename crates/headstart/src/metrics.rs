//! The engine's metrics, recorded through the `metrics` facade: an application that installs a
//! recorder (a Prometheus exporter, StatsD, OpenTelemetry) receives them with no headstart code; without one they
//! cost an atomic load each. Names follow Prometheus's conventions (`headstart_` prefix, the unit or `_total` as a
//! suffix); docs/fleet.md lists every metric of the workspace.
//!
//! Durations are taken on the engine's [`Clock`](crate::Clock) (the wall clock in production; a replay on the
//! virtual clock records virtual time).

use ::metrics::{counter, describe_counter, describe_histogram, histogram, Unit};

/// Counter: calls whose body started, labelled `when="early"` (admitted while the model was still streaming) or
/// `when="after_stream"` (admitted by the commit that ended the response).
pub const TOOL_CALLS_STARTED: &str = "headstart_tool_calls_started_total";

/// Histogram, seconds: from a call's `toolcall_end` to its body starting, labelled `when` as
/// [`TOOL_CALLS_STARTED`] is. For early calls this is the admission path (the prefix commit and the start); for
/// the others it includes the rest of the stream.
pub const SEAL_TO_START: &str = "headstart_seal_to_start_seconds";

/// Histogram, seconds: each fragment commit as the engine awaits it (prefix and terminal fragments alike),
/// successful or not.
pub const FRAGMENT_COMMIT: &str = "headstart_fragment_commit_seconds";

/// Registers the descriptions and units of the engine's metrics with the installed recorder, so an exporter can
/// print them (`# HELP`). Optional: the metrics are recorded either way.
pub fn describe() {
    describe_counter!(
        TOOL_CALLS_STARTED,
        "Tool calls whose body started: early (while the model streamed) or after the stream."
    );
    describe_histogram!(
        SEAL_TO_START,
        Unit::Seconds,
        "From a tool call's toolcall_end to its body starting."
    );
    describe_histogram!(
        FRAGMENT_COMMIT,
        Unit::Seconds,
        "Fragment commits (a transcript prefix with its calls' admission records), as the engine awaits them."
    );
}

/// A call's body started; `seal_to_start_us` is from its seal, when the seal was seen.
pub(crate) fn call_started(early: bool, seal_to_start_us: Option<i64>) {
    let when = if early { "early" } else { "after_stream" };
    counter!(TOOL_CALLS_STARTED, "when" => when).increment(1);
    if let Some(us) = seal_to_start_us {
        histogram!(SEAL_TO_START, "when" => when).record(seconds(us));
    }
}

/// A fragment commit took `us` microseconds.
pub(crate) fn fragment_committed(us: i64) {
    histogram!(FRAGMENT_COMMIT).record(seconds(us));
}

/// Microseconds as seconds; a negative span (a clock that stepped back) counts as zero.
fn seconds(us: i64) -> f64 {
    us.max(0) as f64 / 1_000_000.0
}
