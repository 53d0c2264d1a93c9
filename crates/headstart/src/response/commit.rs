//! Committing a fragment (contract §3.2, §3.3): commit (durable), then `message_end`, then admission.

use std::sync::Arc;

use headstart_core::{AssistantMessage, ErrorReason, Message, StopReason, ToolCall, Usage};
use tracing::Instrument;

use crate::events::event::AgentEvent;
use crate::response::admission::{self, Admission};
use crate::response::driver::ResponseDriver;

impl ResponseDriver<'_> {
    pub(super) fn turn_id(&mut self) -> String {
        if self.progress.turn_id.is_none() {
            let id = match self.accumulator.response_id() {
                Some(id) => id.to_owned(),
                None => (self.parts.turn_ids)(self.request),
            };
            self.progress.turn_id = Some(id);
        }
        self.progress.turn_id.clone().unwrap_or_default()
    }

    pub(super) fn calls_in(&self, range: std::ops::Range<usize>) -> Vec<(usize, ToolCall)> {
        range
            .filter_map(|index| self.accumulator.tool_call(index).map(|call| (index, call)))
            .collect()
    }

    /// The fragment holding content `range`, as it is stored.
    pub(super) fn fragment(
        &mut self,
        range: std::ops::Range<usize>,
        stop_reason: StopReason,
        usage: Usage,
        error_message: Option<String>,
    ) -> AssistantMessage {
        AssistantMessage {
            turn_id: self.turn_id(),
            stop_reason,
            content: self.accumulator.content(range),
            usage,
            model: self.accumulator.model().map(str::to_owned),
            error_message,
        }
    }

    /// Writes a fragment with the admission records of `calls` (those not admitted before, contract §4.7); on success
    /// emits its `message_end` and returns the admission. On failure returns the store's message and the
    /// fragment, for a caller that still wants to show it.
    pub(super) async fn commit_fragment(
        &mut self,
        fragment: AssistantMessage,
        calls: Vec<ToolCall>,
    ) -> Result<Admission, (String, AssistantMessage)> {
        self.open_fragment();
        let calls: Vec<ToolCall> = calls
            .into_iter()
            .filter(|call| !self.prefix.is_admitted(&call.id))
            .collect();
        self.finish_write_in_flight().await;
        self.out.flush();
        let span = tracing::info_span!("fragment_commit", request = self.request, calls = calls.len());
        let started_us = self.now_us();
        let written = admission::commit_fragment(
            self.parts.store.as_ref(),
            &self.session,
            self.request,
            &fragment,
            calls,
            // Read, not taken: `admit` takes each seal time for the call's telemetry once the commit succeeded.
            |call| self.seal_times.sealed_at(&call.id),
            self.now_us(),
        )
        .instrument(span)
        .await;
        let commit_us = self.now_us() - started_us;
        self.seal_times.committed(commit_us);
        crate::metrics::fragment_committed(commit_us);
        match written {
            Ok((seq, admission)) => {
                self.progress.fragment_open = false;
                self.out.push(AgentEvent::MessageEnd {
                    seq: Some(seq),
                    message: Arc::new(Message::Assistant(fragment)),
                });
                Ok(admission)
            }
            Err(error) => {
                let message = error.to_string();
                tracing::error!(request = self.request, %message, "fragment commit failed");
                self.progress.store_failure.get_or_insert(error);
                Err((message, fragment))
            }
        }
    }

    pub(super) async fn commit_prefix(&mut self, index: usize) {
        let range = self.prefix.committed()..index + 1;
        let calls: Vec<ToolCall> = self.calls_in(range.clone()).into_iter().map(|(_, call)| call).collect();
        let fragment = self.fragment(range, StopReason::ToolUse, Usage::default(), None);
        match self.commit_fragment(fragment, calls).await {
            Ok(admission) => {
                self.prefix.prefix_committed(index);
                self.admit(admission);
                self.advance().await;
            }
            // contract §3.3: nothing of this prefix executes; its content goes into the terminal fragment.
            Err((message, _)) => self.fail_and_end(ErrorReason::Error, message).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use headstart_core::DoneReason;

    use crate::config::EngineConfig;
    use crate::response::fixture::{call, done, start, taken, text, Fixture};

    #[tokio::test]
    async fn a_prefix_is_durable_before_its_message_end_and_its_call_starts_after_both() {
        let mut fixture = Fixture::new(EngineConfig::default()).await;
        let mut driver = fixture.driver();
        for delta in [start()].into_iter().chain(text(0, "hi")).chain(call(1, "c1", "fetch")) {
            driver.accept_delta(delta);
        }
        driver.commit_prefix(1).await;
        driver.accept_delta(done(DoneReason::ToolUse));
        assert_eq!(
            (driver.prefix.committed(), driver.prefix.prefixes(), driver.runner.len()),
            (2, 1, 1)
        );
        driver.out.flush();
        drop(driver);
        assert_eq!(fixture.log().await, ["assistant:tool_use"]);
        let events = taken(&mut fixture.events);
        let end = events.iter().position(|event| event == "message_end:stored");
        let started = events.iter().position(|event| event == "tool_execution_start:c1");
        assert!(end.is_some() && end < started, "{events:?}");
    }

    #[tokio::test]
    async fn a_failed_commit_admits_nothing_and_ends_the_response_as_error() {
        let mut fixture = Fixture::failing_store(EngineConfig::default()).await;
        let mut driver = fixture.driver();
        for delta in [start()].into_iter().chain(call(0, "c1", "fetch")) {
            driver.accept_delta(delta);
        }
        driver.commit_prefix(0).await;
        assert_eq!(
            (driver.prefix.committed(), driver.runner.len()),
            (0, 0),
            "nothing was admitted"
        );
        let ending = driver.accumulator.ending().expect("the response ended");
        assert_eq!(ending.stop_reason, headstart_core::StopReason::Error);
        assert!(driver.progress.store_failure.is_some());
        driver.out.flush();
        drop(driver);
        let events = taken(&mut fixture.events);
        assert!(
            !events.contains(&"message_end:stored".to_owned()),
            "nothing is shown as stored: {events:?}"
        );
        let tail: Vec<&str> = events.iter().rev().take(4).rev().map(String::as_str).collect();
        assert_eq!(
            tail,
            [
                "tool_execution_start:c1",
                "tool_execution_end",
                "message_start",
                "message_end:not stored"
            ],
            "the call is only shown as not executed"
        );
    }
}
