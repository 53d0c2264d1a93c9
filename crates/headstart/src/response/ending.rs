//! Ending a response (contract §3.5): the terminal fragment, its batch, and the calls that never ran.

use std::collections::HashSet;
use std::sync::Arc;

use headstart_core::accumulator::Ending;
use headstart_core::{ErrorReason, Message, StopReason, ToolCall, ToolResultMessage};
use headstart_store::StoreError;

use crate::events::event::AgentEvent;
use crate::response::driver::ResponseDriver;

/// The message a stream gets when it stops without `done`/`error` (contract §2).
pub const MISSING_TERMINAL: &str = "stream ended without a terminal event";
/// The reason given when the caller cancels (contract §5.5).
pub const CANCELLED_BY_CALLER: &str = "cancelled by the caller";

impl ResponseDriver<'_> {
    /// The caller cancelled (contract §5.5): mid-stream the response ends as `aborted`; after the stream, the calls
    /// that have not started are settled as cancelled before start.
    pub(super) async fn on_cancel(&mut self) {
        self.progress.cancel_seen = true;
        if self.progress.stream_ended {
            self.abort_calls(CANCELLED_BY_CALLER);
        } else {
            self.fail_and_end(ErrorReason::Aborted, CANCELLED_BY_CALLER).await;
        }
    }

    /// Ends the response as `reason` with `message` (the accumulator keeps what the stream delivered).
    pub(super) async fn fail_and_end(&mut self, reason: ErrorReason, message: impl Into<String>) {
        self.accumulator.fail(reason, message);
        self.end_response().await;
    }

    /// The stream ended: the terminal fragment is committed with the calls it admits (every call for `tool_use`, the
    /// early ones for `stop`/`length`, none for an abnormal end), and the calls not admitted are answered "not
    /// executed" (contract §3.5).
    pub(super) async fn end_response(&mut self) {
        if self.progress.stream_ended {
            return;
        }
        self.progress.stream_ended = true;
        self.chat.end(
            self.accumulator.ending(),
            self.accumulator.model(),
            self.accumulator.response_id(),
        );
        let Some(Ending {
            stop_reason,
            usage,
            error_message,
        }) = self.accumulator.ending().cloned()
        else {
            return;
        };
        let range = self.prefix.committed()..self.accumulator.len();
        let calls = self.calls_in(range.clone());
        let admitted: Vec<ToolCall> = calls
            .iter()
            .filter(|(index, _)| admitted_at_end(stop_reason, self.prefix.is_early(*index)))
            .map(|(_, call)| call.clone())
            .collect();
        let fragment = self.fragment(range.clone(), stop_reason, usage, error_message.clone());
        // Calls stored as admitted are the scheduler's from now on, so each gets exactly one result: it runs, or,
        // when the response failed or the store did, it is cancelled before start with the rest.
        let committed = match self.commit_fragment(fragment, admitted.clone()).await {
            Ok(admission) => {
                self.prefix.terminal_committed(range.end);
                self.admit(admission);
                true
            }
            Err((_, fragment)) => {
                // The terminal fragment could not be stored: show it anyway, marked as not durable.
                self.progress.fragment_open = false;
                self.out.push(AgentEvent::MessageEnd {
                    seq: None,
                    message: Arc::new(Message::Assistant(fragment)),
                });
                false
            }
        };
        match abort_reason(
            stop_reason,
            error_message.as_deref(),
            self.progress.store_failure.as_ref(),
        ) {
            Some(reason) => self.abort_calls(&reason),
            None => self.advance().await,
        }
        let admitted_now: HashSet<&str> = if committed {
            admitted.iter().map(|call| call.id.as_str()).collect()
        } else {
            HashSet::new()
        };
        for (_, call) in calls {
            if !admitted_now.contains(call.id.as_str()) {
                let text = format!("not executed: the response ended with stop reason {stop_reason}");
                let result = ToolResultMessage::error(&call, text);
                let call = Arc::new(call);
                if committed {
                    self.record_result(&call, result, None, true);
                } else {
                    // The call is not in the transcript (its fragment could not be stored): a stored result would
                    // be an orphan that no model context can hold, so it is only shown, like the fragment.
                    self.emit_result(&call, result, None, None, true);
                }
            }
        }
    }
}

/// Whether the terminal fragment of a response that ended with `stop_reason` admits a call not admitted before
/// (contract §3.5): every call for `tool_use`, the early ones for `stop` and `length`, none for an abnormal end.
fn admitted_at_end(stop_reason: StopReason, early: bool) -> bool {
    match stop_reason {
        StopReason::ToolUse => true,
        StopReason::Stop | StopReason::Length => early,
        StopReason::Error | StopReason::Aborted => false,
    }
}

/// Why the admitted calls that have not started are cancelled before start when the response ends, if they are
/// (contract §3.5, §5.5): the abnormal end's message (or its stop reason), or the store's failure.
fn abort_reason(
    stop_reason: StopReason,
    error_message: Option<&str>,
    store_failure: Option<&StoreError>,
) -> Option<String> {
    if stop_reason.is_abnormal() {
        Some(error_message.map_or_else(|| stop_reason.to_string(), str::to_owned))
    } else {
        store_failure.map(ToString::to_string)
    }
}

#[cfg(test)]
mod tests {
    use headstart_core::{DoneReason, StopReason};

    use super::{abort_reason, admitted_at_end, CANCELLED_BY_CALLER};
    use crate::config::EngineConfig;
    use crate::response::fixture::{call, done, start, text, Fixture};

    #[tokio::test]
    async fn a_stop_response_admits_its_early_calls_and_answers_its_sync_calls_not_executed() {
        let mut fixture = Fixture::new(EngineConfig::default().early_execution(false)).await;
        let mut driver = fixture.driver();
        for delta in [start()]
            .into_iter()
            .chain(call(0, "c1", "fetch"))
            .chain(call(1, "c2", "write"))
            .chain([done(DoneReason::Stop)])
        {
            driver.accept_delta(delta);
        }
        driver.end_response().await;
        assert!(driver.progress.stream_ended);
        assert_eq!(
            (driver.prefix.committed(), driver.runner.len()),
            (2, 1),
            "only the early call is admitted"
        );
        assert_eq!(driver.runner.slot(0).call.id, "c1");
        let (write, written) = std::future::poll_fn(|cx| driver.results.poll_written(cx)).await;
        assert!(written.is_ok());
        assert_eq!(
            (
                write.call.id.as_str(),
                write.result.text().as_str(),
                write.run.is_none()
            ),
            ("c2", "not executed: the response ended with stop reason stop", true)
        );
        drop(driver);
        assert_eq!(
            fixture.log().await,
            [
                "assistant:stop",
                "tool_result:not executed: the response ended with stop reason stop"
            ]
        );
    }

    #[tokio::test]
    async fn cancelling_mid_stream_ends_the_response_as_aborted_and_admits_nothing() {
        let mut fixture = Fixture::new(EngineConfig::default().early_execution(false)).await;
        let mut driver = fixture.driver();
        for delta in [start()].into_iter().chain(text(0, "hi")).chain(call(1, "c1", "fetch")) {
            driver.accept_delta(delta);
        }
        driver.on_cancel().await;
        let ending = driver.accumulator.ending().expect("ended");
        assert_eq!(
            (ending.stop_reason, ending.error_message.as_deref()),
            (StopReason::Aborted, Some(CANCELLED_BY_CALLER))
        );
        assert_eq!(driver.runner.len(), 0);
        // A second end (the stream's own `done` arriving late) changes nothing.
        driver.end_response().await;
        drop(driver);
        assert_eq!(fixture.log().await, ["assistant:aborted"]);
    }

    #[test]
    fn the_terminal_fragment_admits_by_stop_reason_and_an_abnormal_end_cancels_the_rest() {
        let every = [
            StopReason::ToolUse,
            StopReason::Stop,
            StopReason::Length,
            StopReason::Error,
            StopReason::Aborted,
        ];
        let admits: Vec<(bool, bool)> = every
            .iter()
            .map(|reason| (admitted_at_end(*reason, true), admitted_at_end(*reason, false)))
            .collect();
        assert_eq!(
            admits,
            [
                (true, true),
                (true, false),
                (true, false),
                (false, false),
                (false, false)
            ]
        );
        let failure = headstart_store::StoreError::NoSession("s".to_owned());
        for reason in every {
            let cancelled = abort_reason(reason, Some("boom"), None);
            let with_failure = abort_reason(reason, None, Some(&failure));
            if reason.is_abnormal() {
                assert_eq!(cancelled.as_deref(), Some("boom"));
                assert_eq!(with_failure, Some(reason.to_string()), "the stop reason names it");
            } else {
                assert_eq!(cancelled, None, "a normal end runs its calls");
                assert_eq!(with_failure, Some(failure.to_string()), "a failed store cancels them");
            }
        }
    }
}
