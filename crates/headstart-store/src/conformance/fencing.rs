//! Conformance cases: fencing (contract §7.5): writes without the session's lease are refused.

use headstart_core::model::{ToolResultMessage, UserMessage};

use super::data::{call, commit_one, finished, key, result, store_with_session};
use super::fixture::Fixture;
use super::support::{info, is_fenced, snapshot, LONG, PAST_SHORT, SHORT};
use crate::types::{RunEnd, RunOutcome, RunState, SessionId, SessionState};
use crate::{Claim, SessionEnd, SessionQueue, StoreError, TranscriptStore};

/// Two workers on one session: once the second claims it (the first's lease expired), every write of the first
/// is fenced — counted here, one per kind of write — and changes nothing; the second writes freely.
pub async fn a_later_claim_fences_every_write_of_the_earlier_owner<F: Fixture>(fixture: &F) {
    let queue_a = fixture.store();
    let queue_b = fixture.connect().await;
    let session = queue_a.submit(&UserMessage::new("go"), 1).await.expect("submit");
    let [claim_a] = <[Claim; 1]>::try_from(queue_a.claim("worker-a", SHORT, 1).await.expect("claim a"))
        .expect("worker a claims the session");
    let lease_a = claim_a.lease;
    let worker_a = queue_a.fenced(&lease_a);
    // Worker a commits a call and starts it: its writes go through while it holds the lease.
    let c1 = call("c1", "lookup");
    assert_eq!(commit_one(worker_a.as_ref(), &session, "c1").await, Ok(2));
    worker_a.mark_started(&session, &key("c1"), 11).await.expect("started");

    // Worker a stalls past its lease; worker b takes the session over.
    tokio::time::sleep(PAST_SHORT).await;
    let [claim_b] = <[Claim; 1]>::try_from(queue_b.claim("worker-b", LONG, 1).await.expect("claim b"))
        .expect("worker b claims the expired session");
    assert_eq!(claim_b.previous_owner.as_deref(), Some("worker-a"));
    assert_eq!(claim_b.lease.epoch, lease_a.epoch + 1);
    let worker_b = queue_b.fenced(&claim_b.lease);
    let before = snapshot(&queue_b, &session).await;

    // The zombie resumes: each of its writes is fenced.
    let c2 = call("c2", "lookup");
    let outcomes = [
        is_fenced(&worker_a.append_user(&session, &UserMessage::new("zombie"), 20).await),
        is_fenced(&commit_one(worker_a.as_ref(), &session, "c2").await),
        is_fenced(&worker_a.mark_started(&session, &key("c2"), 21).await),
        is_fenced(
            &worker_a
                .append_tool_result(&session, 0, &result(&c1, "late"), finished(Some(11)), 22)
                .await,
        ),
        is_fenced(
            &worker_a
                .append_tool_result(&session, 0, &ToolResultMessage::error(&c2, "not executed"), None, 23)
                .await,
        ),
        is_fenced(&queue_a.finish(&lease_a, SessionEnd::Completed).await),
        is_fenced(&queue_a.finish(&lease_a, SessionEnd::Released).await),
    ];
    let fenced = outcomes.iter().filter(|fenced| **fenced).count();
    assert_eq!(fenced, outcomes.len(), "fenced writes: {outcomes:?}");
    assert!(
        queue_a
            .renew(std::slice::from_ref(&lease_a), LONG)
            .await
            .expect("renew")
            .is_empty(),
        "a lost lease renews"
    );
    assert_eq!(
        snapshot(&queue_b, &session).await,
        before,
        "a fenced write changed something"
    );
    let err = worker_a
        .append_user(&session, &UserMessage::new("zombie"), 24)
        .await
        .expect_err("fenced");
    let message = err.to_string();
    assert!(
        message.contains("worker-a") && message.contains("worker-b") && message.contains(&session.0),
        "{message}"
    );

    // The new owner recovers the call the zombie left and goes on.
    let unfinished = worker_b.unfinished_calls(&session).await.expect("unfinished");
    assert_eq!(unfinished.len(), 1);
    let end = RunEnd {
        state: RunState::Cancelled,
        outcome: RunOutcome::Interrupted,
        started_at_us: unfinished[0].run.started_at_us,
    };
    assert_eq!(
        worker_b
            .append_tool_result(
                &session,
                0,
                &ToolResultMessage::error(&c1, "interrupted"),
                Some(end),
                30
            )
            .await,
        Ok(3)
    );
    assert_eq!(commit_one(worker_b.as_ref(), &session, "c2").await, Ok(4));
    queue_b
        .finish(&claim_b.lease, SessionEnd::Completed)
        .await
        .expect("complete");
    let info = info(&queue_b, &session).await;
    assert_eq!(
        (info.state, info.owner.as_deref(), info.epoch),
        (SessionState::Completed, Some("worker-b"), 2)
    );
}

/// Writes without the lease are refused: a handle without a lease on a running session (fenced), a fenced handle
/// on another session or creating one (conflicts). A session nobody holds takes writes from any handle.
pub async fn writes_without_the_lease_are_refused<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let held = store.submit(&UserMessage::new("held"), 1).await.expect("submit");
    let pending = store.submit(&UserMessage::new("pending"), 2).await.expect("submit");
    let unqueued = store_with_session(&store).await;
    let [claim] = <[Claim; 1]>::try_from(store.claim("w1", LONG, 1).await.expect("claim")).expect("one claim");
    assert_eq!(claim.lease.session, held);
    let before = snapshot(&store, &held).await;

    let err = store
        .append_user(&held, &UserMessage::new("admin"), 3)
        .await
        .expect_err("an unleased write to a held session");
    assert!(matches!(&err, StoreError::Fenced(m) if m.contains("w1")), "{err:?}");
    assert!(is_fenced(&commit_one(&store, &held, "c1").await));
    assert_eq!(snapshot(&store, &held).await, before);

    let worker = store.fenced(&claim.lease);
    for other in [&pending, &unqueued] {
        let err = worker
            .append_user(other, &UserMessage::new("elsewhere"), 4)
            .await
            .expect_err("a fenced handle writing another session");
        assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    }
    let err = worker
        .create_session(5)
        .await
        .expect_err("a fenced handle creating a session");
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    // Reads pass through a fenced handle, for any session.
    assert_eq!(worker.load_log(&pending).await.expect("read").len(), 1);

    // Sessions no worker holds take unleased writes.
    assert_eq!(store.append_user(&pending, &UserMessage::new("more"), 6).await, Ok(2));
    assert_eq!(store.append_user(&unqueued, &UserMessage::new("more"), 7).await, Ok(2));
    assert_eq!(worker.append_user(&held, &UserMessage::new("mine"), 8).await, Ok(2));
}

/// A take-over fences the earlier holder at once, lease or no lease: a session created under an id (unqueued)
/// becomes `running` under its taker, a second take-over (a new attempt) refuses the first's writes, claims skip the
/// session while its lease runs, and an unknown session is `NoSession`.
pub async fn a_take_over_fences_the_earlier_holder_at_once<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let other = fixture.connect().await;
    let session = SessionId("0193-take-over".to_owned());
    store.create_session_with_id(&session, 1).await.expect("create");
    let first = store.take_over(&session, "attempt-1", LONG).await.expect("take over");
    assert_eq!(first.previous_owner, None, "the session was not running");
    let attempt_1 = store.fenced(&first.lease);
    assert_eq!(commit_one(attempt_1.as_ref(), &session, "c1").await, Ok(1));
    assert!(
        store.claim("worker", LONG, 10).await.expect("claim").is_empty(),
        "a taken session is not claimable while its lease runs"
    );

    // A new attempt takes it over while the first's lease still runs: no waiting for an expiry.
    let second = other
        .take_over(&session, "attempt-2", LONG)
        .await
        .expect("take over again");
    assert_eq!(second.previous_owner.as_deref(), Some("attempt-1"));
    assert_eq!(second.lease.epoch, first.lease.epoch + 1);
    let before = snapshot(&other, &session).await;
    let outcomes = [
        is_fenced(&attempt_1.mark_started(&session, &key("c1"), 2).await),
        is_fenced(&commit_one(attempt_1.as_ref(), &session, "c2").await),
        is_fenced(
            &attempt_1
                .append_tool_result(&session, 0, &result(&call("c1", "lookup"), "late"), None, 3)
                .await,
        ),
        is_fenced(&store.finish(&first.lease, SessionEnd::Completed).await),
    ];
    assert!(outcomes.iter().all(|fenced| *fenced), "fenced writes: {outcomes:?}");
    assert_eq!(
        snapshot(&other, &session).await,
        before,
        "a fenced write changed something"
    );
    let attempt_2 = other.fenced(&second.lease);
    attempt_2
        .mark_started(&session, &key("c1"), 4)
        .await
        .expect("the new holder writes");
    other
        .finish(&second.lease, SessionEnd::Completed)
        .await
        .expect("complete");
    let info = info(&other, &session).await;
    assert_eq!(
        (info.state, info.owner.as_deref(), info.epoch),
        (SessionState::Completed, Some("attempt-2"), second.lease.epoch)
    );
    // A finished session can be taken over again (the next turn).
    let third = store
        .take_over(&session, "attempt-3", LONG)
        .await
        .expect("the next turn");
    assert_eq!(third.previous_owner, None);
    assert_eq!(third.lease.epoch, second.lease.epoch + 1);

    let missing = store
        .take_over(&SessionId("no-such-session".to_owned()), "attempt", LONG)
        .await
        .expect_err("no session");
    assert!(matches!(missing, StoreError::NoSession(_)), "{missing:?}");
}
