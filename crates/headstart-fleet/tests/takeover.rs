//! Takeover (contract §7.5.3): a worker takes over a session whose owner stopped renewing within the lease time plus
//! one poll interval, and finishes it.
//!
//! Lease expiry is the database's clock (the machine's for SQLite), so this test runs on real time; its bounds leave
//! 150 ms for scheduling on a loaded machine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::model::{AssistantMessage, ToolResultMessage};
use headstart::core::{DoneReason, Usage};
use headstart::store::{
    AdmittedCall, CallKey, Claim, Lease, RunEnd, SessionEnd, SessionInfo, SessionQueue, SessionState, SqliteStore,
    StoreError, StoredMessage, ToolRun, UnfinishedCall,
};
use headstart::{
    CancellationToken, DeltaEvent, DeltaStream, Engine, EngineBuilder, Model, ModelError, ModelRequest, SessionId,
    TranscriptStore, UserMessage,
};
use headstart_fleet::{SessionSetup, Worker, WorkerConfig, WorkerEvent};

/// Answers every request with an empty, finished response.
struct Quiet;

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

/// Every session gets a bare engine and the same model.
struct Setup(Arc<dyn Model>);

impl SessionSetup for Setup {
    fn engine(&self, _session: &SessionId, store: Arc<dyn TranscriptStore>) -> EngineBuilder {
        Engine::builder(store)
    }
    fn model(&self, _session: &SessionId) -> Arc<dyn Model> {
        Arc::clone(&self.0)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_session_is_taken_over_within_lease_plus_one_poll() {
    const LEASE: Duration = Duration::from_millis(400);
    const POLL: Duration = Duration::from_millis(100);
    let store = Arc::new(SqliteStore::open_in_memory().expect("in-memory store"));
    let session = store.submit(&UserMessage::new("go"), 0).await.expect("submit");
    // A worker claims the session and dies: it never renews.
    let claimed_at = Instant::now();
    let dead = store.claim("dead", LEASE, 1).await.expect("claim");
    assert_eq!(dead.len(), 1);

    let (sender, mut events) = tokio::sync::mpsc::unbounded_channel();
    let mut config = WorkerConfig::new("rescuer");
    config.lease = LEASE;
    config.poll_interval = POLL;
    let worker = Worker::new(store.clone(), Arc::new(Setup(Arc::new(Quiet))), config)
        .expect("config")
        .observe(move |event| {
            let _ = sender.send((Instant::now(), event.clone()));
        });
    let shutdown = CancellationToken::new();
    let running = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { worker.run(shutdown).await })
    };

    let mut taken_over_after = None;
    let mut finished = None;
    while finished.is_none() {
        let next = tokio::time::timeout(Duration::from_secs(10), events.recv()).await;
        let Ok(Some((at, event))) = next else {
            panic!("no worker event within 10 s");
        };
        match event {
            WorkerEvent::Claimed {
                previous_owner, epoch, ..
            } => {
                assert_eq!(previous_owner.as_deref(), Some("dead"));
                assert_eq!(epoch, 2, "the takeover is the second claim");
                taken_over_after = Some(at - claimed_at);
            }
            WorkerEvent::Finished { end, .. } => finished = Some(end),
            WorkerEvent::QueueError { message } => panic!("queue error: {message}"),
            _ => {}
        }
    }
    shutdown.cancel();
    let stats = running.await.expect("worker task");
    let after = taken_over_after.expect("the session was claimed");
    assert!(
        after >= LEASE,
        "taken over after {after:?}, before the lease of {LEASE:?} ended"
    );
    assert!(
        after <= LEASE + POLL + Duration::from_millis(150),
        "taken over after {after:?}: later than lease + one poll ({:?})",
        LEASE + POLL
    );
    assert_eq!(finished, Some(SessionEnd::Completed));
    assert_eq!((stats.claimed, stats.taken_over, stats.completed), (1, 1, 1));
    let info = store.sessions().await.expect("sessions").remove(0);
    assert_eq!(info.id, session);
    assert_eq!(info.state, SessionState::Completed);
    assert_eq!(info.owner.as_deref(), Some("rescuer"));
}

/// Never answers: the response stays open until the run is cancelled.
struct Silent;

#[async_trait]
impl Model for Silent {
    async fn stream(&self, _request: ModelRequest) -> Result<DeltaStream, ModelError> {
        Ok(futures::stream::pending().boxed())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_takes_no_more_than_its_concurrency_and_releases_its_sessions_on_shutdown() {
    let store = Arc::new(SqliteStore::open_in_memory().expect("in-memory store"));
    for _ in 0..5 {
        store.submit(&UserMessage::new("go"), 0).await.expect("submit");
    }
    let (sender, mut events) = tokio::sync::mpsc::unbounded_channel();
    let mut config = WorkerConfig::new("w");
    config.concurrency = 3;
    config.poll_interval = Duration::from_millis(20);
    let worker = Worker::new(store.clone(), Arc::new(Setup(Arc::new(Silent))), config)
        .expect("config")
        .observe(move |event| {
            let _ = sender.send(event.clone());
        });
    let shutdown = CancellationToken::new();
    let running = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { worker.run(shutdown).await })
    };
    for _ in 0..3 {
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv()).await;
        assert!(matches!(event, Ok(Some(WorkerEvent::Claimed { .. }))), "{event:?}");
    }
    // Several polls later, still three: the limit holds.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let states = |infos: Vec<headstart::store::SessionInfo>| -> Vec<SessionState> {
        let mut states: Vec<SessionState> = infos.into_iter().map(|info| info.state).collect();
        states.sort_by_key(|state| state.as_str());
        states
    };
    let running_now = states(store.sessions().await.expect("sessions"));
    assert_eq!(
        running_now
            .iter()
            .filter(|state| **state == SessionState::Running)
            .count(),
        3
    );
    shutdown.cancel();
    let stats = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the worker stops")
        .expect("worker task");
    assert_eq!((stats.claimed, stats.released, stats.completed), (3, 3, 0));
    let after = states(store.sessions().await.expect("sessions"));
    assert_eq!(
        after,
        vec![SessionState::Pending; 5],
        "released sessions are pending again"
    );
}

/// A queue whose renewals can be made to miss every lease, as when another worker claimed the sessions meanwhile.
struct Losing {
    inner: Arc<SqliteStore>,
    lose: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl TranscriptStore for Losing {
    async fn create_session(&self, at_us: i64) -> Result<SessionId, StoreError> {
        self.inner.create_session(at_us).await
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
    async fn load_log(&self, session: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        self.inner.load_log(session).await
    }
    async fn tool_runs(&self, session: &SessionId) -> Result<Vec<ToolRun>, StoreError> {
        self.inner.tool_runs(session).await
    }
    async fn unfinished_calls(&self, session: &SessionId) -> Result<Vec<UnfinishedCall>, StoreError> {
        self.inner.unfinished_calls(session).await
    }
}

#[async_trait]
impl SessionQueue for Losing {
    async fn submit(&self, prompt: &UserMessage, at_us: i64) -> Result<SessionId, StoreError> {
        self.inner.submit(prompt, at_us).await
    }
    async fn claim(&self, owner: &str, lease: Duration, limit: usize) -> Result<Vec<Claim>, StoreError> {
        self.inner.claim(owner, lease, limit).await
    }
    async fn renew(&self, leases: &[Lease], lease: Duration) -> Result<Vec<Lease>, StoreError> {
        if self.lose.load(std::sync::atomic::Ordering::SeqCst) {
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

/// The worker's next event, within 10 s.
async fn next(events: &mut tokio::sync::mpsc::UnboundedReceiver<WorkerEvent>) -> WorkerEvent {
    match tokio::time::timeout(Duration::from_secs(10), events.recv()).await {
        Ok(Some(event)) => event,
        other => panic!("no worker event: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_misses_a_lease_stops_the_session_without_finishing_it() {
    let inner = Arc::new(SqliteStore::open_in_memory().expect("in-memory store"));
    let session = inner.submit(&UserMessage::new("go"), 0).await.expect("submit");
    let queue = Arc::new(Losing {
        inner: Arc::clone(&inner),
        lose: std::sync::atomic::AtomicBool::new(false),
    });
    let (sender, mut events) = tokio::sync::mpsc::unbounded_channel();
    let mut config = WorkerConfig::new("w");
    config.lease = Duration::from_millis(300);
    config.poll_interval = Duration::from_millis(20);
    let worker = Worker::new(queue.clone(), Arc::new(Setup(Arc::new(Silent))), config)
        .expect("config")
        .observe(move |event| {
            let _ = sender.send(event.clone());
        });
    let shutdown = CancellationToken::new();
    let running = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { worker.run(shutdown).await })
    };
    assert!(matches!(next(&mut events).await, WorkerEvent::Claimed { .. }));
    queue.lose.store(true, std::sync::atomic::Ordering::SeqCst);
    match next(&mut events).await {
        WorkerEvent::Lost { session: lost, reason } => {
            assert_eq!(lost, session);
            assert!(reason.contains("renewed"), "{reason}");
        }
        other => panic!("expected the loss, got {other:?}"),
    }
    // The session's run ends (its response is cancelled) and the worker forgets it, without finishing it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    shutdown.cancel();
    let stats = running.await.expect("worker task");
    assert_eq!(
        (stats.lost, stats.completed, stats.failed, stats.released),
        (1, 0, 0, 0)
    );
    while let Ok(event) = events.try_recv() {
        assert!(
            !matches!(event, WorkerEvent::Finished { .. }),
            "finished a lost session: {event:?}"
        );
    }
    let info = inner.sessions().await.expect("sessions").remove(0);
    assert_eq!(
        info.state,
        SessionState::Running,
        "left as the store has it, for its new owner"
    );
}
