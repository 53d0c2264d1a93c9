//! Queues and provider outages (issue 44), on PostgreSQL as a fleet runs:
//!
//! - a worker whose provider always answers 500 beside a healthy worker on one queue: all 50 sessions complete,
//!   none fails; the broken worker released what it claimed with a backoff and its breaker opened;
//! - two queues, a worker on each: each session runs only on its queue's worker;
//! - a provider that is down and then recovers: every session submitted during the outage completes afterwards;
//! - a provider that refuses a session's request as invalid (HTTP 400): the session fails at once, its error
//!   stored, and is not retried.
//!
//! No assertion depends on timing: the outage ends when the worker says its breaker opened, and each test waits
//! for what the store says, within a bound only a failure reaches.
#![cfg(unix)]

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headstart::store::{Backoff, QueueName, SessionInfo, SessionQueue, SessionSettings, SessionState};
use headstart::{Model, SessionId, TranscriptStore as _, UserMessage};
use headstart_fleet::{BreakerConfig, Worker, WorkerConfig, WorkerEvent, WorkerStats};
use headstart_postgres::testing::{self, TestDatabase};
use headstart_postgres::{PgOptions, PgStore};
use support::{Flaky, Observed, Quiet, Setup};

/// How long a test waits for the store to show what it expects before it fails.
const PATIENCE: Duration = Duration::from_secs(120);

async fn pg(database: &TestDatabase) -> Arc<PgStore> {
    Arc::new(
        PgStore::connect(database.url(), PgOptions::default())
            .await
            .expect("connect"),
    )
}

/// A worker `id` of `queues` answering with `model`, with short backoffs so that a test's outage costs little.
fn worker(queue: Arc<dyn SessionQueue>, id: &str, queues: &[&str], model: Arc<dyn Model>) -> Observed {
    let mut config = WorkerConfig::new(id);
    config.poll_interval = Duration::from_millis(50);
    config.queues = queues
        .iter()
        .map(|name| QueueName::new(*name).expect("a queue name"))
        .collect();
    config.session_backoff = Backoff {
        first: Duration::from_millis(50),
        max: Duration::from_millis(400),
    };
    config.breaker = BreakerConfig {
        threshold: 3,
        cool_down: Backoff {
            first: Duration::from_millis(200),
            max: Duration::from_secs(2),
        },
    };
    Observed::start(Worker::new(queue, Arc::new(Setup(model)), config).expect("config"))
}

/// Submits `count` sessions to `queue` (`None`: the default queue).
async fn submit(store: &PgStore, count: usize, queue: Option<&str>) -> Vec<SessionId> {
    let settings = SessionSettings {
        queue: queue.map(|name| QueueName::new(name).expect("a queue name")),
        ..SessionSettings::default()
    };
    let mut sessions = Vec::with_capacity(count);
    for _ in 0..count {
        sessions.push(
            store
                .submit_with(&UserMessage::new("go"), &settings, 0)
                .await
                .expect("submit"),
        );
    }
    sessions
}

/// Waits until every one of `sessions` is completed or failed; their entries.
async fn ended(store: &PgStore, sessions: &[SessionId]) -> Vec<SessionInfo> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let infos: Vec<SessionInfo> = store
            .sessions()
            .await
            .expect("sessions")
            .into_iter()
            .filter(|info| sessions.contains(&info.id))
            .collect();
        let done = infos
            .iter()
            .filter(|info| matches!(info.state, SessionState::Completed | SessionState::Failed))
            .count();
        if done == sessions.len() {
            return infos;
        }
        assert!(Instant::now() < deadline, "sessions still unfinished: {infos:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn count(infos: &[SessionInfo], state: SessionState) -> usize {
    infos.iter().filter(|info| info.state == state).count()
}

/// Waits for `worker`'s first event that `wanted` accepts.
async fn until(worker: &mut Observed, wanted: impl Fn(&WorkerEvent) -> bool) -> WorkerEvent {
    loop {
        let event = worker.next().await;
        if wanted(&event) {
            return event;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_worker_cannot_drain_the_queue_a_healthy_one_serves() {
    let Some(database) = testing::database().await else {
        return;
    };
    let store = pg(&database).await;
    let broken_model = Arc::new(Flaky::new(true, 500));
    // The broken worker starts first and alone, so that it claims (and must give back) sessions.
    let mut broken = worker(store.clone(), "broken", &["default"], broken_model.clone());
    let sessions = submit(&store, 50, None).await;
    let opened = until(&mut broken, |event| matches!(event, WorkerEvent::BreakerOpened { .. })).await;
    assert!(
        opened
            .to_string()
            .starts_with("breaker-open 3 session(s) in a row stopped on the provider"),
        "{opened}"
    );
    let mut healthy = worker(store.clone(), "healthy", &["default"], Arc::new(Quiet));
    let infos = ended(&store, &sessions).await;
    let broken_stats: WorkerStats = broken.stop().await;
    let healthy_stats = healthy.stop().await;
    println!("broken worker: {broken_stats:?}\nhealthy worker: {healthy_stats:?}");

    assert_eq!(count(&infos, SessionState::Failed), 0, "{infos:#?}");
    assert_eq!(count(&infos, SessionState::Completed), 50);
    assert!(
        infos.iter().all(|info| info.owner.as_deref() == Some("healthy")),
        "every session was completed by the healthy worker"
    );
    let retried: Vec<&SessionInfo> = infos.iter().filter(|info| info.attempts > 0).collect();
    assert!(
        retried.len() >= 3,
        "the broken worker released what it claimed: {infos:#?}"
    );
    assert!(
        retried.iter().all(|info| info.failure.is_none()),
        "completing a retried session clears its last error"
    );
    assert_eq!(broken_stats.failed, 0);
    assert_eq!(broken_stats.completed, 0);
    assert!(broken_stats.retried >= 3, "{broken_stats:?}");
    assert_eq!(
        broken_stats.retried, broken_stats.claimed,
        "every claim of it was given back"
    );
    assert!(broken_stats.breaker_opened >= 1);
    assert_eq!(
        broken_stats.claimed as usize,
        broken_model.refused.load(Ordering::SeqCst),
        "one refused request per claim: no claim while the breaker was open but its probes"
    );
    assert_eq!(healthy_stats.completed, 50);
    assert_eq!(healthy_stats.failed, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_queue_s_sessions_run_only_on_its_worker() {
    let Some(database) = testing::database().await else {
        return;
    };
    let store = pg(&database).await;
    let gpu = submit(&store, 8, Some("gpu")).await;
    let cpu = submit(&store, 8, Some("cpu")).await;
    let plain = submit(&store, 2, None).await;
    let mut on_gpu = worker(store.clone(), "on-gpu", &["gpu"], Arc::new(Quiet));
    let mut on_cpu = worker(store.clone(), "on-cpu", &["cpu", "default"], Arc::new(Quiet));
    let all: Vec<SessionId> = gpu.iter().chain(&cpu).chain(&plain).cloned().collect();
    let infos = ended(&store, &all).await;
    let gpu_stats = on_gpu.stop().await;
    let cpu_stats = on_cpu.stop().await;
    for info in &infos {
        let expected = if gpu.contains(&info.id) { "on-gpu" } else { "on-cpu" };
        assert_eq!(
            (info.state, info.owner.as_deref()),
            (SessionState::Completed, Some(expected)),
            "{info:?}"
        );
        let queue = info.settings.queue_name();
        assert_eq!(
            queue,
            if gpu.contains(&info.id) {
                "gpu"
            } else if cpu.contains(&info.id) {
                "cpu"
            } else {
                "default"
            }
        );
    }
    assert_eq!((gpu_stats.claimed, cpu_stats.claimed), (8, 10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_submitted_during_an_outage_complete_once_the_provider_is_back() {
    let Some(database) = testing::database().await else {
        return;
    };
    let store = pg(&database).await;
    let model = Arc::new(Flaky::new(true, 503));
    let mut lone = worker(store.clone(), "lone", &["default"], model.clone());
    let sessions = submit(&store, 6, None).await;
    until(&mut lone, |event| matches!(event, WorkerEvent::BreakerOpened { .. })).await;
    // The outage ends while the worker claims nothing: it probes after its cool-down and finds the provider up.
    model.down.store(false, Ordering::SeqCst);
    until(&mut lone, |event| matches!(event, WorkerEvent::BreakerClosed)).await;
    let infos = ended(&store, &sessions).await;
    let stats = lone.stop().await;
    assert_eq!(count(&infos, SessionState::Completed), 6, "{infos:#?}");
    assert_eq!(stats.failed, 0);
    assert!(stats.retried >= 3, "{stats:?}");
    assert!(infos.iter().any(|info| info.attempts > 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_provider_refuses_as_invalid_fails_the_session_at_once() {
    let Some(database) = testing::database().await else {
        return;
    };
    let store = pg(&database).await;
    let model = Arc::new(Flaky::new(true, 400));
    let mut lone = worker(store.clone(), "lone", &["default"], model.clone());
    let sessions = submit(&store, 1, None).await;
    let infos = ended(&store, &sessions).await;
    let stats = lone.stop().await;
    let info = &infos[0];
    assert_eq!((info.state, info.attempts), (SessionState::Failed, 0), "{info:?}");
    let failure = info.failure.as_deref().unwrap_or_default();
    assert!(failure.contains("400"), "the provider's error is stored: {failure}");
    assert_eq!((stats.failed, stats.retried, stats.breaker_opened), (1, 0, 0));
    assert_eq!(model.refused.load(Ordering::SeqCst), 1, "asked once, not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_fails_with_its_last_error_once_its_attempts_are_spent() {
    let Some(database) = testing::database().await else {
        return;
    };
    let store = pg(&database).await;
    let model = Arc::new(Flaky::new(true, 502));
    let mut config = WorkerConfig::new("lone");
    config.poll_interval = Duration::from_millis(20);
    config.max_attempts = 3;
    config.session_backoff = Backoff {
        first: Duration::from_millis(10),
        max: Duration::from_millis(20),
    };
    // The breaker stays closed, so that nothing but the attempt limit stops the session.
    config.breaker.threshold = 0;
    let mut lone = Observed::start(Worker::new(store.clone(), Arc::new(Setup(model.clone())), config).expect("config"));
    let sessions = submit(&store, 1, None).await;
    let infos = ended(&store, &sessions).await;
    let stats = lone.stop().await;
    let info = &infos[0];
    assert_eq!((info.state, info.attempts), (SessionState::Failed, 2), "{info:?}");
    let failure = info.failure.as_deref().unwrap_or_default();
    assert!(
        failure.starts_with("the model's provider failed 3 attempt(s) in a row; the last: ") && failure.contains("502"),
        "{failure}"
    );
    assert_eq!((stats.retried, stats.failed), (2, 1));
    assert_eq!(model.refused.load(Ordering::SeqCst), 3);
}
