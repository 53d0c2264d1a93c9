//! Conformance cases: concurrent writers lose nothing and keep sequence numbers gapless.

use std::collections::BTreeSet;

use headstart_core::model::{ToolCall, UserMessage};

use super::data::{admit, call, commit_one, finished, key, prefix, result, store_with_session};
use super::fixture::Fixture;
use crate::types::RunState;
use crate::TranscriptStore;

/// 64 sessions written concurrently from clones of one handle: nothing lost, each session's seqs gapless.
pub async fn concurrent_sessions_lose_nothing<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let tasks: Vec<_> = (0..64)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                let session = store_with_session(&store).await;
                let c = call(&format!("c{n}"), "lookup");
                let seq = commit_one(&store, &session, &c.id).await.expect("commit");
                store.mark_started(&session, &key(&c.id), 11).await.expect("started");
                let end = store
                    .append_tool_result(&session, 0, &result(&c, "r"), finished(Some(11)), 12)
                    .await
                    .expect("result");
                (session, seq, end)
            })
        })
        .collect();
    for task in tasks {
        let (session, seq, end) = task.await.expect("task");
        assert_eq!((seq, end), (2, 3));
        let log = store.load_log(&session).await.expect("log");
        assert_eq!(log.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
        let runs = store.tool_runs(&session).await.expect("runs");
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].state, RunState::Finished);
    }
    assert_eq!(store.sessions().await.expect("sessions").len(), 64);
}

/// Concurrent writes to one session (as the engine makes: results of parallel calls, `mark_started` off the
/// critical path), from two handles: every write lands once, seqs stay gapless and distinct.
pub async fn concurrent_writes_to_one_session_keep_seqs_gapless<F: Fixture>(fixture: &F) {
    let first = fixture.store();
    let second = fixture.connect().await;
    let session = store_with_session(&first).await;
    let calls: Vec<ToolCall> = (0..16).map(|n| call(&format!("c{n}"), "lookup")).collect();
    let refs: Vec<&ToolCall> = calls.iter().collect();
    first
        .commit_fragment(&session, 0, &prefix("t", "many", &calls), &admit(&refs), 10)
        .await
        .expect("commit");
    let tasks: Vec<_> = calls
        .iter()
        .enumerate()
        .map(|(n, c)| {
            let store = if n % 2 == 0 { first.clone() } else { second.clone() };
            let (session, c) = (session.clone(), c.clone());
            tokio::spawn(async move {
                store.mark_started(&session, &key(&c.id), 20).await.expect("started");
                let seq = store
                    .append_tool_result(&session, 0, &result(&c, "r"), finished(Some(20)), 30)
                    .await
                    .expect("result");
                let prompt = store
                    .append_user(&session, &UserMessage::new(format!("note {n}")), 31)
                    .await
                    .expect("note");
                (seq, prompt)
            })
        })
        .collect();
    let mut seqs = BTreeSet::new();
    for task in tasks {
        let (a, b) = task.await.expect("task");
        assert!(seqs.insert(a) && seqs.insert(b), "a seq was handed out twice");
    }
    assert_eq!(seqs, (3..=34).collect::<BTreeSet<u64>>());
    let log = first.load_log(&session).await.expect("log");
    assert_eq!(
        log.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (1..=34).collect::<Vec<u64>>()
    );
    assert!(first.unfinished_calls(&session).await.expect("unfinished").is_empty());
}
