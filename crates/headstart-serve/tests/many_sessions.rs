//! A store of 10,000 sessions: the listing reads one page from the database, not every session. Prints the time
//! `/` takes; asserts only a bound ten times the 200 ms, which a busy machine cannot break.

mod support;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use headstart::core::model::UserMessage;
use headstart::store::SessionQueue;
use headstart_serve::{Options, PER_PAGE};
use support::{get, server, StoreFile};

const SESSIONS: usize = 10_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listing_of_ten_thousand_sessions_reads_one_page() {
    let file = StoreFile::new();
    let writer = file.writer();
    for n in 0..SESSIONS {
        let at = i64::try_from(n).expect("small") * 1_000;
        writer
            .submit(&UserMessage::new(format!("task {n}")), at)
            .await
            .expect("submit");
    }
    let app = server(&file.path, &Options::default());
    get(&app, "/").await; // the first statement preparations

    let mut times = Vec::new();
    for page in [1, 2, 100, 200] {
        let started = Instant::now();
        let answer = get(&app, &format!("/?page={page}")).await;
        times.push(started.elapsed());
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(
            answer.body.matches("<tr class=\"session\"").count(),
            PER_PAGE as usize,
            "page {page}"
        );
        assert!(answer.body.contains(&format!("page {page} of 200 (10000 sessions)")));
    }
    let first = get(&app, "/").await.body;
    assert!(
        first.contains(">task 9999<") && !first.contains(">task 9949<"),
        "newest first, 50 a page"
    );
    times.sort();
    println!(
        "10,000 sessions: / renders in {:?} (median of 4 pages; slowest {:?})",
        times[times.len() / 2],
        times[times.len() - 1]
    );
    assert!(times[times.len() / 2] < Duration::from_secs(2), "{times:?}");
}
