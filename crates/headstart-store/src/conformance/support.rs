//! What the conformance cases share: lease durations, skipping a case, and looks at what a store holds.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::types::{SessionId, SessionInfo};
use crate::{Claim, SessionQueue, StoreError, TranscriptStore};

/// A lease long enough never to expire during a case.
pub(super) const LONG: Duration = Duration::from_secs(600);
/// A lease that has certainly expired after [`PAST_SHORT`].
pub(super) const SHORT: Duration = Duration::from_millis(50);
/// Longer than [`SHORT`] with room for a coarse database clock (SQLite's has millisecond resolution).
pub(super) const PAST_SHORT: Duration = Duration::from_millis(200);

pub(super) fn skip(case: &str, why: &str) {
    eprintln!("conformance case {case} skipped: {why}");
}

/// The session's row in [`TranscriptStore::sessions`].
pub(super) async fn info<S: TranscriptStore + ?Sized>(store: &S, session: &SessionId) -> SessionInfo {
    store
        .sessions()
        .await
        .expect("sessions")
        .into_iter()
        .find(|info| &info.id == session)
        .expect("the session is listed")
}

/// Everything stored about a session, to show that a refused write changed nothing.
pub(super) async fn snapshot<S: TranscriptStore + ?Sized>(store: &S, session: &SessionId) -> String {
    let log = store.load_log(session).await.expect("log");
    let runs = store.tool_runs(session).await.expect("runs");
    let info = info(store, session).await;
    format!("{log:?}\n{runs:?}\n{info:?}")
}

/// Claims exactly the sessions in `expected` (any order) for `owner`.
pub(super) async fn claim_exactly<S: SessionQueue + ?Sized>(
    store: &S,
    owner: &str,
    lease: Duration,
    limit: usize,
    expected: &[&SessionId],
) -> Vec<Claim> {
    let claims = store.claim(owner, lease, limit).await.expect("claim");
    let got: BTreeSet<&SessionId> = claims.iter().map(|claim| &claim.lease.session).collect();
    let want: BTreeSet<&SessionId> = expected.iter().copied().collect();
    assert_eq!(got, want, "claimed by {owner}");
    claims
}

pub(super) fn is_fenced<T: std::fmt::Debug>(outcome: &Result<T, StoreError>) -> bool {
    matches!(outcome, Err(StoreError::Fenced(_)))
}
