use proptest::prelude::*;

use super::*;
use crate::context::model_context_by_request;
use crate::context::tests as context_tests;
use crate::model::{ContentBlock, StopReason, UserMessage};

/// A fragment of response `turn`: `text`, then one call per id.
fn fragment(turn: &str, calls: &[&str], text: &str, stop: StopReason) -> Message {
    let mut message = context_tests::fragment(turn, calls, stop, 0);
    if let Message::Assistant(fragment) = &mut message {
        fragment.content.insert(0, ContentBlock::text(text));
    }
    message
}

fn result(id: &str, text: &str) -> Message {
    context_tests::result_with(id, text)
}

/// Pushes `log` one message at a time, rebuilding from the prefix on [`Reload`], and checks the context against the
/// whole prefix's after every message. Returns how many pushes asked for a reload.
fn push_all(log: &[(Option<u32>, Message)]) -> usize {
    let mut builder = ContextBuilder::new();
    let mut reloads = 0;
    for (n, (request, message)) in log.iter().enumerate() {
        let prefix = &log[..=n];
        let whole = || prefix.iter().map(|(request, message)| (*request, message));
        if builder.push(*request, message).is_err() {
            reloads += 1;
            builder = ContextBuilder::from_log(whole());
        }
        assert_eq!(
            builder.context().to_vec(),
            model_context_by_request(whole()),
            "after {prefix:#?}"
        );
    }
    reloads
}

/// The log the engine writes: a prompt, then responses whose fragments and results interleave as early calls
/// commit and finish, each response's results written before the next request.
fn engine_log(rounds: u32) -> Vec<(Option<u32>, Message)> {
    let mut log = vec![(None, Message::User(UserMessage::new("go")))];
    for request in 0..rounds {
        let turn = format!("turn-{request}");
        // Providers that number their calls per response repeat the ids in every request.
        log.push((
            Some(request),
            fragment(&turn, &["call_0"], "thinking aloud", StopReason::ToolUse),
        ));
        log.push((Some(request), fragment(&turn, &["call_1"], "", StopReason::ToolUse)));
        log.push((Some(request), result("call_1", "second first")));
        log.push((Some(request), fragment(&turn, &[], "done", StopReason::ToolUse)));
        log.push((Some(request), result("call_0", "first")));
        if request % 3 == 2 {
            log.push((None, Message::User(UserMessage::new("and then?"))));
        }
    }
    log
}

#[test]
fn the_engines_writes_never_need_a_reload() {
    assert_eq!(push_all(&engine_log(12)), 0);
}

#[test]
fn a_late_result_for_an_older_response_reloads_and_lands_beside_its_call() {
    let mut log = engine_log(2);
    log.push((Some(2), fragment("turn-2", &["call_0"], "", StopReason::ToolUse)));
    // Recovery answers a call of an earlier response after a later one began.
    log.insert(3, (Some(0), fragment("turn-0", &["call_9"], "", StopReason::ToolUse)));
    log.push((Some(0), result("call_9", "interrupted")));
    assert_eq!(push_all(&log), 1);
}

#[test]
fn a_builder_from_a_log_goes_on_like_one_that_read_every_message() {
    let log = engine_log(4);
    for split in 0..log.len() {
        let mut builder = ContextBuilder::from_log(log[..split].iter().map(|(request, message)| (*request, message)));
        for (request, message) in &log[split..] {
            builder
                .push(*request, message)
                .expect("the engine's writes extend the last response");
        }
        let whole = model_context_by_request(log.iter().map(|(request, message)| (*request, message)));
        assert_eq!(builder.context().to_vec(), whole, "split at {split}");
    }
}

#[test]
fn a_shared_context_is_not_changed_by_later_pushes() {
    let log = engine_log(1);
    let mut builder = ContextBuilder::new();
    builder.push(log[0].0, &log[0].1).expect("prompt");
    builder.push(log[1].0, &log[1].1).expect("first fragment");
    let handed_out = builder.context().clone();
    for (request, message) in &log[2..] {
        builder.push(*request, message).expect("push");
    }
    assert_eq!(handed_out.len(), 2);
    let Some(Message::Assistant(first)) = handed_out.get(1) else {
        panic!("{handed_out:?}")
    };
    assert_eq!(first.tool_calls().count(), 1, "the request's copy keeps its one call");
    assert_eq!(builder.context().len(), 4);
}

/// Any message, valid for the engine or not: requests, turns and call ids from small sets, so responses continue,
/// ids repeat across and within requests, results arrive early, late, twice or for no call, and calls are
/// provider-async or not, their results ready during a response or not.
fn any_message() -> impl Strategy<Value = (Option<u32>, Message)> {
    let request = prop_oneof![Just(None), (0u32..3).prop_map(Some)];
    let id = prop::sample::select(vec!["c0", "c1", "c2"]);
    let turn = prop::sample::select(vec!["a", "b"]);
    let calls = prop::collection::vec(id.clone(), 0..3);
    prop_oneof![
        1 => request.clone().prop_map(|_| (None, Message::User(UserMessage::new("u")))),
        4 => (request.clone(), turn, calls, any::<bool>(), any::<bool>()).prop_map(
            |(request, turn, calls, last, provider_async)| {
                let stop = if last { StopReason::Stop } else { StopReason::ToolUse };
                let mut message = fragment(turn, &calls, turn, stop);
                if provider_async {
                    context_tests::mark_provider_async(&mut message);
                }
                (request, message)
            }
        ),
        4 => (request, id, any::<u8>(), prop::option::of(0u32..3)).prop_map(|(request, id, text, ready_during)| {
            let mut message = result(id, &text.to_string());
            if let Message::ToolResult(result) = &mut message {
                result.ready_during = ready_during;
            }
            (request, message)
        }),
    ]
}

#[test]
fn a_provider_async_result_delivered_late_is_appended_without_a_reload() {
    let mut first = fragment("r0", &["a1"], "", StopReason::ToolUse);
    context_tests::mark_provider_async(&mut first);
    let log = vec![
        (None, Message::User(UserMessage::new("go"))),
        (Some(0), first),
        (Some(1), fragment("r1", &["s1"], "more", StopReason::ToolUse)),
        (Some(1), result("s1", "sync")),
        (Some(0), result("a1", "late")),
        (Some(2), fragment("r2", &[], "done", StopReason::Stop)),
    ];
    assert_eq!(push_all(&log), 0, "the engine's late delivery is an append");
}

proptest! {
    #[test]
    fn pushing_message_by_message_equals_building_from_the_whole_log(
        log in prop::collection::vec(any_message(), 0..24)
    ) {
        push_all(&log);
    }
}
