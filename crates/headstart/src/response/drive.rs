//! The loop that feeds the [`ResponseDriver`]: polling its sources in a fixed priority, and taking model deltas in
//! bursts.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use headstart_core::{DeltaEvent, ErrorReason, ModelError};
use headstart_store::SessionId;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tokio_util::task::TaskTracker;

use crate::events::event::{AgentEvent, ResponseOutcome};
use crate::events::outbox::Outbox;
use crate::parts::EngineParts;
use crate::response::driver::ResponseDriver;
use crate::response::ending::MISSING_TERMINAL;
use crate::response::runner::DetachedCalls;
use crate::response::step::{FollowUp, Step};
use crate::response::telemetry::ChatSpan;

impl ResponseDriver<'_> {
    pub(super) async fn handle(&mut self, step: Step) {
        match step {
            // A deferred yield: the task runs again once the runtime has polled what else is ready, the consumer
            // included when it is the runtime's `block_on` future (an immediate wake-up would not give it a turn).
            Step::Burst => tokio::task::yield_now().await,
            Step::FollowUp(follow_up) => self.follow_up(follow_up).await,
            Step::Written(written) => {
                let (write, written) = *written;
                self.on_written(write, written);
            }
            Step::Tool(event) => self.on_runner_event(*event).await,
            Step::Cancelled => self.on_cancel().await,
            Step::Model(None) => self.fail_and_end(ErrorReason::Error, MISSING_TERMINAL).await,
            Step::Model(Some(Err(error))) => {
                let reason = if error.is_aborted() {
                    ErrorReason::Aborted
                } else {
                    ErrorReason::Error
                };
                self.fail_and_end(reason, error.into_message()).await;
            }
            Step::Model(Some(Ok(event))) => {
                if let Some(follow_up) = self.accept_delta(event) {
                    self.follow_up(follow_up).await;
                }
            }
        }
    }

    pub(super) async fn follow_up(&mut self, follow_up: FollowUp) {
        match follow_up {
            FollowUp::Fail(message) => self.fail_and_end(ErrorReason::Error, message).await,
            FollowUp::End => self.end_response().await,
            FollowUp::Commit(index) => self.commit_prefix(index).await,
        }
    }
}

/// What the driver handles next, in the priority docs/scenario-format.md fixes for things due at the same instant: tool returns,
/// timeouts and updates; then external cancellation; then model stream events.
///
/// This is a biased `select!` over the three, written out to keep the per-delta path cheap: cancellation is first
/// checked with a flag read, and its waiter (one per response, registered once) is only polled when nothing is
/// ready, which is the only time a wake-up from it is needed.
fn poll_step<S>(
    driver: &mut ResponseDriver,
    cancel: &CancellationToken,
    cancelled: Pin<&mut WaitForCancellationFutureOwned>,
    stream: Pin<&mut S>,
    cx: &mut Context<'_>,
) -> Poll<Step>
where
    S: Stream<Item = Result<DeltaEvent, ModelError>> + ?Sized,
{
    if let Poll::Ready(written) = driver.results.poll_written(cx) {
        return Poll::Ready(Step::Written(Box::new(written)));
    }
    if let Poll::Ready(event) = driver.runner.poll_event(cx) {
        return Poll::Ready(Step::Tool(Box::new(event)));
    }
    if !driver.progress.cancel_seen && cancel.is_cancelled() {
        return Poll::Ready(Step::Cancelled);
    }
    if !driver.progress.stream_ended {
        if let Poll::Ready(item) = stream.poll_next(cx) {
            return Poll::Ready(Step::Model(item));
        }
    }
    if !driver.progress.cancel_seen && cancelled.poll(cx).is_ready() {
        return Poll::Ready(Step::Cancelled);
    }
    Poll::Pending
}

/// Model deltas handled in place, at most, before the engine's task yields (see [`poll_burst`]). A yield is costly
/// next to a delta (the deferred wake goes through the I/O driver), so bursts amortize it; `headstart bench deltas`
/// found no gain past the queue's flush size, 256 events (docs/performance.md has the measurements).
const BURST: usize = 256;

/// The next step that needs more than accumulation, in [`poll_step`]'s priority.
///
/// The hot path of a text stream: a delta that is only accumulated and forwarded ([`ResponseDriver::accept_delta`]
/// returns no follow-up) is handled here, and the deltas the model stream has ready right after it are taken in the
/// same poll, up to [`BURST`], without looking at the other sources again. Nothing is lost by that: a tool return
/// or a cancellation that lands during a burst waits at most one burst (microseconds), and in a deterministic
/// replay nothing else can be due between two deltas the stream hands over without yielding, since the simulator
/// yields before each model event. After a full burst the task yields ([`Step::Burst`]), so a consumer on the same
/// thread takes the events while they are hot, not after thousands more.
fn poll_burst<S>(
    driver: &mut ResponseDriver,
    cancel: &CancellationToken,
    cancelled: Pin<&mut WaitForCancellationFutureOwned>,
    mut stream: Pin<&mut S>,
    cx: &mut Context<'_>,
) -> Poll<Step>
where
    S: Stream<Item = Result<DeltaEvent, ModelError>> + ?Sized,
{
    let mut event = match poll_step(driver, cancel, cancelled, stream.as_mut(), cx) {
        Poll::Ready(Step::Model(Some(Ok(event)))) => event,
        Poll::Ready(step) => return Poll::Ready(step),
        Poll::Pending => {
            // Waiting for the world: what this burst produced goes to the consumer now.
            driver.out.flush();
            return Poll::Pending;
        }
    };
    let mut taken = 1;
    loop {
        if let Some(follow_up) = driver.accept_delta(event) {
            return Poll::Ready(Step::FollowUp(follow_up));
        }
        if taken == BURST {
            driver.out.flush();
            return Poll::Ready(Step::Burst);
        }
        event = match stream.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(next))) => next,
            Poll::Ready(item) => return Poll::Ready(Step::Model(item)),
            Poll::Pending => {
                driver.out.flush();
                return Poll::Pending;
            }
        };
        taken += 1;
    }
}

/// Which response of which session [`drive_response`] drives, and its `chat` span.
pub(crate) struct DrivenResponse {
    pub session: SessionId,
    pub request: u32,
    pub chat: ChatSpan,
    /// How many provider-async calls the response may leave running (contract §3.7.5); they are handed back.
    pub deliver_later: usize,
}

/// Drives one response: reads `stream` to its end, commits, admits and settles every call, and hands the agent
/// events, from `ResponseStart` to `ResponseEnd`, to `out` (contract §3, §6). Returns how the response ended. `chat` is the
/// request's span: it ends with the stream, while calls may still run; their spans are children of the current
/// span (the run's). The provider-async calls it may leave running (`deliver_later`, contract §3.7.5) come back too.
pub(crate) async fn drive_response<S>(
    parts: Arc<EngineParts>,
    DrivenResponse {
        session,
        request,
        chat,
        deliver_later,
    }: DrivenResponse,
    stream: S,
    cancel: &CancellationToken,
    tasks: &TaskTracker,
    out: &mut Outbox,
) -> (ResponseOutcome, Option<DetachedCalls>)
where
    S: Stream<Item = Result<DeltaEvent, ModelError>>,
{
    out.push(AgentEvent::ResponseStart { request });
    let mut driver = ResponseDriver::new(parts, session, request, tasks.clone(), out, chat, deliver_later);
    let mut stream = pin!(stream);
    let mut cancelled = pin!(cancel.clone().cancelled_owned());
    while !driver.finished() {
        let step =
            std::future::poll_fn(|cx| poll_burst(&mut driver, cancel, cancelled.as_mut(), stream.as_mut(), cx)).await;
        driver.handle(step).await;
        // A model stream that is always ready (a fast local source) would otherwise keep this task from yielding:
        // the cooperative budget hands the thread to the consumer now and then, so events are taken while hot.
        tokio::task::consume_budget().await;
    }
    let detached = (!driver.runner.is_idle()).then(|| driver.runner.detach());
    let mut outcome = driver.outcome();
    outcome.pending = detached.as_ref().map(DetachedCalls::ids).unwrap_or_default();
    driver.out.push(AgentEvent::ResponseEnd {
        request,
        outcome: outcome.clone(),
    });
    driver.out.flush();
    (outcome, detached)
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::sync::Arc;
    use std::time::Duration;

    use futures::StreamExt;
    use headstart_core::{DeltaEvent, DoneReason, ModelError};
    use tokio::time::Instant;

    use super::{drive_response, poll_burst, poll_step, DrivenResponse, BURST};
    use crate::config::EngineConfig;
    use crate::events::event::AgentEvent;
    use crate::response::fixture::{call, done, start, taken, Fixture};
    use crate::response::step::Step;
    use crate::response::telemetry::ChatSpan;

    fn step_name(step: &Step) -> &'static str {
        match step {
            Step::Burst => "burst",
            Step::FollowUp(_) => "follow_up",
            Step::Written(_) => "written",
            Step::Tool(_) => "tool",
            Step::Cancelled => "cancelled",
            Step::Model(_) => "model",
        }
    }

    /// `start`, a text block of `pieces` deltas, `done(stop)`.
    fn long_text(pieces: usize) -> Vec<Result<DeltaEvent, ModelError>> {
        let delta = |_| DeltaEvent::TextDelta {
            index: 0,
            delta: "x".to_owned(),
        };
        [start(), DeltaEvent::TextStart { index: 0 }]
            .into_iter()
            .chain((0..pieces).map(delta))
            .chain([DeltaEvent::TextEnd { index: 0 }, done(DoneReason::Stop)])
            .map(Ok)
            .collect()
    }

    #[tokio::test]
    async fn a_ready_stream_is_taken_in_bursts_and_each_burst_reaches_the_consumer() {
        let mut fixture = Fixture::new(EngineConfig::default()).await;
        let cancel = fixture.cancel.clone();
        let deltas = long_text(BURST + 10);
        let total = deltas.len();
        let mut stream = pin!(futures::stream::iter(deltas));
        let mut cancelled = pin!(cancel.clone().cancelled_owned());
        let mut driver = fixture.driver();
        let step =
            std::future::poll_fn(|cx| poll_burst(&mut driver, &cancel, cancelled.as_mut(), stream.as_mut(), cx)).await;
        assert_eq!(step_name(&step), "burst");
        drop(driver);
        // `start` opened the fragment; every other delta of the burst is a `message_update`, flushed with the burst.
        let events = taken(&mut fixture.events);
        assert_eq!(events.len(), BURST);
        assert_eq!(
            (events[0].as_str(), events[BURST - 1].as_str()),
            ("message_start", "message_update:0")
        );
        assert_eq!(stream.count().await, total - BURST, "the rest waits for the next burst");
    }

    #[tokio::test]
    async fn a_cancellation_comes_before_a_ready_model_delta() {
        let mut fixture = Fixture::new(EngineConfig::default()).await;
        let cancel = fixture.cancel.clone();
        let mut stream = pin!(futures::stream::iter(long_text(1)));
        let mut cancelled = pin!(cancel.clone().cancelled_owned());
        let mut driver = fixture.driver();
        let first =
            std::future::poll_fn(|cx| poll_step(&mut driver, &cancel, cancelled.as_mut(), stream.as_mut(), cx)).await;
        assert_eq!(step_name(&first), "model");
        cancel.cancel();
        let second =
            std::future::poll_fn(|cx| poll_step(&mut driver, &cancel, cancelled.as_mut(), stream.as_mut(), cx)).await;
        assert_eq!(step_name(&second), "cancelled");
    }

    /// The deltas of `timed`, each delivered at its time (ms after the start, on tokio's clock).
    fn timed(timed: Vec<(u64, DeltaEvent)>) -> impl futures::Stream<Item = Result<DeltaEvent, ModelError>> {
        let base = Instant::now();
        futures::stream::iter(timed).then(move |(at_ms, delta)| async move {
            tokio::time::sleep_until(base + Duration::from_millis(at_ms)).await;
            Ok(delta)
        })
    }

    #[tokio::test(start_paused = true)]
    async fn an_early_call_starts_at_its_seal_while_the_model_streams() {
        let mut fixture = Fixture::new(EngineConfig::default()).await;
        let [fetch_start, fetch_delta, fetch_end] = call(0, "c1", "fetch");
        let stream = timed(vec![
            (0, start()),
            (0, fetch_start),
            (0, fetch_delta),
            (10, fetch_end),
            (10, DeltaEvent::TextStart { index: 1 }),
            (500, DeltaEvent::TextEnd { index: 1 }),
            (500, done(DoneReason::ToolUse)),
        ]);
        let parts = Arc::clone(fixture.engine.parts());
        let response = DrivenResponse {
            session: fixture.session.clone(),
            request: 0,
            chat: ChatSpan::open(&fixture.session, 0, None, None, 0),
            deliver_later: 0,
        };
        let cancel = fixture.cancel.clone();
        let tasks = fixture.tasks.clone();
        let (outcome, _) = drive_response(parts, response, stream, &cancel, &tasks, &mut fixture.out).await;
        assert_eq!((outcome.admitted, outcome.committed_prefixes), (1, 1));
        let mut at = Vec::new();
        while let Some(Some(emitted)) = futures::FutureExt::now_or_never(fixture.events.next_emitted()) {
            match emitted.event {
                AgentEvent::ToolExecutionStart { .. } => at.push(("start", emitted.at_us)),
                AgentEvent::ToolExecutionEnd { .. } => at.push(("end", emitted.at_us)),
                AgentEvent::ResponseEnd { .. } => at.push(("turn_end", emitted.at_us)),
                _ => {}
            }
        }
        assert_eq!(at, [("start", 10_000), ("end", 10_000), ("turn_end", 500_000)]);
        assert_eq!(
            fixture.log().await,
            ["assistant:tool_use", "tool_result:fetched", "assistant:tool_use"]
        );
    }
}
