//! Crashes on purpose, at named instants no signal sent from outside can hit reliably (feature `testing`).
//!
//! `HEADSTART_RESTATE_FAULT=<point>` in a deployment's environment makes the process abort when it reaches that
//! point: a SIGKILL at exactly that instant, as far as Restate and the store can tell. The crash tests use it to
//! make a lost attempt deterministic, where a kill from outside lands a few milliseconds either side. One fault is
//! a failure instead of a crash: `fail-run-call` makes every attempt of `Tools/run_call` fail, so that Restate
//! retries it for good, as it retried a journal mismatch (issue 45), and `inspect --restate` must show it.

/// Where a deployment can be made to die.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    /// In `Tools/run_call`, right after a body's outcome was journaled in this attempt and before the handler
    /// returns it: the invocation is not over, so Restate runs it again, and the replay must return that outcome.
    AfterOutcome,
    /// At the start of every `Tools/run_call` attempt: the attempt fails (retryably) instead of running.
    FailRunCall,
}

impl Point {
    fn name(self) -> &'static str {
        match self {
            Point::AfterOutcome => "abort-after-outcome",
            Point::FailRunCall => "fail-run-call",
        }
    }
}

/// The environment variable that names the point to die at.
pub const FAULT_VARIABLE: &str = "HEADSTART_RESTATE_FAULT";

/// Whether the environment names `point`.
pub(crate) fn named(point: Point) -> bool {
    std::env::var(FAULT_VARIABLE).as_deref() == Ok(point.name())
}

/// Aborts the process when the environment names `point`.
pub(crate) fn hit(point: Point) {
    if named(point) {
        tracing::error!(point = point.name(), "{FAULT_VARIABLE}: aborting on purpose");
        std::process::abort();
    }
}

/// The failure a fault makes an attempt end with: one Restate retries, as it retries any attempt that failed.
pub(crate) fn failure(what: &str) -> restate_sdk::prelude::HandlerError {
    std::io::Error::other(format!("{FAULT_VARIABLE}: {what}")).into()
}
