//! Conformance cases: the work queue (contract §7.5): submit, claim, lease expiry and renewal, finish.

use std::collections::BTreeSet;

use headstart_core::model::{Message, UserMessage};

use super::fixture::Fixture;
use super::support::{claim_exactly, info, is_fenced, LONG, PAST_SHORT, SHORT};
use crate::types::{SessionId, SessionSettings, SessionState};
use crate::{Lease, SessionEnd, SessionQueue, StoreError, TranscriptStore};

/// `submit` makes a pending session holding its prompt as seq 1, in one write.
pub async fn submit_makes_a_pending_session_with_its_prompt<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let session = store.submit(&UserMessage::new("plan a trip"), 5).await.expect("submit");
    let log = store.load_log(&session).await.expect("log");
    assert_eq!(log.len(), 1);
    assert_eq!((log[0].seq, log[0].at_us), (1, 5));
    assert_eq!(log[0].message, Message::User(UserMessage::new("plan a trip")));
    let info = info(&store, &session).await;
    assert_eq!(
        (
            info.state,
            info.owner,
            info.epoch,
            info.lease_expires_at_us,
            info.created_at_us,
            info.messages
        ),
        (SessionState::Pending, None, 0, None, 5, 1)
    );
    assert_eq!(uuid::Uuid::parse_str(&session.0).map(|id| id.get_version_num()), Ok(7));
}

/// `submit_with` stores a session's own settings beside it: the listing shows them, on any handle, and every claim
/// of the session carries them, a claim after a release too; `submit` and unqueued sessions have none.
pub async fn submitted_settings_are_listed_and_claimed_with_the_session<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let own = SessionSettings {
        system: Some("Answer in one line.\n\"Quoted\", ünïcode ✓".to_owned()),
        model: Some("gpt-4.1-mini".to_owned()),
        queue: None,
    };
    let model_only = SessionSettings {
        system: None,
        model: Some("m2".to_owned()),
        queue: None,
    };
    let with_both = store
        .submit_with(&UserMessage::new("a"), &own, 1)
        .await
        .expect("submit with settings");
    let with_model = store
        .submit_with(&UserMessage::new("b"), &model_only, 2)
        .await
        .expect("submit with a model");
    let plain = store.submit(&UserMessage::new("c"), 3).await.expect("submit");
    let unqueued = store.create_session(4).await.expect("unqueued");
    let other = fixture.connect().await;
    for (session, settings) in [
        (&with_both, &own),
        (&with_model, &model_only),
        (&plain, &SessionSettings::default()),
        (&unqueued, &SessionSettings::default()),
    ] {
        assert_eq!(&info(&store, session).await.settings, settings, "{session}");
        assert_eq!(
            &info(&other, session).await.settings,
            settings,
            "{session} on another handle"
        );
    }
    assert!(SessionSettings::default().is_empty() && !model_only.is_empty());

    let claims = claim_exactly(&store, "w1", LONG, 10, &[&with_both, &with_model, &plain]).await;
    let claimed: Vec<(&SessionId, &SessionSettings)> = claims
        .iter()
        .map(|claim| (&claim.lease.session, &claim.settings))
        .collect();
    assert_eq!(
        claimed,
        [
            (&with_both, &own),
            (&with_model, &model_only),
            (&plain, &SessionSettings::default())
        ]
    );
    store
        .finish(&claims[0].lease, SessionEnd::Released)
        .await
        .expect("release");
    let again = claim_exactly(&store, "w2", LONG, 10, &[&with_both]).await;
    assert_eq!(again[0].settings, own, "a later claim carries them too");
}

/// Claims hand out pending sessions oldest first, at most `limit` at a time, each once while its lease holds,
/// never unqueued ones; each claim sets owner, epoch 1 and a lease on the database's clock.
pub async fn claims_take_claimable_sessions_oldest_first_up_to_the_limit<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let unqueued = store.create_session(0).await.expect("unqueued");
    let mut pending = Vec::new();
    for n in 0..5 {
        pending.push(
            store
                .submit(&UserMessage::new(format!("p{n}")), 10 + n)
                .await
                .expect("submit"),
        );
    }
    assert!(store.claim("w1", LONG, 0).await.expect("limit 0").is_empty());
    let err = store.claim(" ", LONG, 1).await.expect_err("a nameless worker");
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");

    let before_us = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH))
        .map(|since| since.as_micros() as i64)
        .unwrap_or(0);
    let first = store.claim("w1", LONG, 2).await.expect("claim");
    let claimed: Vec<&SessionId> = first.iter().map(|claim| &claim.lease.session).collect();
    assert_eq!(claimed, vec![&pending[0], &pending[1]], "oldest first, up to the limit");
    for claim in &first {
        assert_eq!((claim.lease.owner.as_str(), claim.lease.epoch), ("w1", 1));
        assert_eq!(claim.previous_owner, None);
        assert!(!claim.lease.may_have_expired());
        // The expiry is on the database's clock, about now + the lease (the database runs on this machine).
        let ahead = claim.lease.expires_at_us - before_us;
        let lease_us = LONG.as_micros() as i64;
        assert!(
            (lease_us - 60_000_000..=lease_us + 60_000_000).contains(&ahead),
            "expiry {} µs ahead",
            ahead
        );
        let info = info(&store, &claim.lease.session).await;
        assert_eq!(
            (info.state, info.owner.as_deref(), info.epoch, info.lease_expires_at_us),
            (SessionState::Running, Some("w1"), 1, Some(claim.lease.expires_at_us))
        );
    }
    claim_exactly(&store, "w2", LONG, 10, &[&pending[2], &pending[3], &pending[4]]).await;
    claim_exactly(&store, "w3", LONG, 10, &[]).await;
    assert_eq!(info(&store, &unqueued).await.state, SessionState::Unqueued);
}

/// A lease that expires makes its session claimable again (by anyone, the previous owner reported); renewing
/// keeps it, even after expiry when nobody claimed it meanwhile; a lost lease does not renew.
pub async fn an_expired_lease_makes_the_session_claimable_again<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let session = store.submit(&UserMessage::new("go"), 1).await.expect("submit");

    // Renewed in time: nobody else gets it.
    let first = claim_exactly(&store, "w1", LONG, 1, &[&session]).await;
    let renewed = store
        .renew(std::slice::from_ref(&first[0].lease), LONG)
        .await
        .expect("renew");
    assert_eq!(renewed.len(), 1);
    assert_eq!((renewed[0].epoch, renewed[0].owner.as_str()), (1, "w1"));
    assert!(renewed[0].expires_at_us >= first[0].lease.expires_at_us);
    claim_exactly(&store, "w2", LONG, 1, &[]).await;

    // Renewing with a short lease lets it expire; an expired lease nobody claimed renews (nobody else wrote).
    let short = store.renew(&renewed, SHORT).await.expect("renew short");
    assert_eq!(short.len(), 1);
    tokio::time::sleep(PAST_SHORT).await;
    assert!(
        short[0].may_have_expired(),
        "the worker's own clock says the lease may be gone"
    );
    let revived = store.renew(&short, LONG).await.expect("renew after expiry");
    assert_eq!(revived.len(), 1);
    assert!(!revived[0].may_have_expired());
    claim_exactly(&store, "w2", LONG, 1, &[]).await;

    // Expired and claimed by another: the session moves on, and the old lease is lost.
    let expiring = store.renew(&revived, SHORT).await.expect("renew short");
    tokio::time::sleep(PAST_SHORT).await;
    let taken = claim_exactly(&store, "w2", LONG, 5, &[&session]).await;
    assert_eq!(taken[0].previous_owner.as_deref(), Some("w1"));
    assert_eq!(taken[0].lease.epoch, 2);
    assert!(store.renew(&expiring, LONG).await.expect("renew lost").is_empty());
    let both = store
        .renew(&[expiring[0].clone(), taken[0].lease.clone()], LONG)
        .await
        .expect("renew two");
    assert_eq!(both.len(), 1, "only the held lease renews");
    assert_eq!((both[0].owner.as_str(), both[0].epoch), ("w2", 2));
    let info = info(&store, &session).await;
    assert_eq!((info.owner.as_deref(), info.epoch), (Some("w2"), 2));
}

/// `finish` completes, fails or releases a held session; afterwards the lease writes nothing; a released session
/// is claimed again with a higher epoch.
pub async fn finish_completes_fails_or_releases<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let mut sessions = Vec::new();
    for n in 0..3 {
        sessions.push(
            store
                .submit(&UserMessage::new(format!("s{n}")), n)
                .await
                .expect("submit"),
        );
    }
    let claims = claim_exactly(&store, "w1", LONG, 3, &[&sessions[0], &sessions[1], &sessions[2]]).await;
    let lease = |session: &SessionId| -> Lease {
        claims
            .iter()
            .find(|claim| &claim.lease.session == session)
            .map(|claim| claim.lease.clone())
            .expect("claimed")
    };
    store
        .finish(&lease(&sessions[0]), SessionEnd::Completed)
        .await
        .expect("complete");
    store
        .finish(&lease(&sessions[1]), SessionEnd::Failed("model unavailable".to_owned()))
        .await
        .expect("fail");
    store
        .finish(&lease(&sessions[2]), SessionEnd::Released)
        .await
        .expect("release");

    let completed = info(&store, &sessions[0]).await;
    assert_eq!(
        (
            completed.state,
            completed.owner.as_deref(),
            completed.lease_expires_at_us,
            completed.failure
        ),
        (SessionState::Completed, Some("w1"), None, None)
    );
    let failed = info(&store, &sessions[1]).await;
    assert_eq!(
        (failed.state, failed.owner.as_deref(), failed.failure.as_deref()),
        (SessionState::Failed, Some("w1"), Some("model unavailable"))
    );
    let released = info(&store, &sessions[2]).await;
    assert_eq!(
        (released.state, released.owner, released.epoch),
        (SessionState::Pending, None, 1)
    );

    // A finished lease writes nothing more, and cannot finish twice.
    let done = store.fenced(&lease(&sessions[0]));
    assert!(is_fenced(
        &done.append_user(&sessions[0], &UserMessage::new("late"), 9).await
    ));
    assert!(is_fenced(
        &store.finish(&lease(&sessions[0]), SessionEnd::Completed).await
    ));
    assert!(store
        .renew(&[lease(&sessions[0])], LONG)
        .await
        .expect("renew")
        .is_empty());

    // Completed and failed sessions are never claimed again; the released one is, with a higher epoch.
    let again = claim_exactly(&store, "w2", LONG, 10, &[&sessions[2]]).await;
    assert_eq!((again[0].lease.epoch, again[0].previous_owner.as_deref()), (2, None));
    assert!(is_fenced(
        &store
            .fenced(&lease(&sessions[2]))
            .append_user(&sessions[2], &UserMessage::new("stale"), 10)
            .await
    ));
}

/// Workers claiming at the same time from their own connections never receive the same session, and together
/// they receive every one.
pub async fn concurrent_claimers_never_share_a_session<F: Fixture>(fixture: &F) {
    const SESSIONS: usize = 40;
    const WORKERS: usize = 4;
    let store = fixture.store();
    let mut submitted = BTreeSet::new();
    for n in 0..SESSIONS {
        submitted.insert(
            store
                .submit(&UserMessage::new(format!("s{n}")), n as i64)
                .await
                .expect("submit"),
        );
    }
    let mut workers = Vec::new();
    for worker in 0..WORKERS {
        let queue = fixture.connect().await;
        workers.push(tokio::spawn(async move {
            let owner = format!("worker-{worker}");
            let mut mine = Vec::new();
            let mut empty_rounds = 0;
            // Small batches and a yield between them, so the claimers interleave.
            while empty_rounds < 3 {
                let claims = queue.claim(&owner, LONG, 3).await.expect("claim");
                if claims.is_empty() {
                    empty_rounds += 1;
                } else {
                    empty_rounds = 0;
                }
                mine.extend(claims.into_iter().map(|claim| claim.lease));
                tokio::task::yield_now().await;
            }
            mine
        }));
    }
    let mut seen: BTreeSet<SessionId> = BTreeSet::new();
    let mut per_worker = Vec::new();
    for worker in workers {
        let leases = worker.await.expect("worker");
        per_worker.push(leases.len());
        for lease in leases {
            assert_eq!(lease.epoch, 1, "claimed twice: {lease:?}");
            assert!(
                seen.insert(lease.session.clone()),
                "{} was handed to two workers",
                lease.session
            );
        }
    }
    assert_eq!(
        seen, submitted,
        "every session claimed once (per worker: {per_worker:?})"
    );
    let held = store
        .sessions()
        .await
        .expect("sessions")
        .into_iter()
        .filter(|info| info.state == SessionState::Running && info.epoch == 1 && info.owner.is_some())
        .count();
    assert_eq!(held, SESSIONS);
}
