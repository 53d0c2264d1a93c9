use clap::Parser as _;

use super::workers::{read_line, Seen};

#[test]
fn a_worker_log_reads_as_the_benchmark_follows_it() {
    assert_eq!(
        read_line("metrics http://127.0.0.1:9464/metrics"),
        Some(Seen::Metrics("127.0.0.1:9464".parse().expect("an address")))
    );
    assert_eq!(
        read_line("claimed 0192-ab epoch 2 from worker-1"),
        Some(Seen::Claimed("0192-ab".to_owned()))
    );
    assert_eq!(
        read_line("finished 0192-ab completed"),
        Some(Seen::Finished {
            session: "0192-ab".to_owned(),
            completed: true,
            line: "finished 0192-ab completed".to_owned(),
        })
    );
    assert!(matches!(
        read_line("finished 0192-ab failed: the model's last response failed"),
        Some(Seen::Finished { completed: false, .. })
    ));
    assert_eq!(read_line("lost 0192-ab: gone"), None);
    assert_eq!(read_line("metrics nonsense"), None);
}

#[test]
fn bench_sessions_takes_a_list_of_worker_counts_and_the_load() {
    let parsed = crate::Cli::try_parse_from([
        "headstart",
        "bench",
        "sessions",
        "--store",
        "postgresql://agent@db/agents",
        "--workers",
        "1,2,4",
        "--model-ms",
        "200",
        "--tool-ms",
        "100",
        "--concurrency",
        "8",
        "--json",
    ]);
    let Ok(crate::Cli {
        command: crate::Command::Bench(args),
    }) = parsed
    else {
        panic!("bench sessions parses");
    };
    let options = (args.sessions())
        .and_then(|args| args.fleet_options().ok().flatten())
        .expect("a fleet run");
    assert_eq!(options.workers, [1, 2, 4]);
    assert_eq!((options.load.model_ms, options.load.tool_ms), (200, 100));
    assert_eq!(options.concurrency, 8);
    assert_eq!(options.sessions, 500);
}

#[tokio::test]
async fn a_stalled_run_says_what_the_store_says_of_each_unfinished_session() {
    use headstart::store::{SessionEnd, SessionQueue, SqliteStore};
    use headstart::UserMessage;

    let store = SqliteStore::open_in_memory().expect("store");
    let held = store.submit(&UserMessage::new("go"), 0).await.expect("submit");
    let failed = store.submit(&UserMessage::new("go"), 1).await.expect("submit");
    let waiting = store.submit(&UserMessage::new("go"), 2).await.expect("submit");
    let lease = std::time::Duration::from_secs(30);
    let claims = store.claim("bench-1", lease, 1).await.expect("claim");
    assert_eq!(claims[0].lease.session, held);
    // Claimed and failed by a worker the benchmark never heard of: the stall report used to call it never claimed.
    let other = store.claim("real1", lease, 1).await.expect("claim");
    store
        .finish(
            &other[0].lease,
            SessionEnd::Failed("gave up after 3 attempts".to_owned()),
        )
        .await
        .expect("fail");
    let mut progress = super::Progress {
        finished: 3,
        ..super::Progress::default()
    };
    for session in [&held, &failed, &waiting] {
        progress.ours.insert(session.0.clone());
        progress.unclaimed.insert(session.0.clone(), std::time::Instant::now());
    }
    let report = super::stuck(&store, &progress).await;
    assert!(report.contains("(3 of this run's finished)"), "{report}");
    assert!(
        report.contains(&format!(
            "claimed by bench-1: {held} (state running, owner bench-1, epoch 1"
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "claimed by real1: {failed} (state failed, owner real1, epoch 1, lease none, 1 messages, failure: gave up \
             after 3 attempts)"
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!("never claimed: {waiting} (state pending, owner none")),
        "{report}"
    );
}
