//! Conformance cases: the transcript (contract §7.2, §7.3): writes, reads, the session listing, message bodies.

use headstart_core::model::{
    AssistantMessage, ContentBlock, Message, StopReason, ToolArguments, ToolCall, ToolResultMessage, Usage, UserMessage,
};

use super::data::{admit, call, commit_two, finished, fragment, key, prefix, result, store_with_session};
use super::fixture::Fixture;
use crate::types::{AdmittedCall, RunOutcome, RunState, SessionId, SessionState};
use crate::{Lease, SessionEnd, SessionQueue, StoreError, TranscriptStore};

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
    // What changed since a reader's last seq: the tail, the same messages as in the whole log.
    for after in 0..=6 {
        let tail = store
            .load_log_after(&session, after)
            .await
            .expect("load the log's tail");
        let skip = usize::try_from(after).unwrap_or(usize::MAX).min(log.len());
        assert_eq!(tail, log[skip..], "the log after message {after}");
    }
    assert_eq!(store.load_log_after(&session, u64::MAX).await, Ok(Vec::new()));
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

/// A call's seal time is stored with its admission and read back with its run, known or not (contract §7.2).
pub async fn seal_times_round_trip_with_their_runs<F: Fixture>(fixture: &F) {
    let store = fixture.store();
    let session = store_with_session(&store).await;
    let (a, b) = (call("a", "lookup"), call("b", "fetch"));
    let admitted = [
        AdmittedCall {
            sealed_at_us: Some(150),
            ..admit(&[&a]).remove(0)
        },
        AdmittedCall {
            sealed_at_us: None,
            ..admit(&[&b]).remove(0)
        },
    ];
    let first = prefix("turn-0", "two calls", &[a.clone(), b.clone()]);
    store
        .commit_fragment(&session, 0, &first, &admitted, 200)
        .await
        .expect("commit");
    let runs = store.tool_runs(&session).await.expect("runs");
    let sealed: Vec<(&str, Option<i64>)> = runs.iter().map(|r| (r.call_id.as_str(), r.sealed_at_us)).collect();
    assert_eq!(sealed, vec![("a", Some(150)), ("b", None)]);
    let unfinished = store.unfinished_calls(&session).await.expect("unfinished");
    let sealed: Vec<Option<i64>> = unfinished.iter().map(|u| u.run.sealed_at_us).collect();
    assert_eq!(sealed, vec![Some(150), None], "unfinished calls carry it too");
    store
        .append_tool_result(&session, 0, &result(&a, "A"), finished(Some(210)), 300)
        .await
        .expect("a's result");
    let runs = store.tool_runs(&session).await.expect("runs after a result");
    assert_eq!(runs[0].sealed_at_us, Some(150), "ending a run keeps its seal time");
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
    assert!(is_no_session(store.load_log_after(&ghost, 3).await.map(drop)));
    assert!(is_no_session(store.tool_runs(&ghost).await.map(drop)));
    assert!(is_no_session(store.tool_runs_from(&ghost, 1).await.map(drop)));
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
        provider_async: false,
    };
    let invalid = ToolCall {
        id: "invalid".to_owned(),
        name: "lookup".to_owned(),
        arguments: ToolArguments::parse("{\"a\": 1,,   \"b\":\t[} trailing"),
        provider_async: false,
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
        ready_during: None,
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
