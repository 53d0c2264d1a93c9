//! How long to wait before trying the store again after a failure (a fleet worker's claim or renewal, a
//! PostgreSQL listener's connection): a pure schedule, so that its figures are unit tested apart from the loops
//! that follow it.

use std::time::Duration;

/// The share of a wait that jitter may take off, so that the workers of a fleet that lost their store together
/// do not all come back at the same instant.
const JITTER: f64 = 0.25;

/// A retry schedule for when the store fails (a worker's claims and renewals, a listener's connection): the first
/// wait, doubled after each further failure up to the cap, each wait shortened by up to a quarter at random. A
/// success starts it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after the first failure (default 100 ms; at least 1 ms is used).
    pub first: Duration,
    /// The longest wait (default 30 s; never less than `first`).
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    /// The wait after `failures` failures in a row (`failures >= 1`; 0 counts as 1), before jitter: `first`,
    /// doubled `failures - 1` times, capped at `max`.
    pub fn step(&self, failures: u32) -> Duration {
        let first = self.first.max(Duration::from_millis(1));
        let max = self.max.max(first);
        // 2^31 × 1 ms is weeks: any cap is reached long before the shift would overflow.
        let doublings = failures.saturating_sub(1).min(31);
        first.saturating_mul(1 << doublings).min(max)
    }

    /// The wait after `failures` failures in a row with jitter: `unit`, in `[0, 1)` (a random draw; clamped),
    /// takes up to a quarter off [`step`](Self::step). Whole milliseconds, the resolution of tokio's timers.
    pub fn wait(&self, failures: u32, unit: f64) -> Duration {
        let unit = if unit.is_finite() { unit.clamp(0.0, 1.0) } else { 0.0 };
        let millis = self.step(failures).as_millis() as f64 * (1.0 - JITTER * unit);
        Duration::from_millis(millis.round() as u64)
    }
}

/// The failures in a row of operations on the store, and the wait they call for on a [`Backoff`] schedule.
#[derive(Debug, Clone, Copy, Default)]
pub struct Failures {
    count: u32,
}

impl Failures {
    /// One more failure: the wait before the next try, jittered by `unit`.
    pub fn failed(&mut self, schedule: &Backoff, unit: f64) -> Duration {
        self.count = self.count.saturating_add(1);
        schedule.wait(self.count, unit)
    }

    /// A success: the next failure waits the first step again.
    pub fn succeeded(&mut self) {
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_the_first_up_to_the_cap() {
        let schedule = Backoff::default();
        let steps: Vec<u128> = (1..=12).map(|n| schedule.step(n).as_millis()).collect();
        assert_eq!(
            steps,
            [100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800, 25_600, 30_000, 30_000, 30_000]
        );
        assert_eq!(
            schedule.step(0),
            Duration::from_millis(100),
            "0 counts as the first failure"
        );
        assert_eq!(schedule.step(u32::MAX), Duration::from_secs(30), "no overflow");
    }

    #[test]
    fn jitter_takes_at_most_a_quarter_off() {
        let schedule = Backoff::default();
        assert_eq!(schedule.wait(6, 0.0), Duration::from_millis(3_200));
        assert_eq!(schedule.wait(6, 0.5), Duration::from_millis(2_800));
        assert_eq!(schedule.wait(6, 1.0), Duration::from_millis(2_400));
        assert_eq!(
            schedule.wait(1, 0.123_456),
            Duration::from_millis(97),
            "whole milliseconds"
        );
        for bad in [-1.0, 7.0, f64::NAN, f64::INFINITY] {
            let wait = schedule.wait(6, bad);
            assert!(
                (Duration::from_millis(2_400)..=Duration::from_millis(3_200)).contains(&wait),
                "{bad}: {wait:?}"
            );
        }
    }

    #[test]
    fn a_degenerate_schedule_still_waits() {
        let zero = Backoff {
            first: Duration::ZERO,
            max: Duration::ZERO,
        };
        assert_eq!(zero.step(1), Duration::from_millis(1));
        assert_eq!(zero.step(5), Duration::from_millis(1));
        let inverted = Backoff {
            first: Duration::from_secs(2),
            max: Duration::from_secs(1),
        };
        assert_eq!(
            inverted.step(3),
            Duration::from_secs(2),
            "the cap is never below the first wait"
        );
    }

    #[test]
    fn a_success_starts_the_schedule_over() {
        let schedule = Backoff::default();
        let mut failures = Failures::default();
        let waits: Vec<Duration> = (0..3).map(|_| failures.failed(&schedule, 0.0)).collect();
        assert_eq!(
            waits,
            [100, 200, 400].map(Duration::from_millis),
            "each failure one step further"
        );
        failures.succeeded();
        assert_eq!(failures.failed(&schedule, 0.0), Duration::from_millis(100));
    }
}
