//! Conformance cases: a session created under an id; one page of the session listing ([`TranscriptStore::sessions_page`]) and one session's entry
//! ([`TranscriptStore::session`]).

use headstart_core::model::UserMessage;

use super::fixture::Fixture;
use crate::types::{SessionId, SessionState};
use crate::{SessionQueue, SessionsQuery, StoreError, TranscriptStore};

/// One session's entry is its listing entry; a page lists sessions newest first (creation time, ties: the later created first), skips and limits in that
/// order, filters by state, counts every match, and agrees with the full listing read backwards.
pub async fn sessions_page_lists_newest_first_filtered_and_counted<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let a = store.create_session(100).await.expect("a");
    let b = store.submit(&UserMessage::new("b"), 300).await.expect("b");
    let c = store.create_session(200).await.expect("c");
    let d = store.submit(&UserMessage::new("d"), 300).await.expect("d");
    let page = |state, offset, limit| SessionsQuery { state, offset, limit };
    let ids = |page: crate::SessionsPage| -> (Vec<SessionId>, u64) {
        (page.sessions.into_iter().map(|info| info.id).collect(), page.total)
    };

    let all = store.sessions_page(&page(None, 0, 10)).await.expect("all");
    assert_eq!(all.sessions[0].messages, 1, "message counts are listed");
    assert_eq!(ids(all), (vec![d.clone(), b.clone(), c.clone(), a.clone()], 4));
    let mut oldest_first: Vec<SessionId> = store
        .sessions()
        .await
        .expect("sessions")
        .into_iter()
        .map(|s| s.id)
        .collect();
    oldest_first.reverse();
    assert_eq!(oldest_first, vec![d.clone(), b.clone(), c.clone(), a.clone()]);

    let second = store.sessions_page(&page(None, 1, 2)).await.expect("second page");
    assert_eq!(ids(second), (vec![b.clone(), c.clone()], 4));
    let past_the_end = store.sessions_page(&page(None, 9, 2)).await.expect("past the end");
    assert_eq!(ids(past_the_end), (vec![], 4));

    let pending = store
        .sessions_page(&page(Some(SessionState::Pending), 0, 10))
        .await
        .expect("pending");
    assert_eq!(ids(pending), (vec![d.clone(), b.clone()], 2));
    let unqueued = store
        .sessions_page(&page(Some(SessionState::Unqueued), 1, 10))
        .await
        .expect("unqueued");
    assert_eq!(ids(unqueued), (vec![a], 2));
    let failed = store
        .sessions_page(&page(Some(SessionState::Failed), 0, 10))
        .await
        .expect("failed");
    assert_eq!(ids(failed), (vec![], 0));
    let none = store.sessions_page(&page(None, 0, 0)).await.expect("a zero limit");
    assert_eq!(ids(none), (vec![], 4));

    let listed = store.sessions().await.expect("sessions");
    let entry = store.session(&d).await.expect("one session");
    assert_eq!(
        entry.as_ref(),
        listed.iter().find(|info| info.id == d),
        "one entry, as listed"
    );
    let ghost = SessionId("no-such-session".to_owned());
    assert_eq!(store.session(&ghost).await.expect("no session"), None);
}

/// A session created under the caller's id (a Restate object's key) is an empty, unqueued session like any other;
/// the same id again is a conflict that writes nothing.
pub async fn a_session_created_under_an_id_is_listed_and_the_id_is_not_reused<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let id = SessionId("restate-key-1".into());
    store.create_session_with_id(&id, 7).await.expect("create under an id");
    let info = store.session(&id).await.expect("read").expect("listed");
    assert_eq!(
        (info.created_at_us, info.messages, info.state),
        (7, 0, SessionState::Unqueued)
    );
    assert_eq!(store.append_user(&id, &UserMessage::new("hi"), 8).await, Ok(1));
    let again = store.create_session_with_id(&id, 9).await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    assert_eq!(store.load_log(&id).await.expect("log").len(), 1);
}
