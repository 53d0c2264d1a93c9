//! Conformance case: one page of the session listing ([`TranscriptStore::sessions_page`]) and one session's entry
//! ([`TranscriptStore::session`]).

use headstart_core::model::UserMessage;

use super::fixture::Fixture;
use crate::types::{SessionId, SessionState};
use crate::{SessionQueue, SessionsQuery, TranscriptStore};

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
