//! The embedded default store: one SQLite file in WAL mode (contract §7.1).
//!
//! The design (one connection, `spawn_blocking`, transactions, durability, schema, errors) is documented on
//! [`SqliteStore`], where rustdoc shows it (this module is private). In short: every operation runs on
//! `tokio::task::spawn_blocking` with the connection behind a `std::sync::Mutex`, never on a dedicated database
//! thread, because tokio's paused clock does not auto-advance while a `spawn_blocking` task runs: a commit then
//! takes zero virtual time and virtual-time replays stay deterministic.
//!
//! Layout: `sql` holds every SQL statement and the migrations, `schema` applies them, `ops` implements the
//! operations synchronously on a connection, `errors` classifies SQLite errors, `checkpoint` checkpoints the WAL off
//! the commit path, `read_only` opens a file without writing to it or beside it.

#[cfg(test)]
mod call_key_migration;
mod checkpoint;
#[cfg(test)]
mod conformance;
mod errors;
mod group;
mod ops;
mod read_only;
mod schema;
mod sql;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use headstart_core::model::{AssistantMessage, ToolResultMessage, UserMessage};
use rusqlite::{Connection, OpenFlags};

use self::errors::sqlite_error;
use self::group::{WriteJob, WriteQueue};
use crate::backend::{self, EncodedMessage, Op};
use crate::layer::Write;
use crate::lease::{Claim, Lease, SessionEnd, SessionQueue};
use crate::types::{
    AdmittedCall, CallKey, Durability, RunEnd, SessionId, SessionInfo, StoredMessage, ToolRun, UnfinishedCall,
};
use crate::{Detail, StoreError, TranscriptStore};

/// The label of an in-memory database in error messages.
const MEMORY_LABEL: &str = ":memory:";

/// Options for opening a [`SqliteStore`] with [`SqliteStore::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    /// Durability of each commit (default [`Durability::Full`]).
    pub durability: Durability,
    /// How long an operation waits for another connection's lock before failing with [`StoreError::Locked`]
    /// (default 5 s).
    pub busy_timeout: Duration,
    /// Caps the database at this many pages (never below its current size), so writes beyond it fail with
    /// [`StoreError::Full`]. A test hook that simulates a full disk; `None` (the default) means no cap.
    pub max_page_count: Option<u64>,
    /// Group commit (default on): writes that arrive while a commit is in progress are committed together in the
    /// next transaction, each in its own savepoint and each still durable before it returns, sharing one sync.
    /// Off, every write is its own transaction. See [`SqliteStore`]'s design notes.
    pub group_commit: bool,
    /// Run every operation on the calling task's thread instead of tokio's blocking pool (default off). For
    /// single-threaded simulations only (`headstart replay` on the virtual clock): an operation then completes
    /// within the poll that starts it, so the order in which the engine observes its writes completing does not
    /// depend on thread timing. It blocks the runtime for the length of each operation; group commit is off.
    pub inline: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            durability: Durability::default(),
            busy_timeout: Duration::from_secs(5),
            max_page_count: None,
            group_commit: true,
            inline: false,
        }
    }
}

/// The SQLite transcript store (contract §7): one database file in WAL mode, shared by cheap clones.
///
/// `SqliteStore` is `Clone + Send + Sync`; clones share one connection.
///
/// # Design
///
/// **One connection behind a mutex, operations on `spawn_blocking`.** A [`SqliteStore`] owns one
/// [`rusqlite::Connection`] behind a `std::sync::Mutex`, shared by clones through an `Arc`; every trait method
/// moves its (owned) arguments into a closure that runs on [`tokio::task::spawn_blocking`], locks the connection
/// and performs the whole operation, so SQLite's blocking I/O and fsyncs never stall the async runtime.
/// Operations are serialized by the mutex (SQLite serializes writers anyway).
///
/// A dedicated database thread fed by a channel would work too, but it is deliberately *not* used: tokio's paused
/// test clock (the virtual clock of `headstart replay`) does not auto-advance while a `spawn_blocking` task is
/// running on a current-thread runtime, whereas work on a thread tokio does not know about looks like idleness,
/// and virtual time would jump ahead while a commit is in flight. With `spawn_blocking`, a commit takes zero
/// virtual time and replays stay deterministic (a tested property).
///
/// Dropping an operation's future does not cancel it: the blocking closure still runs to completion, and its
/// transaction commits or rolls back as a whole.
///
/// **Transactions.** Every write method runs inside a `BEGIN IMMEDIATE` transaction (so it takes the write lock
/// before reading what it validates, and cannot fail half-way with `SQLITE_BUSY` on lock upgrade); every read runs
/// in one deferred transaction and sees one snapshot. The sequence number is `MAX(seq) + 1` inside the write
/// transaction, which makes it gapless.
///
/// **Group commit** ([`SqliteOptions::group_commit`], on by default). Writes are queued; the first write that finds
/// no commit in progress starts a leader on the blocking pool, which commits whatever is queued as one transaction
/// (each write in its own savepoint), then the writes that queued up meanwhile, until the queue is empty. A lone
/// write is committed at once, alone; under load, many sessions' writes share one `COMMIT` (and, with
/// [`Durability::Full`], one sync) instead of queueing one by one for the connection. Each write keeps the
/// guarantees of having its own transaction: it is all or nothing (a failing write is rolled back to its savepoint
/// and the others go on), and it returns only after the transaction holding it is durable (if that `COMMIT` fails,
/// every write in it gets the error and none was stored). Writes are applied in the order they were made.
///
/// **Durability.** `synchronous = FULL` ([`Durability::Full`]) syncs the WAL on each commit; `NORMAL`
/// ([`Durability::Normal`]) leaves syncing to checkpoints, so a commit survives a crash of the process but not
/// necessarily a power loss.
///
/// **Checkpoints.** SQLite's automatic checkpoint runs inside the commit that grows the WAL past 1,000 pages, and
/// that commit's caller waits for it (10 ms and more for 4 MB). The store checkpoints instead (`PASSIVE`, at the
/// same threshold) after the commit, once its writers have their replies: between groups, in the group-commit
/// leader.
///
/// **Schema.** All SQL is in `sql.rs`; the ordered migrations are `sql::MIGRATIONS` and the `schema_version` table
/// records how many are applied. A database with a newer version is refused ([`StoreError::NewerSchema`]).
///
/// **Errors.** SQLite failures are classified in one function (`errors::sqlite_error`), which keeps the
/// `rusqlite::Error` as the error's [`source`](std::error::Error::source) and its extended result code as
/// [`StoreError::code`]; nothing from the database or the file system is unwrapped, and a poisoned mutex or a
/// panicked operation becomes [`StoreError::Backend`].
///
/// **Fleets.** The store implements [`SessionQueue`] too (contract §7.5), for a fleet of worker processes on one
/// machine sharing one file: a claim is a write transaction, which SQLite serializes with every other writer of the
/// file, so no two claimers ever get the same session, and a fenced write checks its lease in its own write
/// transaction. Lease times use the machine's clock (SQLite's `unixepoch`). For workers on several machines, use
/// the PostgreSQL store.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
    /// The lease every write of this handle is conditional on ([`SqliteStore::fenced`]); `None` for the store
    /// itself.
    fence: Option<Arc<Lease>>,
}

struct Inner {
    conn: Mutex<Connection>,
    /// Writes waiting for the group-commit leader.
    writes: WriteQueue,
    group_commit: bool,
    /// Operations run on the calling thread ([`SqliteOptions::inline`]).
    inline: bool,
    path: Option<PathBuf>,
    durability: Durability,
    read_only: bool,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .field("durability", &self.inner.durability)
            .field("read_only", &self.inner.read_only)
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens the store at `path` for reading and writing, creating the file (owner-only permissions on unix) and
    /// the schema if they do not exist, and upgrading an older schema.
    ///
    /// Another application's database (objects but no headstart schema, or another application's id or user
    /// version in its header) is refused with [`StoreError::Open`] before anything is written to it: it is looked
    /// at through a read-only connection first.
    ///
    /// Fails with [`StoreError::Corrupt`] when the file is not a database, [`StoreError::NewerSchema`] when a newer
    /// headstart wrote it, [`StoreError::ReadOnly`] when it cannot be written (use
    /// [`open_read_only`](Self::open_read_only) to inspect it), [`StoreError::Locked`] when another connection
    /// holds its lock past the busy timeout, and [`StoreError::Open`] otherwise.
    pub fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, StoreError> {
        let path = path.as_ref();
        let label = path.display().to_string();
        let fail = |what: &'static str| {
            let label = label.as_str();
            move |err| sqlite_error(err, what, Some(label))
        };
        create_owner_only(path, &label)?;
        // Another application's database is refused before anything is written to it (the WAL switch below
        // rewrites the file's header): it is looked at through a read-only connection first.
        if std::fs::metadata(path).is_ok_and(|meta| meta.len() > 0) {
            let look = read_only::open(path, &label, options.busy_timeout)?;
            schema::refuse_foreign(&look, &label)?;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(path, flags).map_err(fail("open the database"))?;
        conn.busy_timeout(options.busy_timeout)
            .map_err(fail("set the busy timeout"))?;
        conn.query_row(sql::PROBE, [], |_| Ok(()))
            .map_err(fail("read the database"))?;
        if conn
            .is_readonly(rusqlite::MAIN_DB)
            .map_err(fail("check whether the database is writable"))?
        {
            return Err(StoreError::ReadOnly(
                format!("{label}: the file cannot be written (open it with SqliteStore::open_read_only to inspect it)")
                    .into(),
            ));
        }
        let mode: String = conn
            .query_row(sql::SET_JOURNAL_MODE_WAL, [], |row| row.get(0))
            .map_err(fail("switch to WAL journal mode"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Open {
                path: label,
                message: format!("cannot switch to WAL journal mode (the journal mode stays {mode:?})").into(),
            });
        }
        let synchronous = match options.durability {
            Durability::Full => sql::SET_SYNCHRONOUS_FULL,
            Durability::Normal => sql::SET_SYNCHRONOUS_NORMAL,
        };
        conn.execute_batch(synchronous).map_err(fail("set the durability"))?;
        conn.execute_batch(sql::ENABLE_FOREIGN_KEYS)
            .map_err(fail("enable foreign keys"))?;
        schema::migrate(&mut conn, &label)?;
        prepare_hot_path(&conn, &label)?;
        checkpoint::take_over(&conn);
        if let Some(pages) = options.max_page_count {
            conn.query_row(&sql::set_max_page_count(pages), [], |_| Ok(()))
                .map_err(fail("set the maximum page count"))?;
        }
        let store = Self::from_connection(conn, Some(path.to_path_buf()), options.durability, false);
        Ok(store
            .with_group_commit(options.group_commit && !options.inline)
            .with_inline(options.inline))
    }

    /// Opens an existing store for reading only (for inspection tools): never creates the file, never migrates,
    /// never writes the file (a `mode=ro` connection), and every write fails with [`StoreError::ReadOnly`]. The
    /// schema must be exactly the one this build reads.
    ///
    /// In a directory the process cannot write, where SQLite cannot create the WAL's index (`-shm`), the file is
    /// read `immutable=1` (no locks, no index) when no WAL beside it holds commits the file lacks, as after a clean
    /// close; with such a WAL it fails with [`StoreError::ReadOnly`] rather than miss them.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref();
        let label = path.display().to_string();
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => {}
            Ok(_) => {
                return Err(StoreError::Open {
                    path: label,
                    message: "not a regular file".into(),
                })
            }
            Err(err) => {
                return Err(StoreError::Open {
                    path: label,
                    message: Detail::caused_by(err.to_string(), None, Arc::new(err)),
                })
            }
        }
        let conn = read_only::open(path, &label, SqliteOptions::default().busy_timeout)?;
        schema::check_read_only(&conn, &label)?;
        Ok(Self::from_connection(
            conn,
            Some(path.to_path_buf()),
            Durability::default(),
            true,
        ))
    }

    /// Opens a private, empty in-memory store (tests, one-off replays). Clones share it; it is gone when the last
    /// clone is dropped.
    pub fn open_in_memory() -> Result<Self, StoreError> {
        let fail = |what: &'static str| move |err| sqlite_error(err, what, Some(MEMORY_LABEL));
        let mut conn = Connection::open_in_memory().map_err(fail("open the database"))?;
        conn.execute_batch(sql::ENABLE_FOREIGN_KEYS)
            .map_err(fail("enable foreign keys"))?;
        schema::migrate(&mut conn, MEMORY_LABEL)?;
        prepare_hot_path(&conn, MEMORY_LABEL)?;
        Ok(Self::from_connection(conn, None, Durability::default(), false))
    }

    fn from_connection(conn: Connection, path: Option<PathBuf>, durability: Durability, read_only: bool) -> Self {
        SqliteStore {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                writes: WriteQueue::default(),
                group_commit: true,
                inline: false,
                path,
                durability,
                read_only,
            }),
            fence: None,
        }
    }

    /// A handle on the same database whose every write is conditional on `lease` (see [`SessionQueue::fenced`]).
    pub fn fenced(&self, lease: &Lease) -> SqliteStore {
        SqliteStore {
            inner: Arc::clone(&self.inner),
            fence: Some(Arc::new(lease.clone())),
        }
    }

    /// The lease this handle's writes are conditional on, if it is [`fenced`](Self::fenced).
    pub fn lease(&self) -> Option<&Lease> {
        self.fence.as_deref()
    }

    /// Turns inline operations on or off (only before the store is shared: it is freshly opened).
    fn with_inline(mut self, on: bool) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.inline = on;
        }
        self
    }

    /// Turns group commit on or off (only before the store is shared: it is freshly opened).
    fn with_group_commit(mut self, on: bool) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.group_commit = on;
        }
        self
    }

    /// The database file, or `None` for an in-memory store.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// The durability of commits (for in-memory and read-only stores, which never sync, the default).
    pub fn durability(&self) -> Durability {
        self.inner.durability
    }

    /// Test hook (not part of the API): turns `PRAGMA query_only` on or off for this store's connection, so that
    /// SQLite itself refuses every write with `SQLITE_READONLY`, as when a database becomes read-only while open.
    /// Fault tests use it to make a commit fail mid-run.
    #[doc(hidden)]
    pub fn set_query_only(&self, on: bool) -> Result<(), StoreError> {
        let statement = if on {
            sql::ENABLE_QUERY_ONLY
        } else {
            sql::DISABLE_QUERY_ONLY
        };
        let conn = self
            .inner
            .conn
            .lock()
            .map_err(|_| StoreError::Backend("the database connection is unusable".into()))?;
        conn.execute_batch(statement)
            .map_err(|err| sqlite_error(err, "set query_only", None))
    }

    /// Refuses writes on a store opened with [`open_read_only`](Self::open_read_only), before touching SQLite.
    fn writable(&self, what: &str) -> Result<(), StoreError> {
        if self.inner.read_only {
            let label = self
                .inner
                .path
                .as_deref()
                .map_or_else(|| MEMORY_LABEL.to_owned(), |path| path.display().to_string());
            return Err(backend::read_only(&label, what));
        }
        Ok(())
    }

    /// Runs `op` on the connection on tokio's blocking pool (see the module documentation for why).
    async fn run<T, F>(&self, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let locked = move || {
            let mut guard = inner.conn.lock().map_err(|_| {
                StoreError::Backend(
                    "the database connection is unusable: an earlier store operation panicked while holding it"
                        .to_owned()
                        .into(),
                )
            })?;
            let result = op(&mut guard);
            // A write made alone (group commit off) may have grown the WAL past the checkpoint threshold.
            checkpoint::if_due(&guard);
            result
        };
        if self.inner.inline {
            return locked();
        }
        let task = tokio::task::spawn_blocking(locked);
        match task.await {
            Ok(result) => result,
            Err(err) if err.is_panic() => Err(StoreError::Backend("a store operation panicked".into())),
            Err(err) => Err(StoreError::Backend(
                format!("a store operation did not run: {err}").into(),
            )),
        }
    }
}

impl SqliteStore {
    /// Performs a write: `op` runs inside an `IMMEDIATE` transaction and names itself in errors with `what`; the
    /// result comes back once the transaction is durable. With group commit on, the write joins the queue of the
    /// group-commit leader (starting one on the blocking pool if none runs, see `group.rs`); off, it runs alone
    /// through [`SqliteStore::run`].
    async fn write<T, F>(&self, what: String, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Fn(&Connection, &str) -> Result<T, StoreError> + Send + 'static,
    {
        let (job, outcome) = WriteJob::queued(what, op);
        if self.inner.group_commit {
            match self.inner.writes.push(job) {
                Ok(false) => {}
                Ok(true) => {
                    let ticket = LeaderTicket(Some(Arc::clone(&self.inner)));
                    // Detached: the leader hands every outcome back through the jobs' channels.
                    drop(tokio::task::spawn_blocking(move || ticket.lead()));
                }
                Err(_) => return Err(StoreError::Backend("the write queue is unusable".into())),
            }
        } else {
            self.run(move |conn| {
                group::commit_alone(conn, job);
                Ok(())
            })
            .await?;
        }
        match outcome.await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Backend("a store operation panicked".into())),
        }
    }
}

/// The right to lead the write queue, handed to a blocking task. If the task never runs (its runtime is shutting
/// down), dropping the ticket gives the role back, so that a later write starts a new leader.
struct LeaderTicket(Option<Arc<Inner>>);

impl LeaderTicket {
    fn lead(mut self) {
        if let Some(inner) = self.0.take() {
            inner.writes.lead(&inner.conn);
        }
    }
}

impl Drop for LeaderTicket {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take() {
            inner.writes.resign();
        }
    }
}

/// Creates `path` with mode 0600 if it does not exist, so SQLite never creates it with the default (umask) mode.
#[cfg(unix)]
fn create_owner_only(path: &Path, label: &str) -> Result<(), StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(StoreError::Open {
            path: label.to_owned(),
            message: Detail::caused_by(format!("cannot create the file: {err}"), None, Arc::new(err)),
        }),
    }
}

/// On other platforms SQLite creates the file with the platform's default permissions.
#[cfg(not(unix))]
fn create_owner_only(_path: &Path, _label: &str) -> Result<(), StoreError> {
    Ok(())
}

impl SqliteStore {
    /// Creates a session: `unqueued`, or `pending` with `prompt` as its first message (`SessionQueue::submit`).
    async fn insert_session(&self, prompt: Option<&UserMessage>, at_us: i64) -> Result<SessionId, StoreError> {
        let what = match prompt {
            Some(_) => Op::Submit.to_string(),
            None => Op::Write(Write::CreateSession).to_string(),
        };
        self.writable(&what)?;
        if let Some(lease) = self.lease() {
            return Err(StoreError::Conflict(
                format!(
                    "{what}: this handle holds the lease on session {} and writes nothing else",
                    lease.session
                )
                .into(),
            ));
        }
        let id = uuid::Uuid::now_v7().to_string();
        let session = id.clone();
        let prompt = prompt.map(|prompt| EncodedMessage::user(prompt, &what)).transpose()?;
        self.write(what, move |conn, what| {
            ops::create_session(conn, what, &session, prompt.as_ref(), at_us)
        })
        .await?;
        Ok(SessionId(id))
    }
}

#[async_trait]
impl TranscriptStore for SqliteStore {
    async fn create_session(&self, at_us: i64) -> Result<SessionId, StoreError> {
        self.insert_session(None, at_us).await
    }

    async fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        self.run(ops::sessions).await
    }

    async fn append_user(&self, session: &SessionId, message: &UserMessage, at_us: i64) -> Result<u64, StoreError> {
        let what = Op::Write(Write::AppendUser { session }).to_string();
        self.writable(&what)?;
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let message = EncodedMessage::user(message, &what)?;
        self.write(what, move |conn, what| {
            ops::append_user(conn, what, fence.as_deref(), &session, &message, at_us)
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
        self.writable(&what)?;
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let invalid = backend::check_admissions(&what, fragment, admitted).err();
        let fragment = EncodedMessage::assistant(fragment, &what)?;
        let admitted = admitted.to_vec();
        self.write(what, move |conn, what| {
            ops::commit_fragment(
                conn,
                what,
                fence.as_deref(),
                &session,
                request,
                &fragment,
                &admitted,
                invalid.as_ref(),
                at_us,
            )
        })
        .await
    }

    async fn mark_started(&self, session: &SessionId, call: &CallKey, at_us: i64) -> Result<(), StoreError> {
        let what = Op::Write(Write::MarkStarted { session, call }).to_string();
        self.writable(&what)?;
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let call = call.clone();
        self.write(what, move |conn, what| {
            ops::mark_started(conn, what, fence.as_deref(), &session, &call, at_us)
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
        self.writable(&what)?;
        let (fence, session) = (self.fence.clone(), session.0.clone());
        let call = CallKey::new(request, &*result.tool_call_id);
        let result = EncodedMessage::tool_result(result, &what)?;
        self.write(what, move |conn, what| {
            ops::append_tool_result(conn, what, fence.as_deref(), &session, &call, &result, run, at_us)
        })
        .await
    }

    async fn load_log(&self, session: &SessionId) -> Result<Vec<StoredMessage>, StoreError> {
        let session = session.clone();
        self.run(move |conn| ops::load_log(conn, &session)).await
    }

    async fn tool_runs(&self, session: &SessionId) -> Result<Vec<ToolRun>, StoreError> {
        let session = session.clone();
        self.run(move |conn| ops::tool_runs(conn, &session)).await
    }

    async fn unfinished_calls(&self, session: &SessionId) -> Result<Vec<UnfinishedCall>, StoreError> {
        let session = session.clone();
        self.run(move |conn| ops::unfinished_calls(conn, &session)).await
    }
}

#[async_trait]
impl SessionQueue for SqliteStore {
    async fn submit(&self, prompt: &UserMessage, at_us: i64) -> Result<SessionId, StoreError> {
        self.insert_session(Some(prompt), at_us).await
    }

    async fn claim(&self, owner: &str, lease: Duration, limit: usize) -> Result<Vec<Claim>, StoreError> {
        crate::backend::check_owner(owner)?;
        let what = Op::Claim(owner).to_string();
        self.writable(&what)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let sent = Instant::now();
        let owner = owner.to_owned();
        self.write(what, move |conn, what| {
            ops::claim(conn, what, &owner, lease, limit, sent)
        })
        .await
    }

    async fn renew(&self, leases: &[Lease], lease: Duration) -> Result<Vec<Lease>, StoreError> {
        let what = Op::Renew(leases).to_string();
        self.writable(&what)?;
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let sent = Instant::now();
        let leases = leases.to_vec();
        self.write(what, move |conn, what| ops::renew(conn, what, &leases, lease, sent))
            .await
    }

    async fn finish(&self, lease: &Lease, end: SessionEnd) -> Result<(), StoreError> {
        let what = Op::Finish(lease, &end).to_string();
        self.writable(&what)?;
        let lease = lease.clone();
        self.write(what, move |conn, what| ops::finish(conn, what, &lease, &end))
            .await
    }

    fn fenced(&self, lease: &Lease) -> Arc<dyn TranscriptStore> {
        Arc::new(SqliteStore::fenced(self, lease))
    }
}

/// Sizes the statement cache and fills it with the write path's statements ([`sql::HOT_PATH`]).
fn prepare_hot_path(conn: &Connection, label: &str) -> Result<(), StoreError> {
    conn.set_prepared_statement_cache_capacity(sql::STATEMENT_CACHE_CAPACITY);
    for statement in sql::HOT_PATH {
        conn.prepare_cached(statement)
            .map_err(|err| sqlite_error(err, "prepare the write path's statements", Some(label)))?;
    }
    Ok(())
}
