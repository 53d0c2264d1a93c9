//! [`PyModel`]: a Python callable as the agent loop's [`Model`].
//!
//! The loop (Rust) asks for each response: the callable is called on the run's loop with the request built from the
//! transcript; it returns its SDK's stream (or an awaitable of it), which the package's pump reads on that loop into
//! a [`Feed`]. The feed's delta stream is what the loop wraps, so the Agent's responses go through the same
//! converters as `engine.wrap`'s.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;
use futures::{Stream, StreamExt};
use headstart::core::DeltaStream;
use headstart::{DeltaEvent, Model, ModelError};
use pyo3::prelude::*;

use crate::feed::{Feed, Format};
use crate::home::Home;
use crate::mailbox::Letter;
use crate::outcome::CallDone;
use crate::request::ModelRequest;
use crate::task::CancelOnDrop;
use headstart_host::Reply;
use headstart_providers::ConvertOptions;

/// A Python model callable: `async def model(request: headstart.ModelRequest) -> <the SDK's stream>`.
pub(crate) struct PyModel {
    pub function: Arc<Py<PyAny>>,
    pub format: Format,
    /// When its Chat Completions calls are sealed.
    pub options: ConvertOptions,
    pub home: Home,
}

/// The feed's delta stream, holding the Python task that pumps it: dropping the stream cancels the pump.
struct Pumped {
    deltas: DeltaStream,
    _pump: CancelOnDrop,
}

impl Stream for Pumped {
    type Item = Result<DeltaEvent, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.deltas.poll_next_unpin(cx)
    }
}

#[async_trait]
impl Model for PyModel {
    async fn stream(&self, request: headstart::ModelRequest) -> Result<DeltaStream, ModelError> {
        let mailbox = self.home.mailbox().map_err(ModelError::new)?;
        let (feed, deltas) = Feed::open(self.format, &self.options);
        let (reply, receiver) = Reply::channel();
        let id = mailbox.next_id();
        mailbox.send(Letter::Model {
            id,
            function: Arc::clone(&self.function),
            request: ModelRequest {
                request,
                format: self.format,
            },
            format: self.format.name(),
            feed,
            done: CallDone::new(reply),
        });
        let pump = CancelOnDrop::new(mailbox.clone(), id);
        match receiver.await {
            Ok(Ok(_)) => Ok(Pumped { deltas, _pump: pump }.boxed()),
            Ok(Err(failure)) => Err(ModelError::new(failure.to_string())),
            Err(_) => Err(ModelError::new("the Python model's task ended without a stream")),
        }
    }
}
