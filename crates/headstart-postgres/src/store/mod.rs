//! The PostgreSQL store: its options, its design, connecting, and its handles. `transaction` runs an operation,
//! `traits` implements the store's traits with the operations of `ops.rs`.

mod traits;
mod transaction;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use headstart_store::{Backoff, Durability, Lease, StoreError};

use crate::connect::LibpqConnect;
use crate::conninfo::{redact, PgEnvironment};
use crate::errors::{self, pg_error, pool_error, Stage};
use crate::listener::Listener;
use crate::ops::Access;
use crate::{conninfo, pgpass, schema, sql, tls};

/// Options for [`PgStore::connect`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    /// Durability of commits (default [`Durability::Full`]). `Full`: every commit waits for `synchronous_commit`
    /// at `on` or above. `Normal`: transcript writes that admit no call commit with `synchronous_commit = off`
    /// (they survive a crash of the worker, and of the database server once its WAL writer flushed them, within
    /// milliseconds); commits that admit calls and every queue operation (claims, renewals, finishes) keep `on`
    /// or above (contract §7.5).
    pub durability: Durability,
    /// The most connections the store opens (default 16). Operations beyond wait for a free one.
    pub max_connections: usize,
    /// How long connecting may take before the operation fails with [`StoreError::Unavailable`] (default 10 s;
    /// a `connect_timeout` in the URL wins).
    pub connect_timeout: Duration,
    /// The libpq environment variables to honour (`PGPASSWORD`, `PGPASSFILE`, `PGSSLMODE`, `PGSSLROOTCERT`) and
    /// the home folder; `None` (the default) reads the process's when connecting.
    pub environment: Option<PgEnvironment>,
    /// Whether [`wake_ups`](headstart_store::SessionQueue::wake_ups) listens for the queue's notifications on a
    /// connection of its own (default on). Off, it gives `None` and workers poll: for a server reached through a
    /// pooler in transaction mode (PgBouncer), where `LISTEN` does not hold.
    pub listen: bool,
    /// How long the wake-up listener waits before reconnecting after its connection was lost (default: 100 ms,
    /// doubled after each failure in a row, up to 30 s).
    pub listen_retry: Backoff,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            durability: Durability::default(),
            max_connections: 16,
            connect_timeout: Duration::from_secs(10),
            environment: None,
            listen: true,
            listen_retry: Backoff::default(),
        }
    }
}

/// The PostgreSQL transcript store: a pool of connections to one database, shared by cheap clones.
///
/// # Design
///
/// **Schema.** Every table is in the schema `headstart` (created on first connection; the role needs the `CREATE`
/// privilege on the database then). All SQL is in `sql.rs`; the ordered migrations are `sql::MIGRATIONS`, the
/// `headstart.schema_version` table records how many are applied, and processes connecting at once migrate under
/// an advisory lock, once. A database with a newer version is refused ([`StoreError::NewerSchema`]). Message
/// bodies are stored as `text` (their serde JSON), never `jsonb`, so they read back byte for byte; the database
/// must use the UTF8 encoding.
///
/// **Transactions.** Every write is one read-committed transaction that starts by locking the session's row
/// (`SELECT … FOR UPDATE`): the session's writes take turns, so `MAX(seq) + 1` is gapless, and the row shows
/// the session's owner and epoch, checked against the handle's lease ([`fenced`](Self::fenced)) before anything
/// is written. A claim that comes during the write skips the locked row; a write that comes after a claim waits
/// for it and sees the new epoch. Every read runs in one repeatable-read, read-only transaction: one snapshot.
///
/// **Durability.** Each new connection checks `synchronous_commit` and raises it to `on` when the server, the
/// database, the role or the URL set it lower (`off`, `local`, `remote_write`); `remote_apply` is kept. See
/// [`PgOptions::durability`] for `Normal`.
///
/// **Dropped connections.** A pooled connection the server dropped (it restarted, an administrator ended it) is
/// found out when its `BEGIN` fails; the operation then moves to another connection, since nothing was done yet.
/// A connection lost later, mid-transaction, fails the operation with [`StoreError::Unavailable`] (the
/// transaction did not commit, except when the connection broke during the `COMMIT` itself, which nobody can tell:
/// recovery settles it).
///
/// **Wake-ups.** Once a submit, a release or a finish committed, the same connection sends a notification on the
/// channel [`NOTIFY_CHANNEL`](crate::NOTIFY_CHANNEL) in a statement of its own: a listener never hears of a
/// session before it can read it. Not in the change's own transaction: PostgreSQL holds a database-wide lock from
/// a notifying transaction's commit until its WAL is flushed, so notifying writes would commit one flush at a time
/// (measured with 8 clients: from thousands of commits a second to about 400); a transaction that only notifies writes nothing
/// to flush. A notification lost between the two (the connection dropped, the process died) costs a poll interval:
/// notifications are hints. [`wake_ups`](headstart_store::SessionQueue::wake_ups) listens on a connection of its
/// own (outside the pool, named [`LISTENER_NAME`](crate::LISTENER_NAME) in `pg_stat_activity`), reconnecting after
/// [`PgOptions::listen_retry`]'s waits when it drops.
///
/// **Operations run to completion.** Each operation runs on its own tokio task, so dropping its future does not
/// abandon a transaction half-way: it commits or rolls back as a whole, like the SQLite store's writes.
///
/// **Errors.** PostgreSQL and pool errors are classified in one place (`errors.rs`): constraint violations are
/// [`StoreError::Conflict`], a dead or unreachable server, a dropped connection or no free connection in time
/// [`StoreError::Unavailable`], deadlocks and lock timeouts [`StoreError::Locked`], a full disk
/// [`StoreError::Full`]. The `tokio_postgres::Error` stays behind the store's error as its
/// [`source`](std::error::Error::source), its SQLSTATE as [`StoreError::sqlstate`]. Nothing from the server is
/// unwrapped; the URL's password never appears in an error.
///
/// **Connections.** TCP (with TLS by rustls unless `sslmode=disable`) or Unix sockets (never TLS, as libpq), from
/// a `postgresql://` URL (the scheme in any case) or a `key=value` string, with libpq's meanings: `sslmode`
/// `disable | prefer | require | verify-ca | verify-full` (default `prefer`: TLS whenever the server offers it),
/// `sslrootcert` (a PEM file, or `system`), `passfile`, and when the string has no password, `PGPASSWORD`, then
/// the password file (`PGPASSFILE`, else `~/.pgpass`; on Unix only when its mode is 0600). See `tls.rs` for what
/// each mode checks. Not supported: `sslmode=allow`, client certificates (`sslcert`, `sslkey`), channel binding
/// (SCRAM-SHA-256-PLUS), the other `PG*` variables, service files.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
    /// The lease every write of this handle is conditional on ([`PgStore::fenced`]); `None` for the store itself.
    fence: Option<Arc<Lease>>,
}

struct Inner {
    pool: Pool,
    /// The database, as errors name it: the connection string, [`redact`]ed.
    label: String,
    durability: Durability,
    /// Opened with [`PgStore::connect_read_only`]: writes are refused.
    read_only: bool,
    /// How to listen for wake-ups; `None` when [`PgOptions::listen`] is off or the store is read-only.
    listener: Option<Arc<Listener>>,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("database", &self.inner.label)
            .field("durability", &self.inner.durability)
            .field("read_only", &self.inner.read_only)
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}

/// Connection setup, run by the pool on every new connection: `synchronous_commit` at `on` or above, UTF8.
fn setup_connection() -> Hook {
    Hook::async_fn(|client, _| {
        Box::pin(async move {
            let row = client.query_one(sql::SETTINGS, &[]).await.map_err(HookError::Backend)?;
            let synchronous_commit: String = row.try_get(0).map_err(HookError::Backend)?;
            let encoding: String = row.try_get(1).map_err(HookError::Backend)?;
            if !encoding.eq_ignore_ascii_case("UTF8") {
                return Err(HookError::message(format!(
                    "the database's encoding is {encoding}: the store needs UTF8 (create the database with \
                     ENCODING 'UTF8')"
                )));
            }
            if matches!(synchronous_commit.as_str(), "off" | "local" | "remote_write") {
                client
                    .batch_execute(sql::SYNCHRONOUS_COMMIT_ON)
                    .await
                    .map_err(HookError::Backend)?;
            }
            Ok(())
        })
    })
}

impl PgStore {
    /// Connects to the database at `url` (a `postgresql://` URL or a `key=value` connection string), checks it
    /// (UTF8, reachable) and creates or upgrades the store's schema.
    ///
    /// Fails with [`StoreError::Unavailable`] when the server cannot be reached, [`StoreError::NewerSchema`]
    /// when a newer headstart wrote the schema, and [`StoreError::Open`] otherwise (a malformed URL, refused
    /// credentials, a missing database, a foreign `headstart` schema).
    pub async fn connect(url: &str, options: PgOptions) -> Result<Self, StoreError> {
        Self::open(url, options, false).await
    }

    /// Connects for reading only (inspection tools): never creates or upgrades the schema, which must be exactly
    /// the one this build reads, and every write fails with [`StoreError::ReadOnly`] before reaching the server.
    ///
    /// Fails as [`PgStore::connect`] does, and with [`StoreError::Open`] when the database holds no store yet or
    /// an older schema.
    pub async fn connect_read_only(url: &str, options: PgOptions) -> Result<Self, StoreError> {
        Self::open(url, options, true).await
    }

    /// [`PgStore::connect`] and [`PgStore::connect_read_only`].
    async fn open(url: &str, options: PgOptions, read_only: bool) -> Result<Self, StoreError> {
        let label = redact(url);
        let refused = |message: String| StoreError::Open {
            path: label.clone(),
            message: message.into(),
        };
        let environment = options.environment.unwrap_or_else(PgEnvironment::from_process);
        let target =
            conninfo::parse(url, &environment).map_err(|why| refused(format!("invalid connection string: {why}")))?;
        let mut config = target.config;
        // Why a password file was passed over, said when connecting fails (it may be why).
        let mut passfile_note = None;
        if let (None, Some(passfile)) = (config.get_password(), &target.passfile) {
            match pgpass::read(passfile, &target.pass_key) {
                Ok(Some(password)) => {
                    config.password(password);
                }
                Ok(None) => {}
                Err(note) => passfile_note = Some(note),
            }
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        let tls = tls::connector(&target.tls, environment.home.as_deref()).map_err(refused)?;
        let listener = (options.listen && !read_only)
            .then(|| Arc::new(Listener::new(config.clone(), tls.clone(), options.listen_retry)));
        let manager = Manager::from_connect(
            config,
            LibpqConnect(tls),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(options.connect_timeout))
            .post_create(setup_connection())
            .build()
            .map_err(|err| StoreError::Open {
                path: label.clone(),
                message: format!("cannot build the connection pool: {err}").into(),
            })?;
        let what = "connect";
        let mut client =
            pool.get().await.map_err(
                |err| match (pool_error(err, what, Stage::Opening(&label)), &passfile_note) {
                    (StoreError::Open { path, message }, Some(note)) => StoreError::Open {
                        path,
                        message: {
                            let noted = format!("{message} ({note})");
                            message.with_message(noted)
                        },
                    },
                    (err, _) => err,
                },
            )?;
        if read_only {
            schema::check(&**client, &label).await?;
        } else {
            schema::migrate(&mut client, &label).await?;
        }
        drop(client);
        Ok(PgStore {
            inner: Arc::new(Inner {
                pool,
                label,
                durability: options.durability,
                read_only,
                listener,
            }),
            fence: None,
        })
    }

    /// A handle on the same database whose every write is conditional on `lease` (see
    /// [`SessionQueue::fenced`](headstart_store::SessionQueue::fenced)).
    pub fn fenced(&self, lease: &Lease) -> PgStore {
        PgStore {
            inner: Arc::clone(&self.inner),
            fence: Some(Arc::new(lease.clone())),
        }
    }

    /// The lease this handle's writes are conditional on, if it is [`fenced`](Self::fenced).
    pub fn lease(&self) -> Option<&Lease> {
        self.fence.as_deref()
    }

    /// The database, as errors name it: the connection string, [`redact`]ed.
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// The pool of connections (a [`hold`](Self::hold_session) takes one out of it).
    pub(crate) fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    /// The durability of commits.
    pub fn durability(&self) -> Durability {
        self.inner.durability
    }

    /// The `synchronous_commit` level of the store's connections, as the server reports it (`on`, or
    /// `remote_apply` when configured so): the level every commit that admits calls runs at.
    pub async fn synchronous_commit(&self) -> Result<String, StoreError> {
        self.run("read synchronous_commit".to_owned(), Access::Read, |tx, what| {
            Box::pin(async move {
                let row = tx
                    .query_one(sql::SETTINGS, &[])
                    .await
                    .map_err(|err| pg_error(err, what, Stage::Running))?;
                row.try_get(0).map_err(|err| errors::decode_error(err, what))
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_malformed_url_is_an_open_error_that_does_not_echo_it() {
        let err = PgStore::connect("postgresql://agent:s3cret@host:notaport/db", PgOptions::default())
            .await
            .expect_err("a malformed URL");
        assert!(matches!(&err, StoreError::Open { .. }), "{err:?}");
        assert!(!err.to_string().contains("s3cret"), "{err}");
        assert!(
            err.to_string().contains("postgresql://agent:***@host:notaport/db"),
            "{err}"
        );
    }

    #[test]
    fn options_never_show_the_password() {
        let options = PgOptions {
            environment: Some(PgEnvironment {
                password: Some("s3cret".to_owned()),
                ..PgEnvironment::default()
            }),
            ..PgOptions::default()
        };
        assert!(!format!("{options:?}").contains("s3cret"));
    }
}
