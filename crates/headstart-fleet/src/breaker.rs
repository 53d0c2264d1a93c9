//! The worker's circuit breaker (issue 44): after `threshold` sessions in a row ended because the model's provider
//! was down, the worker stops claiming for a cool-down that doubles while the provider stays down (capped), then
//! probes with one claim; a model request that succeeds closes it. A pure state machine on an injected clock, so
//! that every transition is unit tested without a store, a model or a timer.

use std::time::Duration;

use headstart::store::Backoff;
use tokio::time::Instant;

/// When a worker stops claiming because its model's provider is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Sessions in a row that ended with a provider outage before the worker stops claiming (default 3; 0 never
    /// stops).
    pub threshold: u32,
    /// The cool-down after it opens: 5 s at first, doubled each time a probe fails, up to 5 min (the default).
    pub cool_down: Backoff,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            threshold: 3,
            cool_down: Backoff {
                first: Duration::from_secs(5),
                max: Duration::from_secs(300),
            },
        }
    }
}

/// Where the breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BreakerState {
    /// Claiming as usual.
    Closed,
    /// Not claiming before `until`.
    Open {
        /// The end of the cool-down.
        until: Instant,
    },
    /// The cool-down passed: one claim may probe the provider. `in_flight` once a probe session was claimed; no
    /// further claim until it ends or a model request succeeds.
    Probing {
        /// A probe session is running.
        in_flight: bool,
    },
}

/// What changed, to log once and to show on the worker's metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BreakerChange {
    /// It opened (or opened again after a failed probe): no claims for `cool_down`; `failures` in a row so far.
    Opened {
        /// Provider failures in a row.
        failures: u32,
        /// How long it stays open.
        cool_down: Duration,
    },
    /// The provider answered: claiming as usual again.
    Closed,
}

/// The breaker. See the [module documentation](self).
#[derive(Debug, Clone)]
pub(crate) struct Breaker {
    config: BreakerConfig,
    state: BreakerState,
    /// Sessions in a row that ended with a provider outage.
    failures: u32,
    /// How many times it opened since it was last closed (the cool-down's step).
    openings: u32,
}

impl Breaker {
    pub(crate) fn new(config: BreakerConfig) -> Self {
        Breaker {
            config,
            state: BreakerState::Closed,
            failures: 0,
            openings: 0,
        }
    }

    /// The state at `now`: an open breaker whose cool-down has passed is probing.
    pub(crate) fn state(&mut self, now: Instant) -> BreakerState {
        if let BreakerState::Open { until } = self.state {
            if now >= until {
                self.state = BreakerState::Probing { in_flight: false };
            }
        }
        self.state
    }

    /// How many sessions a worker with `room` may claim at `now`: all of its room when closed, one to probe, none
    /// while open or while a probe runs.
    pub(crate) fn room(&mut self, now: Instant, room: usize) -> usize {
        match self.state(now) {
            BreakerState::Closed => room,
            BreakerState::Probing { in_flight: false } => room.min(1),
            BreakerState::Probing { in_flight: true } | BreakerState::Open { .. } => 0,
        }
    }

    /// When an open breaker lets a claim through again.
    pub(crate) fn reopens_at(&self) -> Option<Instant> {
        match self.state {
            BreakerState::Open { until } => Some(until),
            _ => None,
        }
    }

    /// A claim made while probing took a session: it is the probe.
    pub(crate) fn probe_claimed(&mut self) {
        if let BreakerState::Probing { .. } = self.state {
            self.state = BreakerState::Probing { in_flight: true };
        }
    }

    /// A session ended without telling anything about the provider (it completed without asking it, was lost, or
    /// failed for a reason of its own): a probe it was may be made again.
    pub(crate) fn session_ended(&mut self) {
        if let BreakerState::Probing { in_flight: true } = self.state {
            self.state = BreakerState::Probing { in_flight: false };
        }
    }

    /// A model request succeeded: the provider is up.
    pub(crate) fn succeeded(&mut self) -> Option<BreakerChange> {
        self.failures = 0;
        self.openings = 0;
        match std::mem::replace(&mut self.state, BreakerState::Closed) {
            BreakerState::Closed => None,
            BreakerState::Open { .. } | BreakerState::Probing { .. } => Some(BreakerChange::Closed),
        }
    }

    /// A session ended because the provider was down, at `now`; `unit` in `[0, 1)` jitters the cool-down.
    pub(crate) fn failed(&mut self, now: Instant, unit: f64) -> Option<BreakerChange> {
        self.failures = self.failures.saturating_add(1);
        let open = match self.state {
            BreakerState::Closed => self.config.threshold > 0 && self.failures >= self.config.threshold,
            // A failed probe opens it again, for longer.
            BreakerState::Probing { .. } => true,
            // A session that was running when it opened: already open.
            BreakerState::Open { .. } => false,
        };
        if !open {
            return None;
        }
        self.openings = self.openings.saturating_add(1);
        let cool_down = self.config.cool_down.wait(self.openings, unit);
        self.state = BreakerState::Open { until: now + cool_down };
        Some(BreakerChange::Opened {
            failures: self.failures,
            cool_down,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn breaker() -> Breaker {
        Breaker::new(BreakerConfig::default())
    }

    #[test]
    fn it_opens_after_the_threshold_and_probes_after_the_cool_down() {
        let start = Instant::now();
        let mut breaker = breaker();
        assert_eq!(breaker.room(start, 8), 8);
        assert_eq!(breaker.failed(start, 0.0), None);
        assert_eq!(breaker.failed(start, 0.0), None);
        assert_eq!(breaker.room(start, 8), 8, "two failures: still claiming");
        assert_eq!(
            breaker.failed(start, 0.0),
            Some(BreakerChange::Opened {
                failures: 3,
                cool_down: 5 * SECOND
            })
        );
        assert_eq!(breaker.room(start + 4 * SECOND, 8), 0, "open");
        assert_eq!(breaker.reopens_at(), Some(start + 5 * SECOND));
        assert_eq!(breaker.room(start + 5 * SECOND, 8), 1, "one probe");
        breaker.probe_claimed();
        assert_eq!(breaker.room(start + 6 * SECOND, 8), 0, "while the probe runs");
        assert_eq!(breaker.succeeded(), Some(BreakerChange::Closed));
        assert_eq!(breaker.room(start + 6 * SECOND, 8), 8);
        assert_eq!(breaker.succeeded(), None, "one change, one report");
    }

    #[test]
    fn each_failed_probe_doubles_the_cool_down_up_to_the_cap() {
        let mut now = Instant::now();
        let mut breaker = breaker();
        for _ in 0..2 {
            breaker.failed(now, 0.0);
        }
        let mut cool_downs = Vec::new();
        for _ in 0..9 {
            match breaker.failed(now, 0.0) {
                Some(BreakerChange::Opened { cool_down, .. }) => cool_downs.push(cool_down.as_secs()),
                other => panic!("expected it to open, got {other:?}"),
            }
            now = breaker.reopens_at().expect("open");
            assert_eq!(breaker.room(now, 4), 1);
            breaker.probe_claimed();
        }
        assert_eq!(cool_downs, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        // A success starts the cool-downs over.
        breaker.succeeded();
        for _ in 0..3 {
            breaker.failed(now, 0.0);
        }
        assert_eq!(breaker.reopens_at(), Some(now + 5 * SECOND));
    }

    #[test]
    fn a_probe_that_tells_nothing_can_be_made_again_and_a_success_resets_the_count() {
        let start = Instant::now();
        let mut breaker = breaker();
        breaker.failed(start, 0.0);
        breaker.failed(start, 0.0);
        breaker.succeeded();
        assert_eq!(breaker.failed(start, 0.0), None, "the count started over");
        for _ in 0..2 {
            breaker.failed(start, 0.0);
        }
        let after = start + 5 * SECOND;
        assert_eq!(breaker.room(after, 2), 1);
        breaker.probe_claimed();
        breaker.session_ended();
        assert_eq!(breaker.room(after, 2), 1, "the probe told nothing: another one");
        assert_eq!(
            breaker.failed(after, 0.0).map(|_| ()),
            Some(()),
            "a failed probe opens it again"
        );
        assert_eq!(breaker.reopens_at(), Some(after + 10 * SECOND));
        assert_eq!(
            breaker.failed(after, 0.0),
            None,
            "already open: a late session's failure changes nothing"
        );
    }

    #[test]
    fn a_threshold_of_zero_never_opens() {
        let start = Instant::now();
        let mut breaker = Breaker::new(BreakerConfig {
            threshold: 0,
            ..BreakerConfig::default()
        });
        for _ in 0..100 {
            assert_eq!(breaker.failed(start, 0.0), None);
        }
        assert_eq!(breaker.room(start, 3), 3);
    }
}
