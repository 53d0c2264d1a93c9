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

mod blocking;
#[cfg(test)]
mod call_key_migration;
mod checkpoint;
mod claims;
#[cfg(test)]
mod conformance;
mod errors;
mod group;
mod listing;
mod ops;
mod read_only;
mod schema;
#[cfg(test)]
mod settings_migration;
mod sql;
#[cfg(test)]
mod tests;
mod traits;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use self::errors::sqlite_error;
use self::group::WriteQueue;
use crate::lease::Lease;
use crate::types::Durability;
use crate::wake::Subscribers;
use crate::{Detail, StoreError};

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
/// that commit's caller waits for it (the copy into the database file and its sync). The store checkpoints instead
/// (`PASSIVE`, at the same threshold) after the commit, once its writers have their replies: between groups, in the
/// group-commit leader.
///
/// **Schema.** All SQL is in `sql.rs`; the ordered migrations are `sql::MIGRATIONS` and the `schema_version` table
/// records how many are applied. A database with a newer version is refused ([`StoreError::NewerSchema`]).
///
/// **Errors.** SQLite failures are classified in one function (`errors::sqlite_error`), which keeps the
/// `rusqlite::Error` as the error's [`source`](std::error::Error::source) and its extended result code as
/// [`StoreError::code`]; nothing from the database or the file system is unwrapped, and a poisoned mutex or a
/// panicked operation becomes [`StoreError::Backend`].
///
/// **Fleets.** The store implements [`SessionQueue`](crate::SessionQueue) too (contract §7.5), for a fleet of worker
/// processes on one machine sharing one file: a claim is a write transaction, which SQLite serializes with every
/// other writer of the file, so no two claimers ever get the same session, and a fenced write checks its lease in its
/// own write transaction. Lease times use the machine's clock (SQLite's `unixepoch`). For workers on several
/// machines, use the PostgreSQL store. Its [wake-ups](crate::SessionQueue::wake_ups) reach only the workers of this
/// process sharing this store object (or its clones): a submit or a release through it wakes them once it is
/// committed. Workers in other processes poll.
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
    /// The workers of this process waiting on this store object ([`SessionQueue::wake_ups`](crate::SessionQueue)).
    wake: Subscribers,
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

/// `PRAGMA journal_mode=WAL`, tried again for up to `patience` while it answers "database is locked". Two processes
/// switching one file at the same moment (a copy made by `VACUUM INTO`, a restored backup, opened by several
/// recoveries at once) may each hold the shared lock the other must see gone, and SQLite then answers one of them
/// SQLITE_BUSY at once instead of calling the busy handler: the busy timeout alone does not cover it. The crash
/// test's recoveries started together met it.
fn switch_to_wal(conn: &Connection, patience: Duration) -> rusqlite::Result<String> {
    let started = std::time::Instant::now();
    loop {
        match conn.query_row(sql::SET_JOURNAL_MODE_WAL, [], |row| row.get(0)) {
            Err(rusqlite::Error::SqliteFailure(error, _))
                if error.code == rusqlite::ErrorCode::DatabaseBusy && started.elapsed() < patience =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            answer => return answer,
        }
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
        let mode = switch_to_wal(&conn, options.busy_timeout).map_err(fail("switch to WAL journal mode"))?;
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
                wake: Subscribers::default(),
            }),
            fence: None,
        }
    }

    /// A handle on the same database whose every write is conditional on `lease` (see
    /// [`SessionQueue::fenced`](crate::SessionQueue::fenced)).
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

    /// SQLite's `PRAGMA data_version` on this handle's one connection: it changes whenever another connection, in
    /// this process or another, commits to the file (never on this handle's own writes). A reader polls it to
    /// notice writes without reading the data, as `headstart serve`'s live pages do.
    pub async fn data_version(&self) -> Result<i64, StoreError> {
        self.run(|conn| {
            conn.query_row(sql::DATA_VERSION, [], |row| row.get(0))
                .map_err(|err| sqlite_error(err, "read the data version", None))
        })
        .await
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

/// Sizes the statement cache and fills it with the write path's statements ([`sql::HOT_PATH`]).
fn prepare_hot_path(conn: &Connection, label: &str) -> Result<(), StoreError> {
    conn.set_prepared_statement_cache_capacity(sql::STATEMENT_CACHE_CAPACITY);
    for statement in sql::HOT_PATH {
        conn.prepare_cached(statement)
            .map_err(|err| sqlite_error(err, "prepare the write path's statements", Some(label)))?;
    }
    Ok(())
}
