//! When a worker with room claims: at its poll interval, and at once when woken (a wake-up from the queue, a
//! session of its own that ended), but never before the wait after a store failure has passed. A pure schedule,
//! so that the coalescing of wake-ups is unit tested without a store or a clock.
//!
//! Coalescing: a claim answers every wake-up that came before it began (it takes up to the worker's room from
//! everything committed by then), so wake-ups are a flag, not a count. However many arrive while the worker is
//! busy, full, or claiming, they make one claim, not one each.

use std::time::Duration;

use tokio::time::Instant;

/// A worker's claim timing. See the [module documentation](self).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClaimSchedule {
    poll_interval: Duration,
    /// The next poll.
    next_poll: Instant,
    /// Woken since the last claim began.
    woken: bool,
    /// The store is not tried before then.
    retry_at: Instant,
}

impl ClaimSchedule {
    /// A schedule polling every `poll_interval`, whose first claim is due at `now`.
    pub(crate) fn new(now: Instant, poll_interval: Duration) -> Self {
        ClaimSchedule {
            poll_interval,
            next_poll: now,
            woken: false,
            retry_at: now,
        }
    }

    /// A session may be waiting: claim at the next chance.
    pub(crate) fn wake(&mut self) {
        self.woken = true;
    }

    /// Whether a worker with room claims at `now`.
    pub(crate) fn due(&self, now: Instant) -> bool {
        now >= self.retry_at && (self.woken || now >= self.next_poll)
    }

    /// When a worker with room claims next, unless woken before.
    pub(crate) fn next(&self) -> Instant {
        if self.woken {
            self.retry_at
        } else {
            self.next_poll.max(self.retry_at)
        }
    }

    /// A claim begins at `now`: it answers every wake-up so far, and the next poll is an interval away.
    pub(crate) fn claiming(&mut self, now: Instant) {
        self.woken = false;
        self.next_poll = now + self.poll_interval;
    }

    /// The claim failed: no claim before `at`, and one then.
    pub(crate) fn claim_failed(&mut self, at: Instant) {
        self.retry_at = at;
        self.next_poll = at;
    }

    /// A renewal failed: the store is not tried before `at` (the poll waits for it too).
    pub(crate) fn renewal_failed(&mut self, at: Instant) {
        self.retry_at = at;
    }

    /// No claim before `at` (the worker's breaker is open), whatever wakes it; a later hold already set stands.
    pub(crate) fn hold_until(&mut self, at: Instant) {
        self.retry_at = self.retry_at.max(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLL: Duration = Duration::from_secs(5);

    #[test]
    fn a_burst_of_wake_ups_is_one_claim() {
        let start = Instant::now();
        let mut schedule = ClaimSchedule::new(start, POLL);
        assert!(schedule.due(start), "the first claim is at once");
        schedule.claiming(start);
        assert!(!schedule.due(start));
        let mut claims = 0;
        // 200 submits' wake-ups arrive before the worker looks again; it then claims as long as a claim is due.
        for _ in 0..200 {
            schedule.wake();
        }
        let now = start + Duration::from_millis(3);
        while schedule.due(now) {
            schedule.claiming(now);
            claims += 1;
        }
        assert_eq!(claims, 1, "200 wake-ups before a claim make one claim");
        assert_eq!(schedule.next(), now + POLL, "then the poll resumes");
    }

    #[test]
    fn a_wake_up_during_a_claim_makes_one_more() {
        let start = Instant::now();
        let mut schedule = ClaimSchedule::new(start, POLL);
        schedule.claiming(start);
        // Wake-ups that come while the claim is in flight may be sessions committed after its snapshot.
        schedule.wake();
        schedule.wake();
        let after = start + Duration::from_millis(2);
        assert!(schedule.due(after));
        assert_eq!(schedule.next(), start, "at once");
        schedule.claiming(after);
        assert!(!schedule.due(after), "and only one");
    }

    #[test]
    fn without_wake_ups_it_polls() {
        let start = Instant::now();
        let mut schedule = ClaimSchedule::new(start, POLL);
        schedule.claiming(start);
        assert_eq!(schedule.next(), start + POLL);
        assert!(!schedule.due(start + POLL - Duration::from_millis(1)));
        assert!(schedule.due(start + POLL));
    }

    #[test]
    fn a_wake_up_waits_for_the_store_retry() {
        let start = Instant::now();
        let mut schedule = ClaimSchedule::new(start, POLL);
        schedule.claiming(start);
        let retry_at = start + Duration::from_millis(400);
        schedule.claim_failed(retry_at);
        schedule.wake();
        assert!(!schedule.due(start + Duration::from_millis(10)), "not before the wait");
        assert_eq!(schedule.next(), retry_at);
        assert!(schedule.due(retry_at));
    }

    #[test]
    fn a_failed_claim_is_tried_again_after_its_wait_even_unwoken() {
        let start = Instant::now();
        let mut schedule = ClaimSchedule::new(start, POLL);
        schedule.claiming(start);
        let retry_at = start + Duration::from_millis(100);
        schedule.claim_failed(retry_at);
        assert_eq!(schedule.next(), retry_at, "sooner than the poll");
    }

    #[test]
    fn a_failed_renewal_holds_claims_back_but_does_not_bring_the_poll_forward() {
        let start = Instant::now();
        let mut schedule = ClaimSchedule::new(start, POLL);
        schedule.claiming(start);
        schedule.renewal_failed(start + Duration::from_secs(1));
        assert_eq!(schedule.next(), start + POLL, "the poll, later than the wait");
        schedule.renewal_failed(start + Duration::from_secs(8));
        assert_eq!(
            schedule.next(),
            start + Duration::from_secs(8),
            "the wait, later than the poll"
        );
        schedule.wake();
        assert!(!schedule.due(start + Duration::from_secs(7)));
    }
}
