//! Conformance cases: faults (a database error mid-commit, an undecodable body) and recovery's view from another
//! connection (contract §7.4).

use headstart_core::model::{Message, ToolResultMessage, UserMessage};

use super::data::{commit_one, commit_two, key, prefix, store_with_session};
use super::fixture::Fixture;
use super::support::{is_fenced, skip, snapshot};
use crate::types::{RunEnd, RunOutcome, RunState};
use crate::{StoreError, TranscriptStore};

/// A database error between writing the fragment and writing its runs rolls both back (contract §7.2: a fragment and
/// the `admitted` rows of its calls are one transaction); the store works again once the fault clears.
pub async fn a_fault_between_fragment_and_runs_stores_neither<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let session = store_with_session(&store).await;
    if !fixture.fail_run_inserts(true).await {
        return skip(
            "a_fault_between_fragment_and_runs_stores_neither",
            "the backend cannot fail run inserts",
        );
    }
    let before = snapshot(&store, &session).await;
    let failed = commit_one(&store, &session, "c1").await;
    assert!(!is_fenced(&failed), "{failed:?}");
    let err = failed.expect_err("a run insert failed");
    // The database raised it: its own error and code stay behind the store's.
    assert!(std::error::Error::source(&err).is_some(), "{err:?}");
    assert!(err.code().is_some(), "{err:?}");
    assert_eq!(
        snapshot(&store, &session).await,
        before,
        "the failed commit left something behind"
    );
    // A fragment that admits nothing inserts no run: it goes through.
    assert_eq!(
        store
            .commit_fragment(&session, 0, &prefix("t", "no calls", &[]), &[], 11)
            .await,
        Ok(2)
    );
    assert!(fixture.fail_run_inserts(false).await);
    assert_eq!(commit_one(&store, &session, "c1").await, Ok(3));
    assert_eq!(store.unfinished_calls(&session).await.expect("unfinished").len(), 1);
}

/// A stored body that does not decode is [`StoreError::Decode`] naming its session and seq, on every read that
/// touches it.
pub async fn an_undecodable_body_names_its_session_and_seq<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let session = store_with_session(&store).await;
    commit_one(&store, &session, "c1").await.expect("commit");
    if !fixture.damage_body(&session, 2).await {
        return skip(
            "an_undecodable_body_names_its_session_and_seq",
            "the backend cannot damage a body",
        );
    }
    let err = store.load_log(&session).await.expect_err("decoded garbage");
    assert!(
        matches!(&err, StoreError::Decode(m) if m.message().contains(&session.0) && m.message().contains("seq 2")),
        "{err:?}"
    );
    let err = store.unfinished_calls(&session).await.expect_err("decoded garbage");
    assert!(
        matches!(&err, StoreError::Decode(m) if m.message().contains("seq 2")),
        "{err:?}"
    );
}

/// Recovery's view (contract §7.4): what one handle committed before it went away, another connection lists as
/// unfinished, settles, and continues.
pub async fn another_connection_lists_unfinished_calls_and_settles_them<F: Fixture>(fixture: &F) {
    let session = {
        let crashed = fixture.connect().await;
        let session = store_with_session(&crashed).await;
        commit_two(&crashed, &session).await;
        crashed.mark_started(&session, &key("a"), 11).await.expect("started");
        session
    };
    let store = fixture.connect().await;
    let unfinished = store.unfinished_calls(&session).await.expect("unfinished");
    let listed: Vec<(&str, RunState)> = unfinished.iter().map(|u| (u.call.id.as_str(), u.run.state)).collect();
    assert_eq!(listed, vec![("a", RunState::Started), ("b", RunState::Admitted)]);
    for unfinished in &unfinished {
        let end = RunEnd {
            state: if unfinished.run.started_at_us.is_some() {
                RunState::Cancelled
            } else {
                RunState::Skipped
            },
            outcome: RunOutcome::Interrupted,
            started_at_us: unfinished.run.started_at_us,
        };
        let interrupted = ToolResultMessage::error(&unfinished.call, "interrupted");
        store
            .append_tool_result(&session, 0, &interrupted, Some(end), 20)
            .await
            .expect("settle");
    }
    assert!(store.unfinished_calls(&session).await.expect("unfinished").is_empty());
    let runs = store.tool_runs(&session).await.expect("runs");
    assert_eq!(
        runs.iter().map(|r| (r.state, r.outcome)).collect::<Vec<_>>(),
        vec![
            (RunState::Cancelled, Some(RunOutcome::Interrupted)),
            (RunState::Skipped, Some(RunOutcome::Interrupted))
        ]
    );
    // Valid to continue: every call is followed by its result in the model context.
    let context = store.model_context(&session).await.expect("context");
    assert_eq!(
        context.iter().map(Message::role).collect::<Vec<_>>(),
        vec!["user", "assistant", "tool_result", "tool_result"]
    );
    assert_eq!(store.append_user(&session, &UserMessage::new("go on"), 30).await, Ok(5));
}
