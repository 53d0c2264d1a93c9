//! Tool runs as rows: the checks of a fragment's admissions and of a result against its run, and a run row read
//! back.

use std::collections::HashSet;

use headstart_core::model::{AssistantMessage, Message, ToolCall};

use super::messages::decode;
use crate::types::{AdmittedCall, CallKey, RunEnd, RunOutcome, RunState, ToolRun};
use crate::StoreError;

/// A tool-run row as stored, before validation.
#[derive(Debug, Clone)]
pub struct RunRow {
    /// `call_id`.
    pub call_id: String,
    /// `tool_name`.
    pub tool_name: String,
    /// `request`.
    pub request: i64,
    /// `fragment_seq`.
    pub fragment_seq: i64,
    /// `state`.
    pub state: String,
    /// `outcome`.
    pub outcome: Option<String>,
    /// `sealed_at_us`.
    pub sealed_at_us: Option<i64>,
    /// `admitted_at_us`.
    pub admitted_at_us: i64,
    /// `started_at_us`.
    pub started_at_us: Option<i64>,
    /// `ended_at_us`.
    pub ended_at_us: Option<i64>,
    /// `result_seq`.
    pub result_seq: Option<i64>,
}

impl RunRow {
    /// Checks the row and turns it into a [`ToolRun`].
    pub fn validate(self, session: &str) -> Result<ToolRun, StoreError> {
        let bad = |what: String| {
            StoreError::Decode(format!("session {session}, run of call {}: {what}", self.call_id).into())
        };
        let state = RunState::parse(&self.state).ok_or_else(|| bad(format!("unknown state {:?}", self.state)))?;
        let outcome = match &self.outcome {
            None => None,
            Some(name) => Some(RunOutcome::parse(name).ok_or_else(|| bad(format!("unknown outcome {name:?}")))?),
        };
        let request =
            u32::try_from(self.request).map_err(|_| bad(format!("request {} is out of range", self.request)))?;
        let fragment_seq = u64::try_from(self.fragment_seq)
            .map_err(|_| bad(format!("fragment seq {} is out of range", self.fragment_seq)))?;
        let result_seq = self
            .result_seq
            .map(|seq| u64::try_from(seq).map_err(|_| bad(format!("result seq {seq} is out of range"))))
            .transpose()?;
        Ok(ToolRun {
            call_id: self.call_id,
            tool_name: self.tool_name,
            request,
            fragment_seq,
            state,
            outcome,
            sealed_at_us: self.sealed_at_us,
            admitted_at_us: self.admitted_at_us,
            started_at_us: self.started_at_us,
            ended_at_us: self.ended_at_us,
            result_seq,
        })
    }
}

/// Finds call `call_id` in `body`, the stored body of its owning fragment (`None` when the fragment is missing).
pub fn owning_call(
    session: &str,
    fragment_seq: i64,
    call_id: &str,
    body: Option<&str>,
) -> Result<ToolCall, StoreError> {
    let missing = |why: &str| {
        StoreError::Decode(
            format!("session {session}, run of call {call_id}: its fragment (message seq {fragment_seq}) {why}").into(),
        )
    };
    let body = body.ok_or_else(|| missing("is missing"))?;
    match decode(session, fragment_seq, body)? {
        Message::Assistant(fragment) => fragment
            .tool_calls()
            .find(|call| call.id == call_id)
            .cloned()
            .ok_or_else(|| missing("does not contain the call")),
        other => Err(missing(&format!("is a {} message", other.role()))),
    }
}

/// The checks of a fragment commit that need no database: every admitted call is a call of the fragment, and none
/// is admitted twice. The backend then checks that none is already admitted in the same request
/// ([`already_admitted`]): a call is identified by its request and id ([`CallKey`]), so the same id admitted by
/// another response of the session is another call.
pub fn check_admissions(what: &str, fragment: &AssistantMessage, admitted: &[AdmittedCall]) -> Result<(), StoreError> {
    // Sets, not scans: a flooded response admits thousands of calls in one commit.
    let in_fragment: HashSet<&str> = fragment.tool_calls().map(|c| c.id.as_str()).collect();
    let mut seen = HashSet::with_capacity(admitted.len());
    for call in admitted {
        if !in_fragment.contains(call.call_id.as_str()) {
            return Err(StoreError::Conflict(
                format!(
                    "{what}: admitted call {} is not a tool call of the fragment",
                    call.call_id
                )
                .into(),
            ));
        }
        if !seen.insert(call.call_id.as_str()) {
            return Err(StoreError::Conflict(
                format!("{what}: call {} is admitted twice in one commit", call.call_id).into(),
            ));
        }
    }
    Ok(())
}

/// The error for admitting call `call` again: its response already has a run for it, in state `state`.
pub fn already_admitted(what: &str, call: &CallKey, state: &str) -> StoreError {
    StoreError::Conflict(
        format!(
            "{what}: call {} is already admitted in this response (request {}; its run is {state})",
            call.call_id, call.request
        )
        .into(),
    )
}

/// The states a run can end in.
fn is_end_state(state: RunState) -> bool {
    matches!(state, RunState::Finished | RunState::Cancelled | RunState::Skipped)
}

/// Checks a tool result against the call's run: `run` is how the result ends it (`None` for a call that was never
/// admitted), `existing` the run's stored state name and result seq (`None` when the call has no run).
pub fn check_result(
    what: &str,
    call: &CallKey,
    run: Option<&RunEnd>,
    existing: Option<(&str, Option<i64>)>,
) -> Result<(), StoreError> {
    let has_ended =
        |state: &str, result_seq: Option<i64>| result_seq.is_some() || !matches!(state, "admitted" | "started");
    match (run, existing) {
        (Some(_), None) => Err(StoreError::Conflict(
            format!("{what}: call {call} has no admitted run").into(),
        )),
        (Some(end), Some(_)) if !is_end_state(end.state) => Err(StoreError::Conflict(
            format!("{what}: a run cannot end in state {}", end.state.as_str()).into(),
        )),
        (_, Some((state, result_seq))) if has_ended(state, result_seq) => Err(StoreError::Conflict(
            format!("{what}: the run of call {call} already ended ({state})").into(),
        )),
        (None, Some(_)) => Err(StoreError::Conflict(
            format!("{what}: call {call} has an open run, which its result must end").into(),
        )),
        _ => Ok(()),
    }
}
