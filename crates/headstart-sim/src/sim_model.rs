//! The simulated model: emits each scenario turn's delta events at their `at_ms`.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::delta_log::TimedDelta;
use headstart::{DeltaStream, Model, ModelError, ModelRequest};
use tokio::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use crate::timing::Timing;

/// A model that replays one delta log per request.
#[derive(Debug, Clone)]
pub struct SimModel {
    turns: Arc<Vec<Vec<TimedDelta>>>,
    cancel: Option<ExternalCancel>,
    timing: Timing,
}

/// An external cancellation due at an instant (a scenario's `cancel_at_ms`). The model fires it itself when one of
/// its events falls due at or after that instant, so that at the same instant the cancellation comes before the
/// model event (docs/scenario-format.md); a separate task fires it when no model event is due then.
#[derive(Debug, Clone)]
pub struct ExternalCancel {
    /// The token to cancel.
    pub token: CancellationToken,
    /// When.
    pub at: Instant,
}

impl SimModel {
    /// A model answering request `n` with `turns[n]`.
    pub fn new(turns: Vec<Vec<TimedDelta>>) -> Self {
        SimModel {
            turns: Arc::new(turns),
            cancel: None,
            timing: Timing::default(),
        }
    }

    /// The same model, waiting for its events' instants with `timing`.
    pub fn with_timing(mut self, timing: Timing) -> Self {
        self.timing = timing;
        self
    }

    /// The same model, firing `cancel` before any of its events due at or after `cancel.at`.
    pub fn with_cancel(mut self, cancel: ExternalCancel) -> Self {
        self.cancel = Some(cancel);
        self
    }
}

/// The stream of one turn: each event waits until `at_ms` after the request.
pub fn timed_stream(events: Vec<TimedDelta>) -> DeltaStream {
    cancelling_stream(events, None, Timing::default())
}

/// [`timed_stream`], firing `cancel` before any event due at or after its instant.
///
/// Before each event the stream yields once, so that everything else due at the same instant (tool returns,
/// timeouts and updates, which run on tasks of their own) is processed first; then a cancellation due by then is
/// fired, and the stream yields again so the engine sees it before the event: the model goes last, as docs/scenario-format.md
/// orders things due at the same instant.
fn cancelling_stream(events: Vec<TimedDelta>, cancel: Option<ExternalCancel>, timing: Timing) -> DeltaStream {
    let start = Instant::now();
    futures::stream::iter(events)
        .then(move |timed| {
            let cancel = cancel.clone();
            async move {
                let due = start + Duration::from_millis(timed.at_ms);
                timing.sleep_until(due).await;
                tokio::task::yield_now().await;
                if let Some(cancel) = cancel.filter(|cancel| cancel.at <= due && !cancel.token.is_cancelled()) {
                    cancel.token.cancel();
                    tokio::task::yield_now().await;
                }
                Ok(timed.event)
            }
        })
        .boxed()
}

#[async_trait]
impl Model for SimModel {
    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let Some(events) = usize::try_from(request.request)
            .ok()
            .and_then(|turn| self.turns.get(turn))
        else {
            return Err(ModelError::new(format!(
                "scenario has no response for request {}",
                request.request
            )));
        };
        Ok(cancelling_stream(events.clone(), self.cancel.clone(), self.timing))
    }

    fn provider(&self) -> Option<&str> {
        Some("headstart.sim")
    }

    fn model_name(&self) -> Option<&str> {
        Some("simulated")
    }
}
