//! Crashes on purpose, at named instants no signal sent from outside can hit reliably (feature `testing`).
//!
//! `HEADSTART_RESTATE_FAULT=<point>` in a deployment's environment makes the process abort when it reaches that
//! point: a SIGKILL at exactly that instant, as far as Restate and the store can tell. The crash tests use it to
//! make a lost attempt deterministic, where a kill from outside lands a few milliseconds either side.

/// Where a deployment can be made to die.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    /// In `Tools/run_call`, right after a body's outcome was journaled in this attempt and before the handler
    /// returns it: the invocation is not over, so Restate runs it again, and the replay must return that outcome.
    AfterOutcome,
}

impl Point {
    fn name(self) -> &'static str {
        match self {
            Point::AfterOutcome => "abort-after-outcome",
        }
    }
}

/// The environment variable that names the point to die at.
pub const FAULT_VARIABLE: &str = "HEADSTART_RESTATE_FAULT";

/// Aborts the process when the environment names `point`.
pub(crate) fn hit(point: Point) {
    if std::env::var(FAULT_VARIABLE).as_deref() == Ok(point.name()) {
        tracing::error!(point = point.name(), "{FAULT_VARIABLE}: aborting on purpose");
        std::process::abort();
    }
}
