//! What the worker tests share: models that answer at once or never, the setup that runs them, and a queue whose
//! claims and renewals a test can make miss or fail.
#![allow(dead_code)] // Each test file uses a part.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::model::{AssistantMessage, ToolResultMessage};
use headstart::core::{DoneReason, Usage};
use headstart::store::{
    AdmittedCall, CallKey, Claim, Lease, QueueName, RunEnd, SessionEnd, SessionInfo, SessionQueue, SessionSettings,
    SqliteStore, StoreError, StoredMessage, ToolRun, UnfinishedCall,
};
use headstart::{
    DeltaEvent, DeltaStream, Engine, EngineBuilder, Model, ModelError, ModelRequest, SessionId, TranscriptStore,
    UserMessage,
};
use headstart_fleet::{SessionSetup, Worker, WorkerEvent, WorkerStats};
use tokio::sync::Notify;

/// Answers every request with an empty, finished response.
pub struct Quiet;

#[async_trait]
impl Model for Quiet {
    async fn stream(&self, _request: ModelRequest) -> Result<DeltaStream, ModelError> {
        let events = [
            DeltaEvent::Start {
                model: None,
                response_id: None,
            },
            DeltaEvent::Done {
                stop_reason: DoneReason::Stop,
                usage: Usage::default(),
            },
        ];
        Ok(futures::stream::iter(events.map(Ok)).boxed())
    }
}

/// Never answers: the response stays open until the run is cancelled. `opened` is notified when a response is
/// asked for, `ended` when one is dropped (the sign that its session's run stopped); each keeps a permit when
/// nobody waits.
#[derive(Default)]
pub struct Silent {
    pub opened: Arc<Notify>,
    pub ended: Arc<Notify>,
}

/// Notifies when dropped.
struct NotifyOnDrop(Arc<Notify>);

impl Drop for NotifyOnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

#[async_trait]
impl Model for Silent {
    async fn stream(&self, _request: ModelRequest) -> Result<DeltaStream, ModelError> {
        self.opened.notify_one();
        let guard = NotifyOnDrop(Arc::clone(&self.ended));
        Ok(futures::stream::pending()
            .map(move |event| {
                let _keep = &guard;
                event
            })
            .boxed())
    }
}

/// Every session gets a bare engine and the same model.
pub struct Setup(pub Arc<dyn Model>);

impl SessionSetup for Setup {
    fn engine(&self, _session: &SessionId, store: Arc<dyn TranscriptStore>) -> EngineBuilder {
        Engine::builder(store)
    }
    fn model(&self, _session: &SessionId, _settings: &SessionSettings) -> Arc<dyn Model> {
        Arc::clone(&self.0)
    }
}

/// A queue whose claims and renewals a test switches: renewals that miss every lease (as when another worker
/// claimed the sessions meanwhile), claims that find nothing, or claims and renewals that fail (as when the store
/// cannot be reached). It records when each claim was asked, on tokio's clock.
pub struct Switched {
    pub inner: Arc<SqliteStore>,
    /// Renewals return no lease.
    pub lose_renewals: AtomicBool,
    /// Claims find nothing.
    pub claim_nothing: AtomicBool,
    /// This many claims and renewals fail from now on, with [`UNREACHABLE`].
    pub failing: AtomicUsize,
    /// When each claim was asked.
    pub claims_at: Mutex<Vec<tokio::time::Instant>>,
}

/// The error of a switched-off store.
pub const UNREACHABLE: &str = "connection refused";

impl Switched {
    pub fn new(inner: Arc<SqliteStore>) -> Self {
        Switched {
            inner,
            lose_renewals: AtomicBool::new(false),
            claim_nothing: AtomicBool::new(false),
            failing: AtomicUsize::new(0),
            claims_at: Mutex::new(Vec::new()),
        }
    }

    /// Whether this operation fails (one of the `failing` ones).
    fn fails(&self) -> bool {
        self.failing
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| left.checked_sub(1))
            .is_ok()
    }

    pub fn claims_at(&self) -> Vec<tokio::time::Instant> {
        self.claims_at.lock().expect("not poisoned").clone()
    }
}

#[async_trait]
impl TranscriptStore for Switched {
    async fn create_session(&self, at_us: i64) -> Result<SessionId, StoreError> {
        self.inner.create_session(at_us).await
    }
    async fn create_session_with_id(&self, session: &SessionId, at_us: i64) -> Result<(), StoreError> {
        self.inner.create_session_with_id(session, at_us).await
    }
    async fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        self.inner.sessions().await
    }
    async fn append_user(&self, session: &SessionId, message: &UserMessage, at_us: i64) -> Result<u64, StoreError> {
        self.inner.append_user(session, message, at_us).await
    }
    async fn commit_fragment(
        &self,
        session: &SessionId,
        request: u32,
        fragment: &AssistantMessage,
        admitted: &[AdmittedCall],
        at_us: i64,
    ) -> Result<u64, StoreError> {
        self.inner
            .commit_fragment(session, request, fragment, admitted, at_us)
            .await
    }
    async fn mark_started(&self, session: &SessionId, call: &CallKey, at_us: i64) -> Result<(), StoreError> {
        self.inner.mark_started(session, call, at_us).await
    }
    async fn append_tool_result(
        &self,
        session: &SessionId,
        request: u32,
        result: &ToolResultMessage,
        run: Option<RunEnd>,
        at_us: i64,
    ) -> Result<u64, StoreError> {
        self.inner
            .append_tool_result(session, request, result, run, at_us)
            .await
    }
    async fn load_log_after(&self, session: &SessionId, seq: u64) -> Result<Vec<StoredMessage>, StoreError> {
        self.inner.load_log_after(session, seq).await
    }
    async fn tool_runs_from(&self, session: &SessionId, request: u32) -> Result<Vec<ToolRun>, StoreError> {
        self.inner.tool_runs_from(session, request).await
    }
    async fn unfinished_calls(&self, session: &SessionId) -> Result<Vec<UnfinishedCall>, StoreError> {
        self.inner.unfinished_calls(session).await
    }
}

#[async_trait]
impl SessionQueue for Switched {
    async fn submit_with(
        &self,
        prompt: &UserMessage,
        settings: &SessionSettings,
        at_us: i64,
    ) -> Result<SessionId, StoreError> {
        self.inner.submit_with(prompt, settings, at_us).await
    }
    async fn claim_from(
        &self,
        owner: &str,
        queues: &[QueueName],
        lease: Duration,
        limit: usize,
    ) -> Result<Vec<Claim>, StoreError> {
        self.claims_at
            .lock()
            .expect("not poisoned")
            .push(tokio::time::Instant::now());
        if self.fails() {
            return Err(StoreError::Backend(UNREACHABLE.into()));
        }
        if self.claim_nothing.load(Ordering::SeqCst) {
            return Ok(Vec::new());
        }
        self.inner.claim_from(owner, queues, lease, limit).await
    }
    async fn take_over(&self, session: &SessionId, owner: &str, lease: Duration) -> Result<Claim, StoreError> {
        self.inner.take_over(session, owner, lease).await
    }
    async fn renew(&self, leases: &[Lease], lease: Duration) -> Result<Vec<Lease>, StoreError> {
        if self.fails() {
            return Err(StoreError::Backend(UNREACHABLE.into()));
        }
        if self.lose_renewals.load(Ordering::SeqCst) {
            return Ok(Vec::new());
        }
        self.inner.renew(leases, lease).await
    }
    async fn finish(&self, lease: &Lease, end: SessionEnd) -> Result<(), StoreError> {
        self.inner.finish(lease, end).await
    }
    fn fenced(&self, lease: &Lease) -> Arc<dyn TranscriptStore> {
        SessionQueue::fenced(self.inner.as_ref(), lease)
    }
}

/// A worker running on a task of its own, every event it reports stamped with the wall-clock instant it came.
pub struct Observed {
    events: tokio::sync::mpsc::UnboundedReceiver<(std::time::Instant, WorkerEvent)>,
    shutdown: headstart::CancellationToken,
    task: tokio::task::JoinHandle<WorkerStats>,
}

impl Observed {
    /// Starts `worker`, observing it.
    pub fn start(worker: Worker) -> Observed {
        let (sender, events) = tokio::sync::mpsc::unbounded_channel();
        let worker = worker.observe(move |event| {
            let _ = sender.send((std::time::Instant::now(), event.clone()));
        });
        let shutdown = headstart::CancellationToken::new();
        let stop = shutdown.clone();
        let task = tokio::spawn(async move { worker.run(stop).await });
        Observed { events, shutdown, task }
    }

    /// The worker's next event, within 60 s (a bound for a failure, and on the paused clock longer than any wait of
    /// the retry schedule).
    pub async fn next(&mut self) -> WorkerEvent {
        self.next_stamped().await.1
    }

    /// [`next`](Self::next) with the instant it came.
    pub async fn next_stamped(&mut self) -> (std::time::Instant, WorkerEvent) {
        match tokio::time::timeout(Duration::from_secs(60), self.events.recv()).await {
            Ok(Some(stamped)) => stamped,
            other => panic!("no worker event: {other:?}"),
        }
    }

    /// An event already reported, if any.
    pub fn try_next(&mut self) -> Option<WorkerEvent> {
        self.events.try_recv().ok().map(|(_, event)| event)
    }

    /// Shuts the worker down; its figures once it stopped (within 10 s). The events it reported stay readable.
    pub async fn stop(&mut self) -> WorkerStats {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .expect("the worker stops")
            .expect("worker task")
    }
}

/// A model whose provider fails every request with `kind` while `down` is set (HTTP 500 by default, as a provider in
/// an outage answers after the model's own retries), and answers as [`Quiet`] does otherwise. Counts the requests it
/// refused.
pub struct Flaky {
    pub down: AtomicBool,
    pub kind: headstart::ModelErrorKind,
    pub refused: AtomicUsize,
}

impl Flaky {
    /// A provider that is down (`down`) with HTTP `status`.
    pub fn new(down: bool, status: u16) -> Self {
        Flaky {
            down: AtomicBool::new(down),
            kind: headstart::ModelErrorKind::Http {
                status,
                retry_after: None,
            },
            refused: AtomicUsize::new(0),
        }
    }
}

#[async_trait]
impl Model for Flaky {
    async fn stream(&self, request: ModelRequest) -> Result<DeltaStream, ModelError> {
        if self.down.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(ModelError::with_kind(
                self.kind,
                format!("the provider answered {:?} (gave up after 3 attempts)", self.kind),
            ));
        }
        Quiet.stream(request).await
    }
}
