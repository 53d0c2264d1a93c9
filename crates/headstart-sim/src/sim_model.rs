//! The simulated model: emits each scenario turn's delta events at their `at_ms`.

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::delta_log::TimedDelta;
use headstart::{DeltaStream, Model, ModelError, ModelRequest};
use tokio::time::{Duration, Instant};

/// A model that replays one delta log per request.
#[derive(Debug, Clone)]
pub struct SimModel {
    turns: Arc<Vec<Vec<TimedDelta>>>,
}

impl SimModel {
    /// A model answering request `n` with `turns[n]`.
    pub fn new(turns: Vec<Vec<TimedDelta>>) -> Self {
        SimModel { turns: Arc::new(turns) }
    }
}

/// The stream of one turn: each event waits until `at_ms` after the request.
///
/// Before each event the stream yields once, so that everything else due at the same instant (tool returns,
/// timeouts and updates, which run on tasks of their own, and external cancellation) is processed first, as
/// FORMAT.md orders them: the model goes last.
pub fn timed_stream(events: Vec<TimedDelta>) -> DeltaStream {
    let start = Instant::now();
    futures::stream::iter(events)
        .then(move |timed| async move {
            tokio::time::sleep_until(start + Duration::from_millis(timed.at_ms)).await;
            tokio::task::yield_now().await;
            Ok(timed.event)
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
        Ok(timed_stream(events.clone()))
    }
}
