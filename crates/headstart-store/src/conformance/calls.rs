//! Conformance cases: calls and their runs: admissions unique per response, results that must fit their run.

use headstart_core::model::{Message, ToolCall, UserMessage};

use super::data::{admit, call, commit_one, finished, prefix, result, store_with_session};
use super::fixture::Fixture;
use crate::types::{CallKey, NewResult, RunEnd, RunOutcome, RunState};
use crate::{StoreError, TranscriptStore};

/// A call id admitted twice (in two commits or in one), or a call not in the fragment, is a conflict, and the
/// fragment is not stored either (contract §7.2: together or not at all).
pub async fn duplicate_admission_is_a_conflict_and_stores_nothing<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let session = store_with_session(&store).await;
    assert_eq!(commit_one(&store, &session, "c1").await, Ok(2));
    let before = store.load_log(&session).await.expect("log").len();

    // The same call id again, in a later fragment.
    let dup = call("c1", "lookup");
    let other = call("c2", "lookup");
    let second = prefix("turn-x", "again", &[other.clone(), dup.clone()]);
    let err = store
        .commit_fragment(&session, 0, &second, &admit(&[&other, &dup]), 20)
        .await
        .expect_err("duplicate call id");
    assert!(
        matches!(&err, StoreError::Conflict(m)
            if m.message().contains("c1") && m.message().contains("already admitted")),
        "{err:?}"
    );
    // Twice within one commit.
    let err = store
        .commit_fragment(&session, 0, &second, &admit(&[&other, &other]), 20)
        .await
        .expect_err("call admitted twice");
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    // A call that is not in the fragment.
    let stranger = call("zz", "lookup");
    let err = store
        .commit_fragment(&session, 0, &second, &admit(&[&stranger]), 20)
        .await
        .expect_err("call not in fragment");
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");

    assert_eq!(
        store.load_log(&session).await.expect("log").len(),
        before,
        "no fragment was stored"
    );
    let runs = store.tool_runs(&session).await.expect("runs");
    assert_eq!(
        runs.iter().map(|r| r.call_id.as_str()).collect::<Vec<_>>(),
        vec!["c1"],
        "no run was stored"
    );
    // The sequence stays gapless after the failed commits.
    assert_eq!(store.append_user(&session, &UserMessage::new("next"), 30).await, Ok(3));
}

/// A call id is unique per response, not per session (contract §7.2.2): the same id admitted by two responses is two
/// calls, each with its run, its start mark, its result and its place in the context; within one response a second
/// admission of the id is still refused.
pub async fn a_call_id_repeated_by_another_response_is_another_call<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let session = store_with_session(&store).await;
    let call_0 = call("call_0", "lookup");
    let calls = std::slice::from_ref(&call_0);
    for (request, turn, at_us) in [(0, "r0", 10), (1, "r1", 20)] {
        assert_eq!(
            store
                .commit_fragment(&session, request, &prefix(turn, "x", calls), &admit(&[&call_0]), at_us)
                .await,
            Ok(u64::from(request) + 2),
            "request {request} admits call_0"
        );
    }
    // Within one response, a second admission of the id (in a later fragment) is refused and stores nothing.
    let err = store
        .commit_fragment(&session, 1, &prefix("r1", "again", calls), &admit(&[&call_0]), 25)
        .await
        .expect_err("call_0 twice in request 1");
    assert!(
        matches!(&err, StoreError::Conflict(m)
            if m.message().contains("call_0") && m.message().contains("already admitted")),
        "{err:?}"
    );
    assert_eq!(store.load_log(&session).await.expect("log").len(), 3, "nothing stored");

    let unfinished = store.unfinished_calls(&session).await.expect("unfinished");
    let keys: Vec<CallKey> = unfinished.iter().map(|u| u.run.key()).collect();
    assert_eq!(keys, [CallKey::new(0, "call_0"), CallKey::new(1, "call_0")]);
    assert_eq!((unfinished[0].run.fragment_seq, unfinished[1].run.fragment_seq), (2, 3));

    // The start mark and the results name their request: written in the reverse order, each lands on its run.
    store
        .mark_started(&session, &CallKey::new(1, "call_0"), 30)
        .await
        .expect("mark");
    assert_eq!(
        store
            .append_tool_result(&session, 1, &result(&call_0, "second"), finished(None), 40)
            .await,
        Ok(4)
    );
    assert_eq!(
        store
            .append_tool_result(&session, 0, &result(&call_0, "first"), finished(None), 50)
            .await,
        Ok(5)
    );
    let err = store
        .append_tool_result(&session, 1, &result(&call_0, "twice"), finished(None), 60)
        .await
        .expect_err("request 1's call_0 already has its result");
    assert!(
        matches!(&err, StoreError::Conflict(m) if m.message().contains("already ended")),
        "{err:?}"
    );
    let err = store
        .append_tool_result(&session, 2, &result(&call_0, "?"), finished(None), 60)
        .await
        .expect_err("request 2 admitted no call_0");
    assert!(
        matches!(&err, StoreError::Conflict(m) if m.message().contains("no admitted run")),
        "{err:?}"
    );

    let runs = store.tool_runs(&session).await.expect("runs");
    let summary: Vec<(u32, &str, Option<i64>, Option<u64>)> = runs
        .iter()
        .map(|r| (r.request, r.call_id.as_str(), r.started_at_us, r.result_seq))
        .collect();
    assert_eq!(
        summary,
        [(0, "call_0", None, Some(5)), (1, "call_0", Some(30), Some(4))]
    );
    // From a request on: the same runs, those of the earlier requests left out.
    assert_eq!(store.tool_runs_from(&session, 0).await.expect("runs from 0"), runs);
    assert_eq!(store.tool_runs_from(&session, 1).await.expect("runs from 1"), runs[1..]);
    assert_eq!(store.tool_runs_from(&session, 2).await, Ok(Vec::new()));
    assert!(store.unfinished_calls(&session).await.expect("unfinished").is_empty());
    let log = store.load_log(&session).await.expect("log");
    assert_eq!(
        log.iter().map(|m| m.request).collect::<Vec<_>>(),
        [None, Some(0), Some(1), Some(1), Some(0)]
    );

    // Each response is followed by its own result, whatever the write order.
    let context = store.model_context(&session).await.expect("context");
    let shape: Vec<String> = context
        .iter()
        .map(|message| match message {
            Message::ToolResult(r) => format!("{}={}", r.tool_call_id, r.text()),
            other => other.role().to_owned(),
        })
        .collect();
    assert_eq!(
        shape,
        ["user", "assistant", "call_0=first", "assistant", "call_0=second"]
    );
}

/// Results that do not fit their run (no run, no run end, an end state that is not one, a run already ended) are
/// conflicts and store nothing.
pub async fn results_for_missing_or_ended_runs_are_conflicts_and_store_nothing<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let session = store_with_session(&store).await;
    commit_one(&store, &session, "c1").await.expect("commit");
    let c1 = call("c1", "lookup");
    let ghost = call("ghost", "lookup");

    let err = store
        .append_tool_result(&session, 0, &result(&ghost, "?"), finished(None), 20)
        .await
        .expect_err("no run");
    assert!(
        matches!(&err, StoreError::Conflict(m) if m.message().contains("ghost")),
        "{err:?}"
    );
    let err = store
        .append_tool_result(&session, 0, &result(&c1, "?"), None, 20)
        .await
        .expect_err("an admitted call's result must end its run");
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    let not_an_end = Some(RunEnd {
        state: RunState::Started,
        outcome: RunOutcome::Finished,
        started_at_us: None,
    });
    let err = store
        .append_tool_result(&session, 0, &result(&c1, "?"), not_an_end, 20)
        .await
        .expect_err("started is not an end state");
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");

    assert_eq!(
        store
            .append_tool_result(&session, 0, &result(&c1, "ok"), finished(None), 30)
            .await,
        Ok(3)
    );
    let err = store
        .append_tool_result(&session, 0, &result(&c1, "again"), finished(None), 40)
        .await
        .expect_err("already ended");
    assert!(
        matches!(&err, StoreError::Conflict(m) if m.message().contains("already ended")),
        "{err:?}"
    );

    let log = store.load_log(&session).await.expect("log");
    assert_eq!(log.len(), 3, "only the valid result was stored");
    let runs = store.tool_runs(&session).await.expect("runs");
    assert_eq!((runs[0].ended_at_us, runs[0].result_seq), (Some(30), Some(3)));
}

/// Many results in one write (`append_tool_results`): in order, with consecutive seqs, each ending its run (or none
/// for a call never admitted); a batch with one result that cannot be written stores none of them.
pub async fn many_results_are_written_in_one_transaction_or_not_at_all<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let session = store_with_session(&store).await;
    let (a, b, c, d) = (call("a", "t"), call("b", "t"), call("c", "t"), call("d", "t"));
    let calls = [a.clone(), b.clone(), c.clone(), d.clone()];
    store
        .commit_fragment(&session, 0, &prefix("r0", "x", &calls), &admit(&[&a, &b, &d]), 10)
        .await
        .expect("admit a, b and d; c never admitted");
    let new = |call: &ToolCall, text: &str, run: Option<RunEnd>| NewResult {
        result: result(call, text),
        run,
    };

    // d's result twice in one batch: the second is a conflict, so nothing of the batch is stored.
    let refused = store
        .append_tool_results(
            &session,
            0,
            &[new(&d, "D", finished(None)), new(&d, "D again", finished(None))],
            20,
        )
        .await;
    assert!(matches!(refused, Err(StoreError::Conflict(_))), "{refused:?}");
    assert_eq!(
        store.load_log(&session).await.expect("log").len(),
        2,
        "nothing of the batch stored"
    );
    assert_eq!(store.unfinished_calls(&session).await.expect("unfinished").len(), 3);

    let seqs = store
        .append_tool_results(
            &session,
            0,
            &[
                new(&b, "B", finished(Some(15))),
                new(&c, "not executed", None),
                new(&a, "A", finished(None)),
            ],
            30,
        )
        .await
        .expect("three results in one write");
    assert_eq!(seqs, [3, 4, 5]);
    let log = store.load_log(&session).await.expect("log");
    let texts: Vec<String> = log[2..]
        .iter()
        .map(|stored| match &stored.message {
            Message::ToolResult(result) => result.text(),
            other => panic!("not a result: {other:?}"),
        })
        .collect();
    assert_eq!(texts, ["B", "not executed", "A"]);
    assert!(log[2..]
        .iter()
        .all(|stored| stored.request == Some(0) && stored.at_us == 30));
    let unfinished = store.unfinished_calls(&session).await.expect("unfinished");
    let keys: Vec<CallKey> = unfinished.iter().map(|u| u.run.key()).collect();
    assert_eq!(keys, [CallKey::new(0, "d")], "a and b ended with their results");
    assert_eq!(store.append_tool_results(&session, 0, &[], 40).await, Ok(Vec::new()));
}
