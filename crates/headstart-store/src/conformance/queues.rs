//! Conformance cases: queues and retries (issue 44): a worker claims only its queues' sessions, and a session
//! released for a retry waits out its backoff, counts its attempts and keeps its last error until it ends.

use std::time::Duration;

use headstart_core::model::UserMessage;

use super::fixture::Fixture;
use super::support::{claim_exactly, info, LONG};
use crate::types::{SessionId, SessionSettings, SessionState};
use crate::{QueueName, SessionEnd, SessionQueue};

fn queue(name: &str) -> QueueName {
    QueueName::new(name).expect("a valid queue name")
}

fn in_queue(name: &str) -> SessionSettings {
    SessionSettings {
        queue: Some(queue(name)),
        ..SessionSettings::default()
    }
}

/// A claim takes sessions of the queues it names and no others; a session's queue is listed and carried by its
/// claim; the default queue is `None` in the settings, whether named or not.
pub async fn a_claim_takes_only_sessions_of_its_queues<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let prompt = UserMessage::new("work");
    let gpu = store
        .submit_with(&prompt, &in_queue("gpu"), 1)
        .await
        .expect("submit gpu");
    let cpu = store
        .submit_with(&prompt, &in_queue("cpu"), 2)
        .await
        .expect("submit cpu");
    let plain = store.submit(&prompt, 3).await.expect("submit");
    let named_default = store
        .submit_with(&prompt, &in_queue(QueueName::DEFAULT), 4)
        .await
        .expect("submit to default by name");
    assert_eq!(info(&store, &gpu).await.settings.queue_name(), "gpu");
    assert_eq!(info(&store, &plain).await.settings, SessionSettings::default());
    assert_eq!(
        info(&store, &named_default).await.settings,
        SessionSettings::default(),
        "the default queue reads back as none"
    );

    let none = store
        .claim_from("w0", &[], LONG, 10)
        .await
        .expect("claim from no queue");
    assert!(none.is_empty(), "no queues, no claims");
    let unknown = store
        .claim_from("w0", &[queue("nobody")], LONG, 10)
        .await
        .expect("claim from an empty queue");
    assert!(unknown.is_empty());
    let claims = store
        .claim_from("w1", &[queue("gpu")], LONG, 10)
        .await
        .expect("claim gpu");
    let claimed: Vec<(&SessionId, &str)> = claims
        .iter()
        .map(|claim| (&claim.lease.session, claim.settings.queue_name()))
        .collect();
    assert_eq!(claimed, [(&gpu, "gpu")]);
    // The default queue alone (`claim`): the two default sessions, never cpu's.
    claim_exactly(&store, "w2", LONG, 10, &[&plain, &named_default]).await;
    let claims = store
        .claim_from("w3", &[queue("cpu"), queue("gpu")], LONG, 10)
        .await
        .expect("claim cpu and gpu");
    let claimed: Vec<&SessionId> = claims.iter().map(|claim| &claim.lease.session).collect();
    assert_eq!(claimed, [&cpu], "gpu's is held");
}

/// `SessionEnd::Retry` makes the session pending again with one more attempt and its reason as the last error; no
/// claim takes it before its backoff; once claimable it is claimed with its attempts and keeps its last error while
/// it runs; completing it clears the error, not the count.
pub async fn a_retry_waits_its_backoff_and_counts_its_attempts<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let prompt = UserMessage::new("work");
    let later = store.submit(&prompt, 1).await.expect("submit");
    let soon = store.submit(&prompt, 2).await.expect("submit");
    let claims = claim_exactly(&store, "w1", LONG, 10, &[&later, &soon]).await;
    assert!(claims.iter().all(|claim| claim.attempts == 0));
    let lease_of = |session: &SessionId| {
        claims
            .iter()
            .find(|claim| &claim.lease.session == session)
            .map(|claim| claim.lease.clone())
            .expect("claimed")
    };
    let retry = |reason: &str, after| SessionEnd::Retry {
        reason: reason.to_owned(),
        after,
    };
    store
        .finish(&lease_of(&later), retry("HTTP 500 from the provider", LONG))
        .await
        .expect("release later for a retry");
    store
        .finish(&lease_of(&soon), retry("connection refused", Duration::ZERO))
        .await
        .expect("release soon for a retry");
    let waiting = info(&store, &later).await;
    assert_eq!(
        (
            waiting.state,
            waiting.owner.as_deref(),
            waiting.attempts,
            waiting.failure.as_deref()
        ),
        (SessionState::Pending, None, 1, Some("HTTP 500 from the provider"))
    );
    let not_before = waiting.not_before_us.expect("a backoff is stored");
    let lease_ends = claims[0].lease.expires_at_us;
    assert!(
        not_before >= lease_ends,
        "the backoff (600 s) ends after the claim's lease (600 s from an earlier instant): {not_before} < {lease_ends}"
    );

    // Only the session whose backoff has passed is claimable.
    let again = claim_exactly(&store, "w2", LONG, 10, &[&soon]).await;
    assert_eq!(again[0].attempts, 1);
    let running = info(&store, &soon).await;
    assert_eq!(
        (running.state, running.failure.as_deref(), running.not_before_us),
        (SessionState::Running, Some("connection refused"), None),
        "a retried session keeps its last error while it runs"
    );
    store
        .finish(&again[0].lease, retry("connection refused again", Duration::ZERO))
        .await
        .expect("a second retry");
    let third = claim_exactly(&store, "w3", LONG, 10, &[&soon]).await;
    assert_eq!(third[0].attempts, 2, "attempts add up");
    store
        .finish(&third[0].lease, SessionEnd::Completed)
        .await
        .expect("complete");
    let done = info(&store, &soon).await;
    assert_eq!(
        (done.state, done.attempts, done.failure, done.not_before_us),
        (SessionState::Completed, 2, None, None)
    );
}
