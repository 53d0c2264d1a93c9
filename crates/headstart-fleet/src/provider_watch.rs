//! [`Watched`]: a session's model, watched for what its requests say about the provider, as a layer around the
//! application's model (the agent loop is not touched). A request that opens tells the worker's breaker the
//! provider is up; a request that fails for a reason that is the provider's ([`ModelErrorKind::is_transient`]:
//! connection refused or reset, 5xx, 429 after the model's own retries, overloaded) is remembered, so that a run
//! that stopped on it releases the session for a retry instead of failing it.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use headstart::{DeltaStream, Model, ModelError, ModelRequest};

use crate::context::Context;

/// The application's model, watched. See the [module documentation](self).
pub(crate) struct Watched {
    inner: Arc<dyn Model>,
    context: Arc<Context>,
    /// The provider's failure that ended the session's last request, if it failed that way.
    outage: Arc<Mutex<Option<String>>>,
}

/// What a run's requests said about the provider, read after the run.
#[derive(Clone)]
pub(crate) struct Outage(Arc<Mutex<Option<String>>>);

impl Outage {
    /// The provider's failure that ended the last request, if its last request failed that way.
    pub(crate) fn last(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Watched {
    /// `inner`, watched for the worker of `context`; the [`Outage`] reads what it saw.
    pub(crate) fn new(inner: Arc<dyn Model>, context: Arc<Context>) -> (Self, Outage) {
        let outage = Arc::new(Mutex::new(None));
        let watched = Watched {
            inner,
            context,
            outage: Arc::clone(&outage),
        };
        (watched, Outage(outage))
    }

    fn saw(&self, outage: Option<String>) {
        *self.outage.lock().unwrap_or_else(PoisonError::into_inner) = outage;
    }
}

#[async_trait]
impl Model for Watched {
    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let opened = self.inner.stream(request).await;
        match &opened {
            Ok(_) => {
                self.saw(None);
                self.context.provider_answered();
            }
            Err(error) if error.kind().is_transient() => self.saw(Some(error.message().to_owned())),
            Err(_) => self.saw(None),
        }
        opened
    }

    fn provider(&self) -> Option<&str> {
        self.inner.provider()
    }

    fn model_name(&self) -> Option<&str> {
        self.inner.model_name()
    }
}
