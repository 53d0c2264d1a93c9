//! Takeover (contract §7.5.3): a worker takes over a session whose owner stopped renewing within the lease time plus
//! one poll interval, and finishes it.
//!
//! Lease expiry is the database's clock (the machine's for SQLite), so this test runs on real time; its bounds leave
//! 150 ms for scheduling on a loaded machine.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use headstart::core::{DoneReason, Usage};
use headstart::store::{SessionEnd, SessionQueue, SessionState, SqliteStore};
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

struct Setup;

impl SessionSetup for Setup {
    fn engine(&self, _session: &SessionId, store: Arc<dyn TranscriptStore>) -> EngineBuilder {
        Engine::builder(store)
    }
    fn model(&self, _session: &SessionId) -> Arc<dyn Model> {
        Arc::new(Quiet)
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
    let worker = Worker::new(store.clone(), Arc::new(Setup), config)
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

struct SilentSetup;

impl SessionSetup for SilentSetup {
    fn engine(&self, _session: &SessionId, store: Arc<dyn TranscriptStore>) -> EngineBuilder {
        Engine::builder(store)
    }
    fn model(&self, _session: &SessionId) -> Arc<dyn Model> {
        Arc::new(Silent)
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
    let worker = Worker::new(store.clone(), Arc::new(SilentSetup), config)
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
