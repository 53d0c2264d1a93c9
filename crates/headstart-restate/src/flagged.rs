//! Telling a replay from a fresh attempt: a journal entry's closure that reports whether it ran.
//!
//! Restate answers a replayed `ctx.run` from the journal without running its closure. So a closure that runs means
//! the invocation is past the end of its journal; one that does not means an earlier attempt wrote the entry, and
//! whatever that attempt held in memory (a model stream, a body in progress) died with it.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Whether a wrapped closure ran.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ran(Arc<AtomicBool>);

impl Ran {
    /// `closure`, noting here when it runs: pass the result to `ctx.run`, then ask [`Ran::now`].
    pub(crate) fn wrap<F, Fut>(&self, closure: F) -> impl FnOnce() -> Fut + Send + 'static
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future + Send + 'static,
    {
        let flag = Arc::clone(&self.0);
        move || {
            flag.store(true, Ordering::SeqCst);
            closure()
        }
    }

    /// Whether the closure ran in this attempt (`false`: its value came from the journal).
    pub(crate) fn now(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closure_that_runs_is_noted_and_one_that_does_not_is_not() {
        let ran = Ran::default();
        let closure = ran.wrap(|| async { 7 });
        assert!(!ran.now());
        assert_eq!(closure().await, 7);
        assert!(ran.now());
        let replayed = Ran::default();
        drop(replayed.wrap(|| async { 7 }));
        assert!(!replayed.now());
    }
}
