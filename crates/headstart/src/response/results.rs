//! Results: queued for writing in the order calls settled, and their events emitted once the write ended (contract
//! §6.1, §6.5).

use std::sync::Arc;

use headstart_core::{Message, ToolCall, ToolResultMessage};
use headstart_store::{RunEnd, RunOutcome, StoreError};

use crate::events::event::{AgentEvent, Role};
use crate::events::outbox::Outbox;
use crate::response::driver::ResponseDriver;
use crate::response::write_queue::ResultWrite;

impl ResponseDriver<'_> {
    /// Queues a result for writing; its events follow the write (contract §6.1). A call that never executed gets its
    /// `tool_execution_start` then, immediately before its end (contract §5.7).
    pub(super) fn record_result(
        &mut self,
        call: &Arc<ToolCall>,
        result: ToolResultMessage,
        run: Option<RunEnd>,
        never_started: bool,
    ) {
        self.results.push(ResultWrite {
            call: Arc::clone(call),
            result,
            run,
            never_started,
        });
    }

    /// Waits for the write in flight, if any: a fragment commit goes after it, so the engine never has two writes
    /// in flight and the transcript's order is deterministic.
    pub(super) async fn finish_write_in_flight(&mut self) {
        let out = &mut self.out;
        let written = self.results.finish_in_flight(|| out.flush()).await;
        for (write, written) in written {
            self.on_written(write, written);
        }
    }

    /// A result write ended: emit its events.
    pub(super) fn on_written(&mut self, write: ResultWrite, written: Result<u64, StoreError>) {
        let seq = match written {
            Ok(seq) => Some(seq),
            Err(error) => {
                let message = error.to_string();
                tracing::error!(call_id = %write.call.id, %message, "tool result write failed");
                self.progress.store_failure.get_or_insert(error);
                None
            }
        };
        let ResultWrite {
            call,
            result,
            run,
            never_started,
        } = write;
        self.emit_result(&call, result, run.map(|run| run.outcome), seq, never_started);
    }

    /// Emits the events of a result (`seq` is `None` when it is not stored).
    pub(super) fn emit_result(
        &mut self,
        call: &Arc<ToolCall>,
        result: ToolResultMessage,
        outcome: Option<RunOutcome>,
        seq: Option<u64>,
        never_started: bool,
    ) {
        push_result_events(self.out, call, result, outcome, seq, never_started);
    }
}

/// The events of a result: `tool_execution_end`, then the result's `message_start`/`message_end` (`seq` is `None`
/// when it is not stored); a call that never executed gets its `tool_execution_start` first (contract §5.7).
pub(crate) fn push_result_events(
    out: &mut Outbox,
    call: &Arc<ToolCall>,
    result: ToolResultMessage,
    outcome: Option<RunOutcome>,
    seq: Option<u64>,
    never_started: bool,
) {
    if never_started {
        out.push(AgentEvent::ToolExecutionStart { call: Arc::clone(call) });
    }
    out.push(AgentEvent::ToolExecutionEnd {
        tool_call_id: call.id.clone(),
        is_error: result.is_error,
        outcome,
    });
    out.push(AgentEvent::MessageStart { role: Role::ToolResult });
    out.push(AgentEvent::MessageEnd {
        seq,
        message: Arc::new(Message::ToolResult(result)),
    });
}

#[cfg(test)]
mod tests {
    use headstart_store::SessionId;

    use crate::config::EngineConfig;
    use crate::response::fixture::{result_write, taken, Fixture};

    #[tokio::test]
    async fn a_result_is_shown_after_its_write_and_a_failed_write_stops_the_run() {
        let mut fixture = Fixture::new(EngineConfig::default()).await;
        let mut driver = fixture.driver();
        driver.on_written(result_write("c1"), Ok(7));
        assert!(driver.progress.store_failure.is_none());
        let failure = headstart_store::StoreError::NoSession(SessionId::from("gone").to_string());
        driver.on_written(result_write("c2"), Err(failure));
        assert!(
            driver.progress.store_failure.is_some(),
            "the loop stops after the response"
        );
        driver.out.flush();
        drop(driver);
        let shown = |id: &str, stored: &str| {
            [
                format!("tool_execution_start:{id}"),
                "tool_execution_end".to_owned(),
                "message_start".to_owned(),
                format!("message_end:{stored}"),
            ]
        };
        let expected: Vec<String> = shown("c1", "stored")
            .into_iter()
            .chain(shown("c2", "not stored"))
            .collect();
        assert_eq!(taken(&mut fixture.events), expected);
    }
}
