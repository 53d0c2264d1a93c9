//! Nothing the server does writes to the store: the database file and its WAL hold the same bytes after a
//! session of requests to every route as before, with the writer's WAL full of commits and after it closed.

mod support;

use std::path::Path;

use headstart_serve::Options;
use support::{browse, server, write_sample, StoreFile};

/// The bytes of the database file and of its WAL (`None` when there is none).
fn snapshot(path: &Path) -> (Vec<u8>, Option<Vec<u8>>) {
    let wal = path.with_file_name(format!(
        "{}-wal",
        path.file_name().and_then(|name| name.to_str()).expect("a file name")
    ));
    (std::fs::read(path).expect("read the database"), std::fs::read(wal).ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_never_changes_the_store() {
    let file = StoreFile::new();
    let writer = file.writer();
    let sample = write_sample(&writer).await;

    // The writer is still open: its commits are in the WAL.
    let before = snapshot(&file.path);
    assert!(
        before.1.as_ref().is_some_and(|wal| !wal.is_empty()),
        "a WAL with commits"
    );
    browse(&server(&file.path, &Options::default()), &sample).await;
    assert!(
        snapshot(&file.path) == before,
        "the database or its WAL changed while served"
    );

    // The writer closed: everything is in the database file.
    drop(writer);
    let before = snapshot(&file.path);
    browse(&server(&file.path, &Options::default()), &sample).await;
    assert!(
        snapshot(&file.path) == before,
        "the database or its WAL changed while served"
    );
}
