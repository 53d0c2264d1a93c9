//! [`ModelStreamExt`]: early execution as a stream adapter, in tokio-stream's style (`StreamExt`), so that wrapping a
//! model stream reads like any other adapter: `model_stream.early_execute(&engine, &session, cancel)`.

use std::future::Future;

use futures::Stream;
use headstart_core::{DeltaEvent, ModelError};
use headstart_store::{SessionId, StoreError};
use tokio_util::sync::CancellationToken;

use crate::engine::Engine;
use crate::events::queue::EventStream;

/// Adapters on a model's delta stream (`Stream<Item = Result<DeltaEvent, ModelError>>`, what a provider adapter
/// produces). Each is [`Engine::wrap_next`] or [`Engine::wrap`] with the stream first; the engine's methods do the
/// work, so both spellings behave the same.
///
/// ```
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use headstart::core::{DoneReason, Usage};
/// use headstart::{CancellationToken, DeltaEvent, Engine, ModelStreamExt, SqliteStore};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
/// let engine = Engine::builder(Arc::new(SqliteStore::open_in_memory()?)).build();
/// let session = engine.create_session().await?;
/// let model_stream = futures::stream::iter([
///     DeltaEvent::Start { model: None, response_id: None },
///     DeltaEvent::TextStart { index: 0 },
///     DeltaEvent::TextDelta { index: 0, delta: "Hello".into() },
///     DeltaEvent::TextEnd { index: 0 },
///     DeltaEvent::Done { stop_reason: DoneReason::Stop, usage: Usage::default() },
/// ].map(Ok));
///
/// let events = model_stream.early_execute(&engine, &session, CancellationToken::new()).await?;
/// let names: Vec<&str> = events.map(|event| event.type_name()).collect().await;
/// assert_eq!(names.first(), Some(&"turn_start"));
/// assert_eq!(names.last(), Some(&"turn_end"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })
/// # }
/// ```
pub trait ModelStreamExt: Stream<Item = Result<DeltaEvent, ModelError>> + Send + Sized + 'static {
    /// Runs this stream through `engine` as the next response of `session`: [`Engine::wrap_next`] (the engine numbers
    /// the request from the stored log). Resolves once the request number is read; the events come from the stream
    /// it returns.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    fn early_execute(
        self,
        engine: &Engine,
        session: &SessionId,
        cancel: CancellationToken,
    ) -> impl Future<Output = Result<EventStream, StoreError>> + Send {
        let engine = engine.clone();
        let session = session.clone();
        async move { engine.wrap_next(&session, self, cancel).await }
    }

    /// Runs this stream through `engine` as response `request` of `session`: [`Engine::wrap`], for a caller that
    /// numbers its requests itself.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    fn early_execute_as(
        self,
        engine: &Engine,
        session: &SessionId,
        request: u32,
        cancel: CancellationToken,
    ) -> EventStream {
        engine.wrap(session, request, self, cancel)
    }
}

impl<S> ModelStreamExt for S where S: Stream<Item = Result<DeltaEvent, ModelError>> + Send + Sized + 'static {}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::StreamExt;
    use headstart_core::{DeltaEvent, DoneReason, ModelError, Usage};
    use headstart_store::SqliteStore;
    use tokio_util::sync::CancellationToken;

    use super::ModelStreamExt;
    use crate::engine::Engine;
    use crate::events::event::AgentEvent;

    fn answer(text: &str) -> impl futures::Stream<Item = Result<DeltaEvent, ModelError>> + Send + 'static {
        futures::stream::iter(
            [
                DeltaEvent::Start {
                    model: None,
                    response_id: None,
                },
                DeltaEvent::TextStart { index: 0 },
                DeltaEvent::TextDelta {
                    index: 0,
                    delta: text.to_owned(),
                },
                DeltaEvent::TextEnd { index: 0 },
                DeltaEvent::Done {
                    stop_reason: DoneReason::Stop,
                    usage: Usage::default(),
                },
            ]
            .map(Ok),
        )
    }

    /// The request number each response's `ResponseStart` carried, and the event names in order.
    async fn run(events: crate::EventStream) -> (Vec<u32>, Vec<&'static str>) {
        let events: Vec<AgentEvent> = events.collect().await;
        let requests = events
            .iter()
            .filter_map(|event| match event {
                AgentEvent::ResponseStart { request } => Some(*request),
                _ => None,
            })
            .collect();
        (requests, events.iter().map(AgentEvent::type_name).collect())
    }

    #[tokio::test]
    async fn the_adapter_numbers_requests_as_wrap_next_does_and_emits_the_same_events() {
        let engine = Engine::builder(Arc::new(SqliteStore::open_in_memory().expect("store"))).build();
        let session = engine.create_session().await.expect("session");
        let adapted = answer("one")
            .early_execute(&engine, &session, CancellationToken::new())
            .await
            .expect("the log is read");
        let (first, adapted_names) = run(adapted).await;
        let wrapped = engine
            .wrap_next(&session, answer("two"), CancellationToken::new())
            .await
            .expect("the log is read");
        let (second, wrapped_names) = run(wrapped).await;
        let (third, _) = run(answer("three").early_execute_as(&engine, &session, 7, CancellationToken::new())).await;
        assert_eq!((first, second, third), (vec![0], vec![1], vec![7]));
        assert_eq!(adapted_names, wrapped_names);
        let texts: Vec<String> = engine
            .store()
            .load_log(&session)
            .await
            .expect("log")
            .into_iter()
            .map(|stored| match stored.message {
                headstart_core::Message::Assistant(answer) => headstart_core::model::joined_text(&answer.content),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(texts, ["one", "two", "three"]);
    }
}
