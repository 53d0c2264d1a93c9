//! # headstart-postgres
//!
//! The transcript store on PostgreSQL ([`PgStore`]): the [`TranscriptStore`] of contract §7 and the [`SessionQueue`]
//! of §7.5, for fleets of worker processes on several machines sharing one database. It gives every guarantee of
//! the SQLite store (it passes the same conformance suite, `headstart_store::conformance`), plus leases and
//! fencing across machines.
//!
//! ```no_run
//! # async fn demo() -> Result<(), headstart_store::StoreError> {
//! use std::time::Duration;
//! use headstart_postgres::{PgOptions, PgStore};
//! use headstart_core::model::UserMessage;
//! use headstart_store::{SessionQueue, TranscriptStore};
//!
//! let store = PgStore::connect("postgresql://agent@db.internal/agents", PgOptions::default()).await?;
//! store.submit(&UserMessage::new("summarise the incident"), 0).await?;
//! for claim in store.claim("worker-1", Duration::from_secs(30), 4).await? {
//!     let session = store.fenced(&claim.lease); // every write checks the lease in its own transaction
//!     let _context = session.model_context(&claim.lease.session).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! The `testing` feature adds the module `testing`: a throwaway PostgreSQL cluster for tests (enable it in
//! dev-dependencies only).
#![warn(missing_docs)]

mod conninfo;
mod errors;
mod ops;
mod pgpass;
mod schema;
mod sql;
#[cfg(all(unix, feature = "testing"))]
pub mod testing;
mod tls;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime, Transaction};
use headstart_core::model::{AssistantMessage, ToolResultMessage, UserMessage};
use headstart_store::backend::{self, EncodedMessage, Op};
use headstart_store::{
    AdmittedCall, CallKey, Claim, Durability, Lease, RunEnd, SessionEnd, SessionId, SessionInfo, SessionQueue,
    StoreError, StoredMessage, ToolRun, TranscriptStore, UnfinishedCall, Write,
};
use tokio_postgres::IsolationLevel;

use crate::errors::{connection_lost, pg_error, pool_error, Stage};

pub use conninfo::{is_connection_string, redact, PgEnvironment};
pub use schema::LATEST_VERSION as SCHEMA_VERSION;

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
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            durability: Durability::default(),
            max_connections: 16,
            connect_timeout: Duration::from_secs(10),
            environment: None,
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

/// A boxed operation future borrowing its transaction.
type OpFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// What kind of transaction an operation runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Repeatable read, read only.
    Read,
    /// Read committed, committed at `synchronous_commit` on or above.
    Write,
    /// A transcript write that admits no call: relaxed to `synchronous_commit = off` under
    /// [`Durability::Normal`].
    WriteRelaxable,
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
        let manager = Manager::from_config(
            config,
            tls,
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
            }),
            fence: None,
        })
    }

    /// A handle on the same database whose every write is conditional on `lease` (see [`SessionQueue::fenced`]).
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

    /// Runs `op` in a transaction of kind `access` on a pooled connection, on its own task (see the design notes:
    /// a dropped future never abandons a transaction half-way), and commits it. `what` names the operation in
    /// errors.
    async fn run<T, F>(&self, what: String, access: Access, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a Transaction<'a>, &'a str) -> OpFuture<'a, T> + Send + 'static,
    {
        if self.inner.read_only && access != Access::Read {
            return Err(backend::read_only(&self.inner.label, &what));
        }
        let inner = Arc::clone(&self.inner);
        let task = tokio::spawn(async move {
            let what = what.as_str();
            let fail = |err: tokio_postgres::Error| pg_error(err, what, Stage::Running);
            let mut op = Some(op);
            // A pooled connection the server has dropped since (a restart, an administrator) is found out only
            // when used: its BEGIN fails. Nothing was done then, so the next connection is tried; each failure
            // removes a dead connection from the pool, so this ends.
            let mut lost = 0;
            loop {
                let mut client = inner
                    .pool
                    .get()
                    .await
                    .map_err(|err| pool_error(err, what, Stage::Running))?;
                let builder = client.build_transaction();
                let begun = match access {
                    Access::Read => builder.isolation_level(IsolationLevel::RepeatableRead).read_only(true),
                    Access::Write | Access::WriteRelaxable => builder.isolation_level(IsolationLevel::ReadCommitted),
                }
                .start()
                .await;
                let tx = match begun {
                    Ok(tx) => tx,
                    Err(err) if connection_lost(&err) && lost < inner.pool.status().max_size => {
                        lost += 1;
                        continue;
                    }
                    Err(err) => return Err(fail(err)),
                };
                if access == Access::WriteRelaxable && inner.durability == Durability::Normal {
                    tx.batch_execute(sql::RELAX_COMMIT).await.map_err(fail)?;
                }
                let Some(op) = op.take() else {
                    return Err(StoreError::Backend(
                        format!("{what}: internal error: the operation ran twice").into(),
                    ));
                };
                // On error, dropping the transaction rolls it back before the connection is reused.
                let value = op(&tx, what).await?;
                tx.commit().await.map_err(fail)?;
                return Ok(value);
            }
        });
        match task.await {
            Ok(outcome) => outcome,
            Err(err) if err.is_panic() => Err(StoreError::Backend("a store operation panicked".into())),
            Err(err) => Err(StoreError::Backend(
                format!("a store operation did not run: {err}").into(),
            )),
        }
    }

    /// Refuses to create sessions through a fenced handle (it writes only its leased session).
    fn unfenced(&self, what: &str) -> Result<(), StoreError> {
        match self.lease() {
            Some(lease) => Err(StoreError::Conflict(
                format!(
                    "{what}: this handle holds the lease on session {} and writes nothing else",
                    lease.session
                )
                .into(),
            )),
            None => Ok(()),
        }
    }

    /// Creates a session: `unqueued`, or `pending` with `prompt` as its first message (`SessionQueue::submit`).
    async fn insert_session(&self, prompt: Option<&UserMessage>, at_us: i64) -> Result<SessionId, StoreError> {
        let (what, access) = match prompt {
            Some(_) => (Op::Submit.to_string(), Access::Write),
            None => (Op::Write(Write::CreateSession).to_string(), Access::WriteRelaxable),
        };
        self.unfenced(&what)?;
        let id = uuid::Uuid::now_v7().to_string();
        let session = id.clone();
        let prompt = prompt.map(|prompt| EncodedMessage::user(prompt, &what)).transpose()?;
        self.run(what, access, move |tx, what| {
            Box::pin(async move { ops::create_session(tx, what, &session, prompt.as_ref(), at_us).await })
        })
        .await?;
        Ok(SessionId(id))
    }
}

#[async_trait]
impl TranscriptStore for PgStore {
    async fn create_session(&self, at_us: i64) -> Result<SessionId, StoreError> {
        self.insert_session(None, at_us).await
    }

    async fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        self.run(Op::Sessions.to_string(), Access::Read, |tx, what| {
            Box::pin(ops::sessions(tx, what))
        })
        .await
    }

    async fn append_user(&self, session: &SessionId, message: &UserMessage, at_us: i64) -> Result<u64, StoreError> {
        let what = Op::Write(Write::AppendUser { session }).to_string();
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let message = EncodedMessage::user(message, &what)?;
        self.run(what, Access::WriteRelaxable, move |tx, what| {
            Box::pin(async move { ops::append_user(tx, what, fence.as_deref(), &session, &message, at_us).await })
        })
        .await
    }

    async fn commit_fragment(
        &self,
        session: &SessionId,
        request: u32,
        fragment: &AssistantMessage,
        admitted: &[AdmittedCall],
        at_us: i64,
    ) -> Result<u64, StoreError> {
        let what = Op::Write(Write::CommitFragment {
            session,
            request,
            fragment,
            admitted,
        })
        .to_string();
        // contract §7.5: a commit that admits calls is never relaxed below `synchronous_commit = on`.
        let access = if admitted.is_empty() {
            Access::WriteRelaxable
        } else {
            Access::Write
        };
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let invalid = backend::check_admissions(&what, fragment, admitted).err();
        let fragment = EncodedMessage::assistant(fragment, &what)?;
        let admitted = admitted.to_vec();
        self.run(what, access, move |tx, what| {
            Box::pin(async move {
                ops::commit_fragment(
                    tx,
                    what,
                    fence.as_deref(),
                    &session,
                    request,
                    &fragment,
                    &admitted,
                    invalid,
                    at_us,
                )
                .await
            })
        })
        .await
    }

    async fn mark_started(&self, session: &SessionId, call: &CallKey, at_us: i64) -> Result<(), StoreError> {
        let what = Op::Write(Write::MarkStarted { session, call }).to_string();
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let call = call.clone();
        self.run(what, Access::WriteRelaxable, move |tx, what| {
            Box::pin(async move { ops::mark_started(tx, what, fence.as_deref(), &session, &call, at_us).await })
        })
        .await
    }

    async fn append_tool_result(
        &self,
        session: &SessionId,
        request: u32,
        result: &ToolResultMessage,
        run: Option<RunEnd>,
        at_us: i64,
    ) -> Result<u64, StoreError> {
        let what = Op::Write(Write::AppendToolResult {
            session,
            request,
            result,
        })
        .to_string();
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let call = CallKey::new(request, &*result.tool_call_id);
        let result = EncodedMessage::tool_result(result, &what)?;
        self.run(what, Access::WriteRelaxable, move |tx, what| {
            Box::pin(async move {
                ops::append_tool_result(tx, what, fence.as_deref(), &session, &call, &result, run, at_us).await
            })
        })
        .await
    }

    async fn load_log(&self, session: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        let what = Op::LoadLog(session).to_string();
        let session = session.0.clone();
        self.run(what, Access::Read, move |tx, what| {
            Box::pin(async move { ops::load_log(tx, what, &session).await })
        })
        .await
    }

    async fn tool_runs(&self, session: &SessionId) -> Result<Vec<ToolRun>, StoreError> {
        let what = Op::ToolRuns(session).to_string();
        let session = session.0.clone();
        self.run(what, Access::Read, move |tx, what| {
            Box::pin(async move { ops::tool_runs(tx, what, &session).await })
        })
        .await
    }

    async fn unfinished_calls(&self, session: &SessionId) -> Result<Vec<UnfinishedCall>, StoreError> {
        let what = Op::UnfinishedCalls(session).to_string();
        let session = session.0.clone();
        self.run(what, Access::Read, move |tx, what| {
            Box::pin(async move { ops::unfinished_calls(tx, what, &session).await })
        })
        .await
    }
}

#[async_trait]
impl SessionQueue for PgStore {
    async fn submit(&self, prompt: &UserMessage, at_us: i64) -> Result<SessionId, StoreError> {
        self.insert_session(Some(prompt), at_us).await
    }

    async fn claim(&self, owner: &str, lease: Duration, limit: usize) -> Result<Vec<Claim>, StoreError> {
        backend::check_owner(owner)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let what = Op::Claim(owner).to_string();
        let owner = owner.to_owned();
        let sent = Instant::now();
        self.run(what, Access::Write, move |tx, what| {
            Box::pin(async move { ops::claim(tx, what, &owner, lease, limit, sent).await })
        })
        .await
    }

    async fn renew(&self, leases: &[Lease], lease: Duration) -> Result<Vec<Lease>, StoreError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let what = Op::Renew(leases).to_string();
        let leases = leases.to_vec();
        let sent = Instant::now();
        self.run(what, Access::Write, move |tx, what| {
            Box::pin(async move { ops::renew(tx, what, &leases, lease, sent).await })
        })
        .await
    }

    async fn finish(&self, lease: &Lease, end: SessionEnd) -> Result<(), StoreError> {
        let what = Op::Finish(lease, &end).to_string();
        let lease = lease.clone();
        self.run(what, Access::Write, move |tx, what| {
            Box::pin(async move { ops::finish(tx, what, &lease, &end).await })
        })
        .await
    }

    fn fenced(&self, lease: &Lease) -> Arc<dyn TranscriptStore> {
        Arc::new(PgStore::fenced(self, lease))
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
