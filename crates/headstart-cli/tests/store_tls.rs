//! The CLI's `--store` with a TLS-only PostgreSQL (`headstart_postgres::testing::tls`): a `key=value` connection
//! string is a database, not a file name; the password comes from `PGPASSWORD` (set on the child process only);
//! no output shows a password.
#![cfg(unix)]

use std::path::Path;
use std::process::{Command, Output};

use headstart_postgres::testing::tls::{self, CERTIFIED_HOST, USER};

/// Runs `headstart ARGS` in `dir` with `PGPASSWORD` set to `password` (and no other libpq variable).
fn headstart(dir: &Path, args: &[&str], password: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_headstart"))
        .args(args)
        .current_dir(dir)
        .env("PGPASSWORD", password)
        .env_remove("PGPASSFILE")
        .env_remove("PGSSLMODE")
        .env_remove("PGSSLROOTCERT")
        .env("HOME", dir)
        .output()
        .expect("run headstart")
}

#[tokio::test]
async fn a_key_value_store_with_pgpassword_is_used_and_no_output_shows_a_password() {
    let Some(cluster) = tls::cluster().await else { return };
    let database = cluster.database().await;
    let dir = tempfile::tempdir().expect("a working folder");
    let conn = format!(
        "host={CERTIFIED_HOST} port={} dbname={database} user={USER} sslmode=verify-full sslrootcert='{}'",
        cluster.port(),
        cluster.ca_file().display()
    );

    let submitted = headstart(
        dir.path(),
        &["submit", "--store", &conn, "hello over TLS"],
        cluster.password(),
    );
    let stdout = String::from_utf8_lossy(&submitted.stdout);
    let stderr = String::from_utf8_lossy(&submitted.stderr);
    assert!(submitted.status.success(), "submit failed: {stderr}");
    assert_eq!(stdout.lines().count(), 1, "one session id: {stdout}");
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list the working folder")
        .flatten()
        .map(|entry| entry.file_name())
        .collect();
    assert!(files.is_empty(), "no SQLite file was created: {files:?}");

    let inspected = headstart(dir.path(), &["inspect", &conn, "--json"], cluster.password());
    assert!(
        inspected.status.success(),
        "inspect failed: {}",
        String::from_utf8_lossy(&inspected.stderr)
    );
    assert!(String::from_utf8_lossy(&inspected.stdout).contains(stdout.trim()));

    // A wrong password, in the string: refused, and neither it nor the environment's is shown.
    let wrong = format!("{conn} password='wr0ng s3cret'");
    let refused = headstart(dir.path(), &["submit", "--store", &wrong, "x"], cluster.password());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a wrong password must fail");
    assert!(stderr.contains("password authentication failed"), "{stderr}");
    assert!(
        stderr.contains("password=***"),
        "the redacted string names the database: {stderr}"
    );
    for secret in ["wr0ng", "s3cret", cluster.password()] {
        assert!(!stderr.contains(secret) && !String::from_utf8_lossy(&refused.stdout).contains(secret));
    }

    // The same with an upper-case URL scheme.
    let url = cluster
        .url(CERTIFIED_HOST, cluster.port(), &database, false, "sslmode=require")
        .replacen("postgresql://", "POSTGRESQL://", 1);
    let submitted = headstart(dir.path(), &["submit", "--store", &url, "again"], cluster.password());
    assert!(
        submitted.status.success(),
        "{}",
        String::from_utf8_lossy(&submitted.stderr)
    );
}
