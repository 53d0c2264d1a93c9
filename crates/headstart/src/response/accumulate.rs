//! Accumulating the model's deltas, and the commit decision (contract §3.1): which sealed call triggers a prefix
//! commit.

use headstart_core::accumulator::BlockKind;
use headstart_core::{Applied, DeltaEvent};

use crate::events::event::AgentEvent;
use crate::response::driver::ResponseDriver;
use crate::response::step::FollowUp;

impl ResponseDriver<'_> {
    /// Accumulates a delta and emits its update; returns what must follow that needs the store. Synchronous, so
    /// the common case (a delta inside an open block) costs no future at all.
    pub(super) fn accept_delta(&mut self, event: DeltaEvent) -> Option<FollowUp> {
        match event {
            DeltaEvent::TextDelta { index, delta } => self.accept_piece(BlockKind::Text, index, delta),
            DeltaEvent::ThinkingDelta { index, delta } => self.accept_piece(BlockKind::Thinking, index, delta),
            DeltaEvent::ToolcallDelta { index, delta } => self.accept_piece(BlockKind::ToolCall, index, delta),
            other => self.accept_event(other),
        }
    }

    /// A `*_delta` event, by its parts: only the text moves on, into the `message_update` built in place (moving
    /// whole events from slot to slot cost more than the rest of the engine's per-delta work).
    #[inline]
    pub(super) fn accept_piece(&mut self, kind: BlockKind, index: usize, delta: String) -> Option<FollowUp> {
        self.note_chunk();
        if let Err(violation) = self.accumulator.apply_piece(kind, index, &delta) {
            return Some(FollowUp::Fail(violation.to_string()));
        }
        // Re-based to the open fragment (contract §3.4).
        let index = index.saturating_sub(self.prefix.committed());
        self.open_fragment();
        self.out.push_with(|| AgentEvent::MessageUpdate {
            index,
            delta: kind.delta(index, delta),
        });
        None
    }

    /// Any other event: starts, ends, `start`, `done` and `error`.
    pub(super) fn accept_event(&mut self, event: DeltaEvent) -> Option<FollowUp> {
        self.note_chunk();
        match self.accumulator.apply_ref(&event) {
            Err(violation) => Some(FollowUp::Fail(violation.to_string())),
            Ok(Applied::Started) => {
                self.open_fragment();
                None
            }
            Ok(Applied::Ended) => Some(FollowUp::End),
            Ok(applied) => {
                if let Some(index) = event.index() {
                    // The accumulator copied what it keeps: the event itself moves on, re-based (contract §3.4).
                    let index = index.saturating_sub(self.prefix.committed());
                    self.open_fragment();
                    self.out.push(AgentEvent::MessageUpdate {
                        index,
                        delta: event.with_index(index),
                    });
                }
                match applied {
                    Applied::Opened(index) => {
                        self.note_opened(index);
                        None
                    }
                    Applied::Sealed(index) => {
                        self.note_sealed(index);
                        self.triggers_commit(index).then_some(FollowUp::Commit(index))
                    }
                    _ => None,
                }
            }
        }
    }

    /// A block opened: a call tells the prefix whether its tool (or the stream's flag) makes it early.
    pub(super) fn note_opened(&mut self, index: usize) {
        let (Some(name), Some(flagged)) = (
            self.accumulator.call_name(index),
            self.accumulator.call_flagged_async(index),
        ) else {
            return;
        };
        let early = self.parts.toolbox.is_early(name, flagged);
        self.prefix.opened_call(index, early);
    }

    pub(super) fn note_sealed(&mut self, index: usize) {
        if let Some(id) = self.accumulator.call_id(index) {
            self.seal_times.sealed(id, self.parts.clock.now_us());
        }
    }

    /// Whether sealing the call at `index` triggers a prefix commit (`Prefix::triggers_commit`).
    pub(super) fn triggers_commit(&self, index: usize) -> bool {
        // After a store failure the run is ending: nothing new starts early.
        self.progress.store_failure.is_none()
            && self.accumulator.call_id(index).is_some_and(|id| {
                let open_before = self.accumulator.any_open_in(self.prefix.committed()..index);
                self.prefix.triggers_commit(index, id, open_before)
            })
    }
}

#[cfg(test)]
mod tests {
    use headstart_core::DeltaEvent;

    use crate::config::EngineConfig;
    use crate::response::fixture::{call, start, taken, text, Fixture};
    use crate::response::step::FollowUp;

    /// What each delta led to: `-` for nothing, `commit <index>`, `end` or `fail`.
    fn follow_ups(fixture: &mut Fixture, deltas: impl IntoIterator<Item = DeltaEvent>) -> Vec<String> {
        let mut driver = fixture.driver();
        let led_to = deltas
            .into_iter()
            .map(|delta| match driver.accept_delta(delta) {
                None => "-".to_owned(),
                Some(FollowUp::Commit(index)) => format!("commit {index}"),
                Some(FollowUp::End) => "end".to_owned(),
                Some(FollowUp::Fail(message)) => format!("fail: {message}"),
            })
            .collect();
        driver.out.flush();
        led_to
    }

    #[tokio::test]
    async fn a_sealed_early_call_triggers_a_commit_and_a_sync_one_does_not() {
        let mut fixture = Fixture::new(EngineConfig::default()).await;
        let deltas = [start()]
            .into_iter()
            .chain(call(0, "c1", "fetch"))
            .chain(call(1, "c2", "write"));
        assert_eq!(
            follow_ups(&mut fixture, deltas),
            ["-", "-", "-", "commit 0", "-", "-", "-"]
        );
    }

    #[tokio::test]
    async fn no_prefix_passes_an_open_sync_call() {
        let mut fixture = Fixture::new(EngineConfig::default()).await;
        let [write_start, write_delta, write_end] = call(0, "c1", "write");
        let deltas = [start(), write_start, write_delta]
            .into_iter()
            .chain(call(1, "c2", "fetch"))
            .chain([write_end]);
        assert_eq!(
            follow_ups(&mut fixture, deltas),
            ["-"; 7],
            "the sync call at 0 holds every later call back"
        );
    }

    #[tokio::test]
    async fn the_stream_may_flag_a_call_early() {
        let mut fixture = Fixture::new(EngineConfig::default()).await;
        let [_, delta, end] = call(0, "c1", "write");
        let flagged = DeltaEvent::ToolcallStart {
            index: 0,
            id: "c1".to_owned(),
            name: "write".to_owned(),
            early: true,
            provider_async: false,
        };
        assert_eq!(
            follow_ups(&mut fixture, [start(), flagged, delta, end]),
            ["-", "-", "-", "commit 0"]
        );
    }

    #[tokio::test]
    async fn nothing_commits_early_when_early_execution_is_off_or_past_the_call_limit() {
        let mut off = Fixture::new(EngineConfig::default().early_execution(false)).await;
        let deltas = [start()].into_iter().chain(call(0, "c1", "fetch"));
        assert_eq!(follow_ups(&mut off, deltas), ["-"; 4]);

        let mut limited = Fixture::new(EngineConfig::default().max_calls_per_response(Some(1))).await;
        let deltas = [start()]
            .into_iter()
            .chain(call(0, "c1", "fetch"))
            .chain(call(1, "c2", "fetch"));
        assert_eq!(
            follow_ups(&mut limited, deltas),
            ["-", "-", "-", "commit 0", "-", "-", "-"],
            "the second call is past the limit: it is refused at preparation, not worth a commit"
        );
    }

    #[tokio::test]
    async fn a_protocol_violation_fails_and_updates_are_emitted_in_order() {
        let mut fixture = Fixture::new(EngineConfig::default()).await;
        let deltas = [start()]
            .into_iter()
            .chain(text(0, "hi"))
            .chain([DeltaEvent::TextDelta {
                index: 5,
                delta: "x".to_owned(),
            }]);
        let led_to = follow_ups(&mut fixture, deltas);
        assert_eq!(&led_to[..4], ["-"; 4]);
        assert!(led_to[4].starts_with("fail: "), "{led_to:?}");
        assert_eq!(
            taken(&mut fixture.events),
            [
                "message_start",
                "message_update:0",
                "message_update:0",
                "message_update:0"
            ]
        );
    }
}
