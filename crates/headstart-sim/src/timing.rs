//! How simulated things wait for their instant.
//!
//! tokio's timers have millisecond resolution: a sleep ends at the first timer tick after its deadline, up to a
//! millisecond late, plus the time the runtime takes to notice. On the virtual clock that costs nothing (time jumps
//! to the deadline); on the wall clock a scenario whose steps are a chain of timers drifts by up to a millisecond
//! per link, and the drift, not the engine, would dominate what a wall-clock replay measures. So wall-clock replays
//! sleep to a millisecond short of the deadline and yield until it has passed. Only there: on the paused clock a
//! yielding task keeps the runtime busy and time would never advance.

use tokio::time::{Duration, Instant};

/// How a simulated model or tool waits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Timing {
    /// tokio's timers as they are: for the virtual clock, and for many concurrent simulations (benchmarks).
    #[default]
    Timer,
    /// A timer to a millisecond short of the deadline, then yields until it: wall-clock replays.
    Precise,
}

/// The last stretch before a deadline spent yielding instead of sleeping.
const SPIN: Duration = Duration::from_millis(2);

impl Timing {
    /// Waits until `deadline`.
    pub async fn sleep_until(self, deadline: Instant) {
        match self {
            Timing::Timer => tokio::time::sleep_until(deadline).await,
            Timing::Precise => {
                if let Some(early) = deadline.checked_sub(SPIN) {
                    tokio::time::sleep_until(early).await;
                }
                while Instant::now() < deadline {
                    tokio::task::yield_now().await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn precise_waits_never_end_before_their_deadline() {
        for ms in [0, 1, 3] {
            let deadline = Instant::now() + Duration::from_millis(ms);
            Timing::Precise.sleep_until(deadline).await;
            assert!(Instant::now() >= deadline, "{ms} ms");
        }
    }

    #[cfg(feature = "virtual-clock")]
    #[tokio::test(start_paused = true)]
    async fn timer_waits_land_on_the_virtual_deadline() {
        let deadline = Instant::now() + Duration::from_millis(7);
        Timing::Timer.sleep_until(deadline).await;
        assert_eq!(Instant::now(), deadline);
    }
}
