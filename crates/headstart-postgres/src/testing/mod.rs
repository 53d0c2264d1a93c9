//! A real PostgreSQL for tests: [`database`] gives each test a fresh, empty database.
//!
//! The server is, in order of preference:
//! 1. the one `DATABASE_URL` points at (its role must be allowed to create databases); each test's database is
//!    dropped when the test ends;
//! 2. a throwaway cluster this test process starts once, from the PostgreSQL binaries it finds (`initdb` and
//!    `pg_ctl` on `PATH`, else the newest `/usr/lib/postgresql/<version>/bin`, else `pg_config --bindir`). It
//!    lives in a private temporary folder, listens only on a Unix socket there (no TCP port, so test processes
//!    never collide), runs with `fsync = off` (tests need speed, not crash safety), and, when the tests run as
//!    root, runs as the `postgres` user (`initdb` refuses root). A guardian process stops it and deletes the
//!    folder as soon as the test process ends, however it ends (a panic, an abort, SIGKILL): it waits for the
//!    end of a pipe that only the test process holds open.
//!
//! [`tls::cluster`] starts another kind of throwaway cluster, for the TLS tests: TCP on 127.0.0.1, TLS only,
//! passwords.
//!
//! When neither is available, [`database`] prints a loud message and returns `None`, and the calling test skips;
//! with `HEADSTART_REQUIRE_POSTGRES=1` (CI sets it) it panics instead, so a skip cannot pass unnoticed.

mod address;
mod cluster;
pub mod tls;

use std::io::Write as _;
use std::process::ChildStdin;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config, NoTls};

use self::address::{quote_ident, Address};
use self::cluster::{launch, SUPERUSER};
use crate::errors::describe;

/// Set to `1` to make a missing PostgreSQL fail the tests instead of skipping them.
pub const REQUIRE_POSTGRES: &str = "HEADSTART_REQUIRE_POSTGRES";

/// The URL of an existing server to use instead of starting a cluster.
pub const DATABASE_URL: &str = "DATABASE_URL";

/// The port a throwaway cluster's socket is named after (it listens on no TCP port).
const PORT: u16 = 5432;

/// A fresh, empty database for one test, on the test server. Dropping it drops the database on a `DATABASE_URL`
/// server; a throwaway cluster goes away whole when the test process ends.
#[derive(Debug)]
pub struct TestDatabase {
    url: String,
    name: String,
    drop_with: Option<String>,
}

impl TestDatabase {
    /// A `postgresql://` URL of the database, for [`PgStore::connect`](crate::PgStore::connect) in this process
    /// or in a child process.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A copy of the database as it is now, for a test that resumes the same state apart in several copies (a
    /// crash's store, forked). PostgreSQL copies only a database nobody is connected to: every other connection to
    /// this one is ended first (a killed process's may linger until the server notices).
    pub async fn copy(&self) -> TestDatabase {
        let server = match tokio::task::spawn_blocking(server).await {
            Ok(Ok(server)) => server,
            Ok(Err(why)) => panic!("the test PostgreSQL is gone: {why}"),
            Err(err) => panic!("finding the test PostgreSQL panicked: {err}"),
        };
        let name = next_name();
        let admin = server.admin().await;
        let end_others = format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}' AND pid <> pg_backend_pid()",
            self.name.replace('\'', "''")
        );
        let create = format!(
            "CREATE DATABASE {} TEMPLATE {}",
            quote_ident(&name),
            quote_ident(&self.name)
        );
        // A connection ended just now may still count for a moment: try again a few times.
        let mut tries = 0;
        loop {
            admin
                .batch_execute(&end_others)
                .await
                .unwrap_or_else(|err| panic!("cannot end the connections to {}: {}", self.name, describe(&err)));
            match admin.batch_execute(&create).await {
                Ok(()) => break,
                Err(_) if tries < 50 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(err) => panic!("cannot copy {} to {name}: {}", self.name, describe(&err)),
            }
        }
        server.test_database(name)
    }

    /// A plain connection to the database, to set up or inspect what a test needs beside the store (its
    /// connection task runs on the current tokio runtime).
    pub async fn client(&self) -> Client {
        connect(&self.url)
            .await
            .unwrap_or_else(|err| panic!("cannot connect to the test database {}: {}", self.name, describe(&err)))
    }

    /// Opens the database, which holds an older schema, as a migration test does: a read-only handle is refused
    /// (it cannot upgrade, and says the schema is older), then a store connects and upgrades it.
    pub async fn upgrade_older_schema(&self) -> crate::PgStore {
        let err = crate::PgStore::connect_read_only(&self.url, crate::PgOptions::default())
            .await
            .expect_err("an older schema read-only");
        assert!(
            matches!(&err, headstart_store::StoreError::Open { message, .. } if message.message().contains("older")),
            "{err:?}"
        );
        crate::PgStore::connect(&self.url, crate::PgOptions::default())
            .await
            .expect("connect and upgrade")
    }

    /// The value of `query`, a `SELECT count(*) …` (what a test checks a store did, or did not, create).
    pub async fn count(&self, query: &str) -> i64 {
        self.client()
            .await
            .query_one(query, &[])
            .await
            .and_then(|row| row.try_get(0))
            .unwrap_or_else(|err| panic!("test database {}: {query}: {}", self.name, describe(&err)))
    }

    /// The process ids of the store's wake-up listeners on this database that are listening: connected as
    /// [`LISTENER_NAME`](crate::LISTENER_NAME), their `LISTEN` done.
    pub async fn listeners(&self) -> Vec<i32> {
        let query = "SELECT pid FROM pg_stat_activity
            WHERE datname = $1 AND application_name = $2 AND state = 'idle' AND query <> ''";
        self.client()
            .await
            .query(query, &[&self.name, &crate::LISTENER_NAME])
            .await
            .and_then(|rows| rows.iter().map(|row| row.try_get(0)).collect())
            .unwrap_or_else(|err| panic!("test database {}: listeners: {}", self.name, describe(&err)))
    }

    /// The wake-up listener of this database once it listens, within 10 s, other than `not` (one ended before).
    pub async fn listener(&self, not: Option<i32>) -> i32 {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Some(pid) = self.listeners().await.into_iter().find(|pid| Some(*pid) != not) {
                return pid;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no wake-up listener on {} within 10 s",
                self.name
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Ends the server process `pid` as an administrator would (`pg_terminate_backend`): the fault of a dropped
    /// connection.
    pub async fn terminate(&self, pid: i32) {
        let ended: bool = self
            .client()
            .await
            .query_one("SELECT pg_terminate_backend($1)", &[&pid])
            .await
            .and_then(|row| row.try_get(0))
            .unwrap_or_else(|err| panic!("test database {}: terminate {pid}: {}", self.name, describe(&err)));
        assert!(ended, "no server process {pid} to end");
    }

    /// Whether the database has a `headstart` schema (a read-only handle must never create it).
    pub async fn has_store_schema(&self) -> bool {
        self.count("SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'headstart'")
            .await
            > 0
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Some(admin_url) = self.drop_with.take() else {
            return;
        };
        let statement = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", quote_ident(&self.name));
        // Drop runs outside any runtime (or inside one that cannot block): use a private one on its own thread.
        // Best effort: a database left behind on a developer's server is harmless.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let admin = connect(&admin_url).await.ok()?;
                admin.batch_execute(&statement).await.ok()
            })
        })
        .join();
    }
}

/// A fresh, empty database on the test server, or `None` when no PostgreSQL can be had (after saying so loudly;
/// with `HEADSTART_REQUIRE_POSTGRES=1`, it panics instead).
pub async fn database() -> Option<TestDatabase> {
    let server = match tokio::task::spawn_blocking(server).await {
        Ok(server) => server,
        Err(err) => panic!("starting the test PostgreSQL panicked: {err}"),
    };
    let server = match server {
        Ok(server) => server,
        Err(why) => {
            unavailable(why);
            return None;
        }
    };
    let name = next_name();
    let admin = server.admin().await;
    // template0 and the C locale: an encoding-neutral template, so UTF8 works whatever the server's default.
    let create = format!(
        "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'",
        quote_ident(&name)
    );
    admin.batch_execute(&create).await.unwrap_or_else(|err| {
        panic!(
            "cannot create the test database {name} ({}): {}",
            server.describe,
            describe(&err)
        )
    });
    Some(server.test_database(name))
}

/// A database name no other test of this process has.
fn next_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "headstart_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// No PostgreSQL for the tests, because of `why`: a panic under `HEADSTART_REQUIRE_POSTGRES=1`, else a loud
/// message (the caller then skips).
fn unavailable(why: &str) {
    if required() {
        panic!("{REQUIRE_POSTGRES}=1 but no PostgreSQL is available for the tests: {why}");
    }
    announce_skip(why);
}

fn required() -> bool {
    std::env::var(REQUIRE_POSTGRES).is_ok_and(|value| value == "1")
}

/// Prints why the PostgreSQL tests are skipped, once per test process, straight to the standard error (the test
/// harness captures only `eprintln!`, and a skipped test passes: the message must be seen).
fn announce_skip(why: &str) {
    static ANNOUNCED: OnceLock<()> = OnceLock::new();
    ANNOUNCED.get_or_init(|| {
        let banner = "=".repeat(100);
        let _ = writeln!(
            std::io::stderr(),
            "\n{banner}\nPOSTGRESQL TESTS SKIPPED: {why}\nInstall the PostgreSQL server (Debian: apt-get install \
             postgresql), or set {DATABASE_URL} to a server where the role may create databases; set \
             {REQUIRE_POSTGRES}=1 to make this a failure.\n{banner}"
        );
    });
}

async fn connect(url: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// The test server of this process.
struct Server {
    /// How to reach it (without a database name).
    address: Address,
    /// A URL of its maintenance database, where test databases are created.
    admin_url: String,
    /// For messages.
    describe: String,
    /// Whether it is the `DATABASE_URL` server (whose test databases are dropped after each test).
    external: bool,
    /// The throwaway cluster's guardian: it stops the cluster when this pipe closes, at the process's end.
    _guardian: Option<Mutex<ChildStdin>>,
}

impl Server {
    /// A connection to its maintenance database, where test databases are created and copied.
    async fn admin(&self) -> Client {
        connect(&self.admin_url).await.unwrap_or_else(|err| {
            panic!(
                "cannot connect to the test PostgreSQL ({}): {}",
                self.describe,
                describe(&err)
            )
        })
    }

    /// The test database `name` on this server (created by the caller), dropped with it on a `DATABASE_URL` server.
    fn test_database(&self, name: String) -> TestDatabase {
        TestDatabase {
            url: self.address.url(&name),
            name,
            drop_with: self.external.then(|| self.admin_url.clone()),
        }
    }
}

/// The server, started on first use.
fn server() -> Result<&'static Server, &'static str> {
    static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();
    SERVER
        .get_or_init(|| match std::env::var(DATABASE_URL) {
            Ok(url) if !url.trim().is_empty() => external(&url),
            _ => start_cluster(),
        })
        .as_ref()
        .map_err(String::as_str)
}

fn external(url: &str) -> Result<Server, String> {
    let config = Config::from_str(url).map_err(|err| format!("{DATABASE_URL} is not a valid URL: {err}"))?;
    let address = address_of(&config)?;
    let admin_db = config.get_dbname().unwrap_or("postgres").to_owned();
    Ok(Server {
        admin_url: address.url(&admin_db),
        describe: format!("{DATABASE_URL}, database {admin_db}"),
        address,
        external: true,
        _guardian: None,
    })
}

/// Where the `DATABASE_URL` server in `config` listens, and as whom to connect.
fn address_of(config: &Config) -> Result<Address, String> {
    let host = config
        .get_hosts()
        .first()
        .cloned()
        .unwrap_or_else(|| Host::Tcp("localhost".to_owned()));
    Ok(Address {
        host,
        port: config.get_ports().first().copied().unwrap_or(PORT),
        user: config
            .get_user()
            .ok_or_else(|| format!("{DATABASE_URL} names no user"))?
            .to_owned(),
        password: config.get_password().map(<[u8]>::to_vec),
    })
}

fn start_cluster() -> Result<Server, String> {
    let cluster = launch("headstart-pg", PORT, None)?;
    let address = Address {
        host: Host::Unix(cluster.sockets.clone()),
        port: PORT,
        user: SUPERUSER.to_owned(),
        password: None,
    };
    Ok(Server {
        admin_url: address.url("postgres"),
        describe: format!("throwaway cluster in {}", cluster.base.display()),
        address,
        external: false,
        _guardian: Some(Mutex::new(cluster.guardian)),
    })
}
