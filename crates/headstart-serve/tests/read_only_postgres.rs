//! Nothing the server does writes to a PostgreSQL store: every table's rows (their count and a digest of their
//! text) are the same after a session of requests to every route as before. (`pg_stat_database.xact_commit`
//! cannot tell: it counts the server's read-only transactions too; the store's read-only handle runs each read in
//! a `READ ONLY` transaction, which PostgreSQL itself refuses to let write.)

mod support;

use std::sync::Arc;

use headstart_postgres::{testing, PgOptions, PgStore};
use headstart_serve::{router, Changes, Options, Source};
use support::{browse, write_sample};

/// Each table's row count and the digest of its rows' text.
async fn tables(database: &testing::TestDatabase) -> Vec<(String, i64, String)> {
    let client = database.client().await;
    let mut out = Vec::new();
    for table in ["schema_version", "sessions", "messages", "tool_runs"] {
        let query = format!(
            "SELECT count(*), coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '') FROM headstart.{table} AS t"
        );
        let row = client.query_one(&query, &[]).await.expect(&query);
        out.push((table.to_owned(), row.get(0), row.get(1)));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_never_changes_a_postgresql_store() {
    let Some(database) = testing::database().await else {
        return; // testing::database said why, loudly
    };
    let writer = PgStore::connect(database.url(), PgOptions::default())
        .await
        .expect("connect");
    let sample = write_sample(&writer).await;
    let before = tables(&database).await;
    assert!(
        before.iter().any(|(table, rows, _)| table == "messages" && *rows > 0),
        "{before:?}"
    );

    let store = Arc::new(
        PgStore::connect_read_only(database.url(), PgOptions::default())
            .await
            .expect("read-only"),
    );
    let source = Source {
        store,
        changes: Changes::Poll,
    };
    browse(&router(source, &Options::default()), &sample).await;
    assert_eq!(tables(&database).await, before, "the store changed while served");
}
