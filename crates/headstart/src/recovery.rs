//! Recovery after a crash (contract §7.4): every admitted call without a result gets one, so the transcript is valid
//! to continue.
//!
//! A call admitted before a crash may have run partly or fully; nobody knows. The default policy says so to the
//! model with an error result ([`INTERRUPTED`]). Tools declared [`idempotent`](crate::ToolSpec::idempotent) can
//! instead be run again ([`RecoveryPolicy::ReExecuteIdempotent`]), through the same preparation and hooks as a
//! normal call.

use std::sync::Arc;

use headstart_core::{Message, StopReason, ToolResultMessage};
use headstart_store::{RunEnd, RunOutcome, RunState, SessionId, StoreError, TranscriptStore, UnfinishedCall};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::body_end::BodyEnd;
use crate::events::queue::EventStream;
use crate::parts::EngineParts;
use crate::response::execute::{execute, finalize};
use crate::response::lease_guard::CallGate;
use crate::response::prepare::prepare;
use crate::tools::updates::UpdateSink;

/// The result text of a call interrupted by a crash (contract §7.4).
pub const INTERRUPTED: &str =
    "interrupted: the process stopped while this call was running; it may have partially executed";

/// What to do with unfinished calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RecoveryPolicy {
    /// Give every unfinished call the [`INTERRUPTED`] error result.
    #[default]
    FailAll,
    /// Run calls of idempotent tools again; fail the rest as [`RecoveryPolicy::FailAll`] does.
    ReExecuteIdempotent,
}

/// What recovery did with one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryAction {
    /// It got the interrupted error result.
    Interrupted,
    /// Its idempotent tool ran again and its result was recorded.
    ReExecuted,
    /// Its body had ended where it ran ([`BodyEnd`], known to the host), and that end was stored through the
    /// `after` hooks ([`Engine::settle_known`](crate::Engine::settle_known)).
    Settled,
}

impl BodyEnd {
    /// The call's result: what the body returned, or the [`INTERRUPTED`] error of contract §7.4.
    pub fn into_result(self) -> crate::tools::tool::ToolResult {
        match self {
            BodyEnd::Returned(result) => result,
            BodyEnd::Interrupted => Err(crate::tools::error::ToolError::new(INTERRUPTED)),
        }
    }
}

/// One recovered call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecoveredCall {
    /// The session.
    pub session: SessionId,
    /// The 0-based model request whose response holds the call (with the id, the call's identity: contract §7.2.2).
    pub request: u32,
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub tool_name: String,
    /// Sequence number of the fragment that owns the call.
    pub fragment_seq: u64,
    /// Whether `execute` had begun before the crash (as far as the store knows).
    pub had_started: bool,
    /// What recovery did.
    pub action: RecoveryAction,
    /// Sequence number of the result now stored.
    pub result_seq: u64,
}

/// Gives every unfinished call of `session` a result: the [`INTERRUPTED`] error, with the run ended as
/// `cancelled` (it had started) or `skipped` (it had not). Needs no tools, so a bare store can be recovered.
///
/// Only for calls whose process is gone: a live process's running calls would get the interrupted result and
/// their real results would then be refused. Take the session first (`headstart_store::owner`: the
/// `SessionLocks` beside a SQLite file, refused while another live process holds them; a fleet's sessions through
/// a worker's claim), as `headstart recover` and `resume` do.
pub async fn recover_session(
    store: &dyn TranscriptStore,
    session: &SessionId,
    at_us: i64,
) -> Result<Vec<RecoveredCall>, StoreError> {
    let mut recovered = Vec::new();
    for unfinished in store.unfinished_calls(session).await? {
        recovered.push(fail_call(store, session, &unfinished, at_us).await?);
    }
    Ok(recovered)
}

/// [`recover_session`] for every stored session.
pub async fn recover_all(store: &dyn TranscriptStore, at_us: i64) -> Result<Vec<RecoveredCall>, StoreError> {
    let mut recovered = Vec::new();
    for info in store.sessions().await? {
        recovered.extend(recover_session(store, &info.id, at_us).await?);
    }
    Ok(recovered)
}

/// Whether an unfinished call had begun executing: its start is recorded (the mark, or a start time). The one
/// definition both recovery paths use.
fn had_started(unfinished: &UnfinishedCall) -> bool {
    unfinished.run.started_at_us.is_some() || unfinished.run.state == RunState::Started
}

async fn fail_call(
    store: &dyn TranscriptStore,
    session: &SessionId,
    unfinished: &UnfinishedCall,
    at_us: i64,
) -> Result<RecoveredCall, StoreError> {
    let run = RunEnd {
        state: if had_started(unfinished) {
            RunState::Cancelled
        } else {
            RunState::Skipped
        },
        outcome: RunOutcome::Interrupted,
        started_at_us: unfinished.run.started_at_us,
    };
    let result = ToolResultMessage::error(&unfinished.call, INTERRUPTED);
    record(
        store,
        session,
        unfinished,
        (result, run),
        RecoveryAction::Interrupted,
        at_us,
    )
    .await
}

/// Stores `result` and its run's end for `unfinished` at `at_us`, and says what recovery did (`action`): the one
/// write every way of recovering a call ends with.
async fn record(
    store: &dyn TranscriptStore,
    session: &SessionId,
    unfinished: &UnfinishedCall,
    (result, run): (ToolResultMessage, RunEnd),
    action: RecoveryAction,
    at_us: i64,
) -> Result<RecoveredCall, StoreError> {
    let result_seq = store
        .append_tool_result(session, unfinished.run.request, &result, Some(run), at_us)
        .await?;
    Ok(RecoveredCall {
        session: session.clone(),
        request: unfinished.run.request,
        call_id: unfinished.call.id.clone(),
        tool_name: unfinished.call.name.clone(),
        fragment_seq: unfinished.run.fragment_seq,
        had_started: had_started(unfinished),
        action,
        result_seq,
    })
}

/// Recovers `session` with `policy`, re-executing with the engine's tools and hooks ([`Engine::recover`](crate::Engine::recover)).
/// Calls run one at a time in admission order.
pub(crate) async fn recover_with_tools(
    parts: &EngineParts,
    session: &SessionId,
    policy: RecoveryPolicy,
) -> Result<Vec<RecoveredCall>, StoreError> {
    let store = parts.store.as_ref();
    let mut recovered = Vec::new();
    for unfinished in store.unfinished_calls(session).await? {
        let idempotent = parts
            .toolbox
            .get(&unfinished.call.name)
            .is_some_and(|tool| tool.spec().idempotent);
        let call = if policy == RecoveryPolicy::ReExecuteIdempotent && idempotent {
            reexecute(parts, session, &unfinished).await?
        } else {
            fail_call(store, session, &unfinished, parts.clock.now_us()).await?
        };
        recovered.push(call);
    }
    Ok(recovered)
}

/// Runs an unfinished call of an idempotent tool again, through the same gate, preparation and hooks as a live call.
async fn reexecute(
    parts: &EngineParts,
    session: &SessionId,
    unfinished: &UnfinishedCall,
) -> Result<RecoveredCall, StoreError> {
    let call = Arc::new(unfinished.call.clone());
    let gate = CallGate::new(session.clone(), unfinished.run.request, parts.lease_guard.clone());
    let prepared = match gate.refusal() {
        // The lease may have expired (contract §7.5.4): the call is not run again; its result says why.
        Some(refused) => Err((refused.outcome, refused.into_result(&call))),
        None => prepare(&call, &parts.toolbox, &parts.hooks)
            .await
            .map_err(|immediate| (immediate.outcome, ToolResultMessage::error(&call, immediate.text))),
    };
    let (result, run) = match prepared {
        Err((outcome, result)) => (
            result,
            RunEnd {
                state: RunState::Skipped,
                outcome,
                started_at_us: None,
            },
        ),
        Ok(ready) => {
            let started_at_us = parts.clock.now_us();
            // Like a live start: the mark says the call began again, should this run crash too.
            parts
                .store
                .mark_started(session, &unfinished.run.key(), started_at_us)
                .await?;
            // Recovery has no event stream: updates go nowhere.
            let context = gate.context(&call.id, CancellationToken::new(), UpdateSink::disconnected());
            let executed = execute(ready, Arc::clone(&call), parts.hooks.clone(), context).await;
            let run = RunEnd {
                state: executed.run_state(),
                outcome: executed.outcome,
                started_at_us: Some(started_at_us),
            };
            (executed.into_result(&call), run)
        }
    };
    record(
        parts.store.as_ref(),
        session,
        unfinished,
        (result, run),
        RecoveryAction::ReExecuted,
        parts.clock.now_us(),
    )
    .await
}

/// Settles the unfinished calls of `session` whose body's end is known (`ends`, by call id): a returned body's result
/// goes through the `after` hooks and is stored with its run's end, exactly as a live call's is (contract §4.6,
/// §5.4); an interrupted one is recovered as [`recover_session`] recovers it. Unfinished calls not in `ends`, and
/// ends of calls that have a result already, are left alone.
pub(crate) async fn settle_known(
    parts: &EngineParts,
    session: &SessionId,
    mut ends: Vec<(String, BodyEnd)>,
) -> Result<Vec<RecoveredCall>, StoreError> {
    let store = parts.store.as_ref();
    let mut settled = Vec::new();
    for unfinished in store.unfinished_calls(session).await? {
        let Some(at) = ends.iter().position(|(call_id, _)| *call_id == unfinished.call.id) else {
            continue;
        };
        let (_, end) = ends.swap_remove(at);
        let returned = match end {
            BodyEnd::Interrupted => {
                settled.push(fail_call(store, session, &unfinished, parts.clock.now_us()).await?);
                continue;
            }
            BodyEnd::Returned(returned) => returned,
        };
        let executed = finalize(
            &unfinished.call,
            crate::response::execute::body_returned(returned),
            &parts.hooks,
        )
        .await;
        let ended = executed.settle(&unfinished.call, unfinished.run.started_at_us);
        let at_us = parts.clock.now_us();
        settled.push(record(store, session, &unfinished, ended, RecoveryAction::Settled, at_us).await?);
    }
    Ok(settled)
}

/// Whether a stored conversation waits for the model (contract §3.6.12, §7.4.3): its canonical context ends with the
/// user's prompt (the crash came before any response was stored), with results for the model to read, or with a
/// response without calls that stopped for tools or failed. It does not when it is empty, when it ends with a final
/// answer (a response that ended normally, `stop` or `length`, without calls), or when its last response has calls
/// without results (recovery gives them theirs first).
///
/// The one rule both ask: [`Agent::resume`](crate::Agent::resume) (a loop resumed on a conversation that does not
/// wait ends at once as `completed`) and [`Agent::resume_after_crash`](crate::Agent::resume_after_crash).
pub fn expects_answer<'a, C>(context: C) -> bool
where
    C: IntoIterator<Item = &'a Message>,
    C::IntoIter: DoubleEndedIterator,
{
    match context.into_iter().next_back() {
        None => false,
        Some(Message::User(_) | Message::ToolResult(_)) => true,
        Some(Message::Assistant(last)) => {
            last.tool_calls().next().is_none()
                && (last.stop_reason.is_abnormal() || last.stop_reason == StopReason::ToolUse)
        }
    }
}

/// What [`Agent::resume_after_crash`](crate::Agent::resume_after_crash) did: the calls it recovered, and the continued run when the conversation
/// still expected an answer.
#[derive(Debug)]
pub struct Resumed {
    /// The unfinished calls, each now with a result.
    pub recovered: Vec<RecoveredCall>,
    /// The continued agent loop, or `None` when the stored conversation was already answered.
    pub events: Option<EventStream>,
}

#[cfg(test)]
mod tests {
    use headstart_core::{AssistantMessage, ContentBlock, Message, StopReason, ToolArguments, ToolCall};
    use headstart_core::{ToolResultMessage, Usage, UserMessage};

    use super::{expects_answer, BodyEnd, INTERRUPTED};

    #[test]
    fn an_interrupted_body_end_is_the_interrupted_result() {
        assert_eq!(BodyEnd::Interrupted.into_result().unwrap_err().message, INTERRUPTED);
        let returned = BodyEnd::Returned(Ok(crate::ToolOutput::text("x")));
        assert_eq!(returned.into_result(), Ok(crate::ToolOutput::text("x")));
    }

    fn response(stop_reason: StopReason, with_call: bool) -> Message {
        let mut content = vec![ContentBlock::text("…")];
        if with_call {
            content.push(ContentBlock::ToolCall(ToolCall {
                id: "c1".to_owned(),
                name: "fetch".to_owned(),
                arguments: ToolArguments::Valid(serde_json::Map::new()),
                provider_async: false,
            }));
        }
        Message::Assistant(AssistantMessage {
            turn_id: "t".to_owned(),
            stop_reason,
            content,
            usage: Usage::default(),
            model: None,
            error_message: None,
        })
    }

    fn result() -> Message {
        let call = ToolCall {
            id: "c1".to_owned(),
            name: "fetch".to_owned(),
            arguments: ToolArguments::Valid(serde_json::Map::new()),
            provider_async: false,
        };
        Message::ToolResult(ToolResultMessage::error(&call, "interrupted"))
    }

    #[test]
    fn a_conversation_waits_for_the_model_unless_empty_answered_or_missing_results() {
        let user = || Message::User(UserMessage::new("hi"));
        let cases = [
            (vec![], false),
            (vec![user()], true),
            (vec![user(), response(StopReason::ToolUse, true), result()], true),
            (vec![user(), response(StopReason::Stop, true), result()], true),
            (vec![user(), response(StopReason::Stop, false)], false),
            (vec![user(), response(StopReason::Length, false)], false),
            (vec![user(), response(StopReason::Error, false)], true),
            (vec![user(), response(StopReason::ToolUse, false)], true),
            (vec![user(), response(StopReason::ToolUse, true)], false),
        ];
        for (context, expected) in cases {
            assert_eq!(expects_answer(&context), expected, "{context:?}");
        }
    }
}
