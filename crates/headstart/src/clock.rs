//! Time at the edge: the engine reads every timestamp it stores through a [`Clock`].

use std::time::{SystemTime, UNIX_EPOCH};

/// A source of timestamps in microseconds.
pub trait Clock: Send + Sync {
    /// Now, in microseconds.
    fn now_us(&self) -> i64;
}

/// Wall-clock time: microseconds since the Unix epoch. The default.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| i64::try_from(elapsed.as_micros()).unwrap_or(i64::MAX))
    }
}

/// Tokio's clock, counted from a base instant. Under a paused runtime (`tokio::time::pause`) this is virtual time,
/// which makes replays deterministic.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    base: tokio::time::Instant,
}

impl TokioClock {
    /// A clock reading 0 now.
    pub fn starting_now() -> Self {
        TokioClock {
            base: tokio::time::Instant::now(),
        }
    }

    /// A clock reading 0 at `base`.
    pub fn from_base(base: tokio::time::Instant) -> Self {
        TokioClock { base }
    }

    /// The instant this clock reads 0 at.
    pub fn base(&self) -> tokio::time::Instant {
        self.base
    }
}

impl Clock for TokioClock {
    fn now_us(&self) -> i64 {
        i64::try_from(self.base.elapsed().as_micros()).unwrap_or(i64::MAX)
    }
}
