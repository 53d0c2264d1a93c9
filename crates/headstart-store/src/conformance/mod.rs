//! The conformance suite: what every [`TranscriptStore`] and [`SessionQueue`] must do, as async test cases that run
//! on any backend.
//!
//! A backend's test file describes how to get a fresh database ([`Fixture`]) and expands
//! [`conformance_tests!`](crate::conformance_tests), which generates one `#[tokio::test]` per case, so each case
//! shows (and fails) as its own test:
//!
//! ```ignore
//! async fn fixture() -> Option<MyFixture> { /* a fresh, empty database; None: skip (say why, loudly) */ }
//! headstart_store::conformance_tests!(fixture());
//! ```
//!
//! The calling crate needs `tokio` (features `macros`, `rt-multi-thread`) among its dev-dependencies. Each case is
//! also a public function here, taking the fixture. A new case is added both as a function and to the list in
//! [`conformance_tests!`](crate::conformance_tests).
//!
//! The cases were the SQLite store's tests; the SQLite-only ones (file permissions, WAL, pragmas, group commit,
//! kill-after-commit) stay with it.

pub mod before_call_keys;
pub mod data;

use std::collections::BTreeSet;
use std::time::Duration;

use self::data::{admit, call, commit_one, commit_two, finished, fragment, key, prefix, result, store_with_session};
use crate::types::{CallKey, RunEnd, RunOutcome, RunState, SessionId, SessionInfo, SessionState};
use crate::{Claim, Lease, SessionEnd, SessionQueue, StoreError, TranscriptStore};
use async_trait::async_trait;
use headstart_core::model::{
    AssistantMessage, ContentBlock, Message, StopReason, ToolArguments, ToolCall, ToolResultMessage, Usage, UserMessage,
};

/// How the suite gets at a backend: a fresh database per case, more handles on it, and the faults the backend can
/// produce on demand.
#[async_trait]
pub trait Fixture: Send + Sync {
    /// The store type under test.
    type Store: SessionQueue + Clone + 'static;

    /// The store under test, on a database of its own that started empty.
    fn store(&self) -> Self::Store;

    /// A new handle on the same database with its own connection(s), as another worker process would open it.
    async fn connect(&self) -> Self::Store;

    /// Makes every insert of a tool run fail inside its transaction with a database error (a fault after the
    /// fragment is written, before its runs are), or stops doing so. Returns `false` when the backend cannot.
    async fn fail_run_inserts(&self, on: bool) -> bool;

    /// Overwrites the stored body of message `seq` of `session` with text that is not JSON. Returns `false` when
    /// the backend cannot.
    async fn damage_body(&self, session: &SessionId, seq: u64) -> bool;
}

/// Generates one `#[tokio::test]` per conformance case. `$fixture` is an expression evaluated in each test, a
/// future of `Option<F>` where `F: Fixture`; `None` skips the case (the fixture says why).
#[macro_export]
macro_rules! conformance_tests {
    ($fixture:expr) => {
        $crate::conformance_tests!(@cases $fixture;
            round_trip_keeps_write_order_runs_and_unfinished_calls,
            result_carries_a_start_time_that_mark_started_never_wrote,
            duplicate_admission_is_a_conflict_and_stores_nothing,
            a_call_id_repeated_by_another_response_is_another_call,
            results_for_missing_or_ended_runs_are_conflicts_and_store_nothing,
            unknown_session_is_no_session,
            sessions_are_uuidv7_listed_oldest_first_with_message_counts,
            message_bodies_round_trip_byte_for_byte,
            concurrent_sessions_lose_nothing,
            concurrent_writes_to_one_session_keep_seqs_gapless,
            a_fault_between_fragment_and_runs_stores_neither,
            an_undecodable_body_names_its_session_and_seq,
            another_connection_lists_unfinished_calls_and_settles_them,
            submit_makes_a_pending_session_with_its_prompt,
            claims_take_claimable_sessions_oldest_first_up_to_the_limit,
            a_later_claim_fences_every_write_of_the_earlier_owner,
            an_expired_lease_makes_the_session_claimable_again,
            writes_without_the_lease_are_refused,
            finish_completes_fails_or_releases,
            concurrent_claimers_never_share_a_session,
        );
    };
    (@cases $fixture:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                if let Some(fixture) = $fixture.await {
                    $crate::conformance::$case(&fixture).await;
                }
            }
        )*
    };
}

/// A lease long enough never to expire during a case.
const LONG: Duration = Duration::from_secs(600);
/// A lease that has certainly expired after [`PAST_SHORT`].
const SHORT: Duration = Duration::from_millis(50);
/// Longer than [`SHORT`] with room for a coarse database clock (SQLite's has millisecond resolution).
const PAST_SHORT: Duration = Duration::from_millis(200);

fn skip(case: &str, why: &str) {
    eprintln!("conformance case {case} skipped: {why}");
}

/// The session's row in [`TranscriptStore::sessions`].
async fn info<S: TranscriptStore + ?Sized>(store: &S, session: &SessionId) -> SessionInfo {
    store
        .sessions()
        .await
        .expect("sessions")
        .into_iter()
        .find(|info| &info.id == session)
        .expect("the session is listed")
}

/// Everything stored about a session, to show that a refused write changed nothing.
async fn snapshot<S: TranscriptStore + ?Sized>(store: &S, session: &SessionId) -> String {
    let log = store.load_log(session).await.expect("log");
    let runs = store.tool_runs(session).await.expect("runs");
    let info = info(store, session).await;
    format!("{log:?}\n{runs:?}\n{info:?}")
}

/// Claims exactly the sessions in `expected` (any order) for `owner`.
async fn claim_exactly<S: SessionQueue + ?Sized>(
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

fn is_fenced<T: std::fmt::Debug>(outcome: &Result<T, StoreError>) -> bool {
    matches!(outcome, Err(StoreError::Fenced(_)))
}

// ---- the transcript ---------------------------------------------------------------------------------------------

/// Writes, reads and views (contract §7.2, §7.3): seqs gapless in write order, runs in admission order, late
/// `mark_started` ignored, unfinished calls, the canonical context, the session listing.
pub async fn round_trip_keeps_write_order_runs_and_unfinished_calls<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let session = store.create_session(100).await.expect("create session");
    assert_eq!(
        store.append_user(&session, &UserMessage::new("find it"), 110).await,
        Ok(1)
    );

    // Request 0: two fragments of one response; a and b admitted early with the first, c with the second.
    let (a, b, c, d) = (
        call("a", "lookup"),
        call("b", "lookup"),
        call("c", "fetch"),
        call("d", "fetch"),
    );
    let first = prefix("turn-0", "let me check", &[a.clone(), b.clone()]);
    assert_eq!(
        store.commit_fragment(&session, 0, &first, &admit(&[&b, &a]), 200).await,
        Ok(2)
    );
    store.mark_started(&session, &key("b"), 210).await.expect("mark b");
    store.mark_started(&session, &key("a"), 220).await.expect("mark a");
    assert_eq!(
        store
            .append_tool_result(&session, 0, &result(&a, "A"), finished(None), 300)
            .await,
        Ok(3)
    );
    let usage = Usage {
        input: 10,
        output: 50,
        ..Usage::default()
    };
    let last = fragment(
        "turn-0",
        StopReason::ToolUse,
        "and more",
        &[c.clone(), d.clone()],
        usage,
    );
    assert_eq!(
        store.commit_fragment(&session, 0, &last, &admit(&[&c]), 400).await,
        Ok(4)
    );
    // d was not admitted ("not executed"): a result without a run.
    let d_result = ToolResultMessage::error(&d, "not executed");
    assert_eq!(store.append_tool_result(&session, 0, &d_result, None, 410).await, Ok(5));
    // A late mark_started never moves a run backwards, and does not overwrite the start time.
    store.mark_started(&session, &key("a"), 999).await.expect("late mark");
    store.mark_started(&session, &key("b"), 998).await.expect("second mark");

    let log = store.load_log(&session).await.expect("load log");
    let seqs: Vec<u64> = log.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5], "gapless from 1, in write order");
    let roles: Vec<&str> = log.iter().map(|m| m.message.role()).collect();
    assert_eq!(
        roles,
        vec!["user", "assistant", "tool_result", "assistant", "tool_result"]
    );
    assert_eq!(
        log.iter().map(|m| m.at_us).collect::<Vec<_>>(),
        vec![110, 200, 300, 400, 410]
    );
    assert_eq!(
        log.iter().map(|m| m.request).collect::<Vec<_>>(),
        vec![None, Some(0), Some(0), Some(0), Some(0)],
        "fragments and results carry their request"
    );
    assert_eq!(log[1].message, Message::Assistant(first.clone()));
    assert_eq!(log[3].message, Message::Assistant(last.clone()));
    assert_eq!(log[4].message, Message::ToolResult(d_result.clone()));

    let runs = store.tool_runs(&session).await.expect("tool runs");
    let ids: Vec<&str> = runs.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, vec!["b", "a", "c"], "admission order");
    let b_run = &runs[0];
    assert_eq!(
        (
            b_run.state,
            b_run.outcome,
            b_run.started_at_us,
            b_run.ended_at_us,
            b_run.result_seq
        ),
        (RunState::Started, None, Some(210), None, None)
    );
    assert_eq!((b_run.request, b_run.fragment_seq, b_run.admitted_at_us), (0, 2, 200));
    let a_run = &runs[1];
    assert_eq!(
        (
            a_run.state,
            a_run.outcome,
            a_run.started_at_us,
            a_run.ended_at_us,
            a_run.result_seq
        ),
        (
            RunState::Finished,
            Some(RunOutcome::Finished),
            Some(220),
            Some(300),
            Some(3)
        )
    );
    let c_run = &runs[2];
    assert_eq!(
        (
            c_run.state,
            c_run.tool_name.as_str(),
            c_run.fragment_seq,
            c_run.started_at_us
        ),
        (RunState::Admitted, "fetch", 4, None)
    );

    let unfinished = store.unfinished_calls(&session).await.expect("unfinished");
    let unfinished_ids: Vec<&str> = unfinished.iter().map(|u| u.call.id.as_str()).collect();
    assert_eq!(unfinished_ids, vec!["b", "c"]);
    assert_eq!(unfinished[0].call, b);
    assert_eq!(unfinished[0].run, runs[0]);
    assert_eq!(unfinished[1].call, c);

    // The canonical context merges the two fragments into one message, followed by the results in call order.
    let context = store.model_context(&session).await.expect("model context");
    assert_eq!(context.len(), 4, "{context:#?}");
    let Message::Assistant(merged) = &context[1] else {
        panic!("expected the merged response, got {:?}", context[1]);
    };
    assert_eq!(merged.content.len(), first.content.len() + last.content.len());
    assert_eq!(merged.usage, usage);
    assert!(matches!(&context[2], Message::ToolResult(r) if r.tool_call_id == "a"));
    assert!(matches!(&context[3], Message::ToolResult(r) if r.tool_call_id == "d"));

    let sessions = store.sessions().await.expect("sessions");
    assert_eq!(sessions.len(), 1);
    assert_eq!((sessions[0].created_at_us, sessions[0].messages), (100, 5));
    assert_eq!(
        (sessions[0].state, &sessions[0].owner, sessions[0].epoch),
        (SessionState::Unqueued, &None, 0),
        "a session made with create_session is not in the queue"
    );
}

/// The start time a result carries fills a missing `mark_started`, and never replaces a stored one.
pub async fn result_carries_a_start_time_that_mark_started_never_wrote<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let session = store_with_session(&store).await;
    let (a, b) = commit_two(&store, &session).await;
    store.mark_started(&session, &key("b"), 20).await.expect("mark b");
    store
        .append_tool_result(&session, 0, &result(&a, "A"), finished(Some(15)), 30)
        .await
        .expect("a");
    store
        .append_tool_result(&session, 0, &result(&b, "B"), finished(Some(25)), 40)
        .await
        .expect("b");
    let runs = store.tool_runs(&session).await.expect("runs");
    assert_eq!(runs[0].started_at_us, Some(15), "the result's start time fills the gap");
    assert_eq!(runs[1].started_at_us, Some(20), "an existing start time is kept");
    assert!(store.unfinished_calls(&session).await.expect("unfinished").is_empty());
}

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
        matches!(&err, StoreError::Conflict(m) if m.message().contains("c1") && m.message().contains("already admitted")),
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
        matches!(&err, StoreError::Conflict(m) if m.message().contains("call_0") && m.message().contains("already admitted")),
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

/// Every operation on a session that does not exist is [`StoreError::NoSession`].
pub async fn unknown_session_is_no_session<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let ghost = SessionId::from("no-such-session");
    let c = call("c", "lookup");
    let is_no_session =
        |r: Result<(), StoreError>| matches!(r, Err(StoreError::NoSession(id)) if id == "no-such-session");
    assert!(is_no_session(
        store.append_user(&ghost, &UserMessage::new("x"), 1).await.map(drop)
    ));
    assert!(is_no_session(
        store
            .commit_fragment(&ghost, 0, &prefix("t", "x", std::slice::from_ref(&c)), &admit(&[&c]), 1)
            .await
            .map(drop)
    ));
    assert!(is_no_session(store.mark_started(&ghost, &key("c"), 1).await));
    assert!(is_no_session(
        store
            .append_tool_result(&ghost, 0, &result(&c, "r"), None, 1)
            .await
            .map(drop)
    ));
    assert!(is_no_session(store.load_log(&ghost).await.map(drop)));
    assert!(is_no_session(store.tool_runs(&ghost).await.map(drop)));
    assert!(is_no_session(store.unfinished_calls(&ghost).await.map(drop)));
    assert!(is_no_session(store.model_context(&ghost).await.map(drop)));
    let lease = Lease {
        session: ghost.clone(),
        owner: "w".to_owned(),
        epoch: 1,
        expires_at_us: 0,
        held_until: std::time::Instant::now(),
    };
    assert!(is_no_session(store.finish(&lease, SessionEnd::Completed).await));
}

/// Session ids are UUIDv7; the listing is oldest first (creation time, ties in creation order), with message
/// counts; sequence numbers are per session.
pub async fn sessions_are_uuidv7_listed_oldest_first_with_message_counts<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let late = store.create_session(300).await.expect("late");
    let early = store.create_session(100).await.expect("early");
    let tie = store.create_session(300).await.expect("tie");
    store.append_user(&early, &UserMessage::new("a"), 101).await.expect("a");
    store.append_user(&early, &UserMessage::new("b"), 102).await.expect("b");
    for id in [&late, &early, &tie] {
        let uuid = uuid::Uuid::parse_str(&id.0).expect("a UUID");
        assert_eq!(uuid.get_version_num(), 7, "{id}");
    }
    let listed = store.sessions().await.expect("sessions");
    let order: Vec<&SessionId> = listed.iter().map(|s| &s.id).collect();
    assert_eq!(
        order,
        vec![&early, &late, &tie],
        "by creation time, ties in creation order"
    );
    assert_eq!(listed.iter().map(|s| s.messages).collect::<Vec<_>>(), vec![2, 0, 0]);
    // Sequence numbers are per session.
    assert_eq!(store.append_user(&late, &UserMessage::new("c"), 301).await, Ok(1));
}

/// A message's JSON reads back byte for byte: key order, number spellings, escapes, every Unicode character the
/// JSON text may carry, invalid arguments' verbatim text, and a large body.
pub async fn message_bodies_round_trip_byte_for_byte<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let session = store_with_session(&store).await;
    let awkward = "quotes \" and \\ backslashes, \u{0} NUL, \u{1} \u{1f} controls, \t tab, \r\n newlines, \
                   \u{2028} line separator, é (composed) vs e\u{301} (combining), \u{202e}RTL override, \
                   \u{1f980} astral, \u{feff} BOM, \u{fffd} replacement";
    let ordered = ToolCall {
        id: "ordered".to_owned(),
        name: "lookup".to_owned(),
        // Keys out of alphabetical order, nested; numbers as written (a store that re-encodes JSON, such as
        // PostgreSQL's jsonb, would sort the keys and respell the numbers).
        arguments: ToolArguments::parse(
            r#"{"zeta": 1, "alpha": {"y": [1, 2.5, -0.0, 1e300, 18446744073709551615, -9223372036854775808], "b": null}, "mid": "é\n"}"#,
        ),
    };
    let invalid = ToolCall {
        id: "invalid".to_owned(),
        name: "lookup".to_owned(),
        arguments: ToolArguments::parse("{\"a\": 1,,   \"b\":\t[} trailing"),
    };
    assert!(matches!(invalid.arguments, ToolArguments::Invalid { .. }));
    let big = "0123456789abcdef".repeat(64 * 1024); // 1 MiB of text
    let assistant = AssistantMessage {
        turn_id: "turn-\u{1f980}".to_owned(),
        stop_reason: StopReason::ToolUse,
        content: vec![
            ContentBlock::Thinking {
                thinking: awkward.to_owned(),
                signature: Some("sig/+==".to_owned()),
            },
            ContentBlock::text(awkward),
            ContentBlock::ToolCall(ordered.clone()),
            ContentBlock::ToolCall(invalid.clone()),
            ContentBlock::text(big),
        ],
        usage: Usage {
            input: u64::MAX / 3,
            output: 1,
            cache_read: 2,
            cache_write: 3,
        },
        model: Some("model-x".to_owned()),
        error_message: None,
    };
    store
        .commit_fragment(&session, 7, &assistant, &admit(&[&ordered]), 10)
        .await
        .expect("commit");
    let tool_result = ToolResultMessage {
        tool_call_id: "ordered".to_owned(),
        tool_name: "lookup".to_owned(),
        content: vec![ContentBlock::text(awkward)],
        details: serde_json::from_str(r#"{"z": [1.0, 1e-7, "\u0000"], "a": {"nested": true}}"#).expect("details"),
        is_error: true,
        terminate: false,
    };
    store
        .append_tool_result(&session, 7, &tool_result, finished(Some(11)), 12)
        .await
        .expect("result");
    let prompt = UserMessage::new(awkward);
    store.append_user(&session, &prompt, 13).await.expect("prompt");

    let written = [
        Message::Assistant(assistant),
        Message::ToolResult(tool_result),
        Message::User(prompt),
    ];
    let log = store.load_log(&session).await.expect("log");
    assert_eq!(log.len(), 4);
    for (stored, original) in log[1..].iter().zip(&written) {
        assert_eq!(&stored.message, original);
        let original_json = serde_json::to_string(original).expect("encode");
        let stored_json = serde_json::to_string(&stored.message).expect("encode");
        assert!(
            stored_json == original_json,
            "message seq {} does not read back byte for byte",
            stored.seq
        );
    }
    assert_eq!(log[1].request, Some(7));
    let runs = store.tool_runs(&session).await.expect("runs");
    assert_eq!(runs[0].request, 7);
    // Sanity: the JSON text itself keeps the arguments' key order.
    let text = serde_json::to_string(&log[1].message).expect("encode");
    let zeta = text.find("\"zeta\"").expect("zeta");
    let alpha = text.find("\"alpha\"").expect("alpha");
    assert!(zeta < alpha, "key order changed");
    assert!(
        text.contains("1e300") || text.contains("1e+300"),
        "{:.200}",
        &text[zeta..]
    );
}

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

// ---- the work queue (contract §7.5) ---------------------------------------------------------------------------------

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
