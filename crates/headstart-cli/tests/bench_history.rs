//! `headstart bench history --store URL` runs its session on PostgreSQL too (issue 32): next to the two SQLite rows,
//! a PostgreSQL row, and with `--verify` every request's context equals a fresh read of the whole log, on each store.
//!
//! PostgreSQL comes from `headstart_postgres::testing` (`DATABASE_URL`, or a throwaway cluster); without one the
//! test says why and passes, unless `HEADSTART_REQUIRE_POSTGRES=1` (CI) makes that a failure.

use headstart_postgres::testing;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_runs_on_postgresql_too_and_every_context_matches_a_fresh_read() {
    let Some(database) = testing::database().await else {
        return;
    };
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_headstart"))
        .args([
            "bench", "history", "--rounds", "30", "--window", "10", "--bytes", "200", "--verify", "--json",
        ])
        .args(["--store", database.url()])
        .kill_on_drop(true)
        .output()
        .await
        .expect("run headstart bench history");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "bench history failed: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["verified"], true);
    let rows = report["rows"].as_array().expect("rows");
    let stores: Vec<&str> = rows.iter().filter_map(|row| row["store"].as_str()).collect();
    assert_eq!(stores, ["sqlite normal", "sqlite full", "postgresql"]);
    for row in rows {
        assert!(row["last_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{row}");
    }
}
