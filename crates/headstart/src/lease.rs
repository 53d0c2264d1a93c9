//! [`LeaseGuard`]: what a host that holds its sessions by leases (a fleet's worker) tells the engine before each
//! call's `execute` (contract §7.5.4).

/// Asked by the engine immediately before each call's `execute` (live or re-executed by recovery): may the
/// worker still start a side effect for this session? Configure it with
/// [`EngineBuilder::lease_guard`](crate::EngineBuilder::lease_guard).
///
/// A worker answers from its own monotonic clock ([`Lease::may_have_expired`](headstart_store::Lease)), never
/// from the database: the check must be instant, and a lease that may have expired by the worker's clock may
/// already be another worker's.
pub trait LeaseGuard: Send + Sync {
    /// `true` when the lease may have expired: the call does not start.
    fn may_have_expired(&self) -> bool;
}

impl<F> LeaseGuard for F
where
    F: Fn() -> bool + Send + Sync,
{
    fn may_have_expired(&self) -> bool {
        self()
    }
}
