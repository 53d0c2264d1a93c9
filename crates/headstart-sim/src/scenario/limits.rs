//! The limits on what a scenario may name ([module docs](super)): its size, its delta logs' size, its times.

use super::error::ScenarioError;

/// The largest scenario file [`Scenario::load`](super::Scenario::load) reads: 16 MiB.
pub const MAX_SCENARIO_BYTES: u64 = 16 * 1024 * 1024;

/// The most delta-log bytes one scenario reads over all its turns (a log named by several turns counts once per
/// turn): 64 MiB.
pub const MAX_DELTA_LOG_BYTES: u64 = 64 * 1024 * 1024;

/// The largest time a scenario may name, in milliseconds: 365 days.
pub const MAX_TIME_MS: u64 = 365 * 24 * 3600 * 1000;

/// Refuses a time over [`MAX_TIME_MS`].
pub(super) fn check_time(ms: Option<u64>, path: &str) -> Result<(), ScenarioError> {
    match ms {
        Some(ms) if ms > MAX_TIME_MS => Err(ScenarioError::Invalid {
            path: path.to_owned(),
            message: time_over_limit(ms),
        }),
        _ => Ok(()),
    }
}

pub(super) fn time_over_limit(ms: u64) -> String {
    format!("{ms} ms is more than the longest time a scenario may name, {MAX_TIME_MS} ms (365 days)")
}
