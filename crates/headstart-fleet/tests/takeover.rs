//! Takeover (contract §7.5.3): a worker takes over a session whose owner stopped renewing within the lease time plus
//! one poll interval, and finishes it; a worker that loses a lease stops the session without finishing it; a worker
//! keeps to its concurrency and releases its sessions on shutdown.
//!
//! Lease expiry is the database's clock (the machine's for SQLite), so these tests run on real time. No assertion
//! depends on which of two timers fires first: the takeover's upper bound leaves [`SCHEDULING_SLACK`] for a loaded
//! machine, and the other tests wait for events, not for time to pass.

mod support;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use headstart::store::{SessionEnd, SessionQueue, SessionState, SqliteStore};
use headstart::{TranscriptStore, UserMessage};
use headstart_fleet::{Worker, WorkerConfig, WorkerEvent};
use support::{Observed, Quiet, Setup, Silent, Switched};

/// How late a takeover may come, past the lease and one poll, before the test fails: scheduling on a loaded
/// machine, where the figure measured on an idle one is a few milliseconds (it is printed).
const SCHEDULING_SLACK: Duration = Duration::from_secs(2);

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

    let mut config = WorkerConfig::new("rescuer");
    config.lease = LEASE;
    config.poll_interval = POLL;
    let mut worker =
        Observed::start(Worker::new(store.clone(), Arc::new(Setup(Arc::new(Quiet))), config).expect("config"));

    let mut taken_over_after = None;
    let mut finished = None;
    while finished.is_none() {
        let (at, event) = worker.next_stamped().await;
        match event {
            WorkerEvent::Claimed {
                previous_owner, epoch, ..
            } => {
                assert_eq!(previous_owner.as_deref(), Some("dead"));
                assert_eq!(epoch, 2, "the takeover is the second claim");
                taken_over_after = Some(at - claimed_at);
            }
            WorkerEvent::Finished { end, .. } => finished = Some(end),
            WorkerEvent::QueueError { message } | WorkerEvent::StoreUnreachable { message, .. } => {
                panic!("queue error: {message}")
            }
            _ => {}
        }
    }
    let stats = worker.stop().await;
    let after = taken_over_after.expect("the session was claimed");
    assert!(
        after >= LEASE,
        "taken over after {after:?}, before the lease of {LEASE:?} ended"
    );
    eprintln!("taken over after {after:?} (lease {LEASE:?} + one poll {POLL:?})");
    assert!(
        after <= LEASE + POLL + SCHEDULING_SLACK,
        "taken over after {after:?}: later than lease + one poll ({:?}) + {SCHEDULING_SLACK:?} of slack",
        LEASE + POLL
    );
    assert_eq!(finished, Some(SessionEnd::Completed));
    assert_eq!((stats.claimed, stats.taken_over, stats.completed), (1, 1, 1));
    let info = store.sessions().await.expect("sessions").remove(0);
    assert_eq!(info.id, session);
    assert_eq!(info.state, SessionState::Completed);
    assert_eq!(info.owner.as_deref(), Some("rescuer"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_takes_no_more_than_its_concurrency_and_releases_its_sessions_on_shutdown() {
    let store = Arc::new(SqliteStore::open_in_memory().expect("in-memory store"));
    for _ in 0..5 {
        store.submit(&UserMessage::new("go"), 0).await.expect("submit");
    }
    let mut config = WorkerConfig::new("w");
    config.concurrency = 3;
    config.poll_interval = Duration::from_millis(20);
    let mut worker = Observed::start(
        Worker::new(store.clone(), Arc::new(Setup(Arc::new(Silent::default()))), config).expect("config"),
    );
    for _ in 0..3 {
        let event = worker.next().await;
        assert!(matches!(event, WorkerEvent::Claimed { .. }), "{event:?}");
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
    let stats = worker.stop().await;
    assert_eq!((stats.claimed, stats.released, stats.completed), (3, 3, 0));
    let after = states(store.sessions().await.expect("sessions"));
    assert_eq!(
        after,
        vec![SessionState::Pending; 5],
        "released sessions are pending again"
    );
}

/// The race this test once lost: after the loss, the worker forgot the session, then claimed it again once its
/// lease expired (its own expired lease is claimable like any other) and released it at shutdown. Claims find
/// nothing once the renewals miss, as when another worker holds the session, and the test waits for the lost
/// session's run to stop (its response is dropped) rather than for a while. The renewals miss only once the run
/// is under way, so that it is the loss that stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_misses_a_lease_stops_the_session_without_finishing_it() {
    let inner = Arc::new(SqliteStore::open_in_memory().expect("in-memory store"));
    let session = inner.submit(&UserMessage::new("go"), 0).await.expect("submit");
    let queue = Arc::new(Switched::new(Arc::clone(&inner)));
    let model = Silent::default();
    let (opened, ended) = (Arc::clone(&model.opened), Arc::clone(&model.ended));
    let mut config = WorkerConfig::new("w");
    config.lease = Duration::from_millis(300);
    config.poll_interval = Duration::from_millis(20);
    let mut worker =
        Observed::start(Worker::new(queue.clone(), Arc::new(Setup(Arc::new(model))), config).expect("config"));
    assert!(matches!(worker.next().await, WorkerEvent::Claimed { .. }));
    // The session's run is under way (its response is open) before its lease is lost.
    tokio::time::timeout(Duration::from_secs(10), opened.notified())
        .await
        .expect("the session's response was asked for");
    queue.claim_nothing.store(true, Ordering::SeqCst);
    queue.lose_renewals.store(true, Ordering::SeqCst);
    match worker.next().await {
        WorkerEvent::Lost { session: lost, reason } => {
            assert_eq!(lost, session);
            assert!(reason.contains("renewed"), "{reason}");
        }
        other => panic!("expected the loss, got {other:?}"),
    }
    // The loss, not the shutdown, stops the session's run: its response is dropped before the shutdown.
    tokio::time::timeout(Duration::from_secs(10), ended.notified())
        .await
        .expect("the lost session's response was dropped");
    let stats = worker.stop().await;
    assert_eq!(
        (stats.claimed, stats.lost, stats.completed, stats.failed, stats.released),
        (1, 1, 0, 0, 0)
    );
    while let Some(event) = worker.try_next() {
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
