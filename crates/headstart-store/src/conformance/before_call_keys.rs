//! A session as the stores wrote it before call ids were unique per response (contract §7.2.2), for each backend's
//! migration test: the backend writes [`OldSession`]'s rows with its old DDL, opens the store (which upgrades it),
//! and [`OldSession::check_upgraded`] checks that nothing was lost and that repeated ids are taken afterwards.

use headstart_core::model::{AssistantMessage, Message, StopReason, ToolCall, ToolResultMessage, Usage, UserMessage};

use super::data::{admit, call, finished, fragment, prefix, result};
use crate::types::{CallKey, RunState, SessionId};
use crate::{StoreError, TranscriptStore};

/// The old session `old`: the prompt, a response admitting `a` (finished) and `b` (started when the process
/// stopped) beside `d` (never admitted: its "not executed" result), and a second response.
pub struct OldSession {
    /// The finished call.
    pub a: ToolCall,
    /// The call that was running when the process stopped.
    pub b: ToolCall,
    /// The call that was never admitted.
    pub d: ToolCall,
    /// The first response (request 0).
    pub first: AssistantMessage,
    /// The second response (request 1).
    pub second: AssistantMessage,
}

/// The rows of `tool_runs` the old stores held for [`OldSession`], as SQL `VALUES` for the columns `(session_id,
/// call_id, admission, tool_name, request, fragment_seq, state, outcome, admitted_at_us, started_at_us,
/// ended_at_us, result_seq)`.
pub const OLD_RUNS: &str = "('old', 'a', 1, 'lookup', 0, 2, 'finished', 'finished', 2, 2, 3, 3),
    ('old', 'b', 2, 'lookup', 0, 2, 'started', NULL, 2, 2, NULL, NULL)";

impl Default for OldSession {
    fn default() -> Self {
        let (a, b, d) = (call("a", "lookup"), call("b", "lookup"), call("d", "lookup"));
        let first = prefix("r0", "checking", &[a.clone(), b.clone(), d.clone()]);
        let second = fragment("r1", StopReason::Stop, "done", &[], Usage::default());
        OldSession { a, b, d, first, second }
    }
}

impl OldSession {
    /// The messages as `(seq, request, message)`, results without a request, as the old stores wrote them.
    pub fn messages(&self) -> [(i64, Option<i64>, Message); 5] {
        [
            (1, None, Message::User(UserMessage::new("go"))),
            (2, Some(0), Message::Assistant(self.first.clone())),
            (3, None, Message::ToolResult(result(&self.a, "A"))),
            (
                4,
                None,
                Message::ToolResult(ToolResultMessage::error(&self.d, "not executed")),
            ),
            (5, Some(1), Message::Assistant(self.second.clone())),
        ]
    }

    /// Checks that `store`, upgraded, holds the session whole (the result of an admitted call now carries its
    /// run's request), then that it ends `b`'s run, admits `a` again in a later response, and still refuses `a`
    /// twice within that response.
    pub async fn check_upgraded<S: TranscriptStore + ?Sized>(&self, store: &S) {
        let session = SessionId::from("old");
        let log = store.load_log(&session).await.expect("log");
        assert_eq!(
            log.iter().map(|m| (m.seq, m.request)).collect::<Vec<_>>(),
            [(1, None), (2, Some(0)), (3, Some(0)), (4, None), (5, Some(1))],
            "the result of an admitted call gets its run's request; a never-admitted call's keeps none"
        );
        assert_eq!(log[1].message, Message::Assistant(self.first.clone()));
        assert_eq!(log[4].message, Message::Assistant(self.second.clone()));
        let runs = store.tool_runs(&session).await.expect("runs");
        let summary: Vec<(CallKey, RunState, Option<u64>)> =
            runs.iter().map(|r| (r.key(), r.state, r.result_seq)).collect();
        assert_eq!(
            summary,
            [
                (CallKey::new(0, "a"), RunState::Finished, Some(3)),
                (CallKey::new(0, "b"), RunState::Started, None)
            ]
        );
        let unfinished = store.unfinished_calls(&session).await.expect("unfinished");
        assert_eq!(unfinished.len(), 1);
        assert_eq!(
            (unfinished[0].run.key(), &unfinished[0].call),
            (CallKey::new(0, "b"), &self.b)
        );
        let context = store.model_context(&session).await.expect("context");
        let shape: Vec<String> = context
            .iter()
            .map(|message| match message {
                Message::ToolResult(r) => format!("result {}", r.tool_call_id),
                other => other.role().to_owned(),
            })
            .collect();
        assert_eq!(shape, ["user", "assistant", "result a", "result d", "assistant"]);

        store
            .append_tool_result(&session, 0, &result(&self.b, "B"), finished(None), 6)
            .await
            .expect("b's result");
        let again = prefix("r2", "again", std::slice::from_ref(&self.a));
        assert_eq!(
            store.commit_fragment(&session, 2, &again, &admit(&[&self.a]), 7).await,
            Ok(7)
        );
        let err = store
            .commit_fragment(&session, 2, &again, &admit(&[&self.a]), 8)
            .await
            .expect_err("a again within request 2");
        assert!(
            matches!(&err, StoreError::Conflict(m) if m.message().contains("already admitted")),
            "{err:?}"
        );
        assert_eq!(store.unfinished_calls(&session).await.expect("unfinished").len(), 1);
    }
}
