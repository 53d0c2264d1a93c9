//! One process at a time on a session outside a fleet (contract §7.4.4), on PostgreSQL: what the lock files beside a
//! SQLite file ([`SessionLocks`](headstart_store::owner::SessionLocks)) are to `run`, `resume` and `recover`.
//!
//! The hold is a session-level advisory lock, taken on a connection that leaves the pool with it and is closed when
//! the hold is dropped (closing it is what releases the lock, also when the process dies). The holder names itself
//! in the connection's `application_name`, which a refused process reads back from `pg_stat_activity`. A session a
//! fleet's worker (or a Restate deployment) holds under a lease is refused before any lock: the lease decides.

use std::sync::Arc;

use deadpool_postgres::Object;
use headstart_store::owner::{decide, Holder, OwnershipError, ProcessRecord, Refusal};
use headstart_store::{SessionId, TranscriptStore};

use crate::{PgOptions, PgStore};

/// The advisory lock's first key: a namespace ("HSTR"), so that headstart's locks meet no other application's.
const NAMESPACE: i32 = 0x4853_5452;

/// What a holder's `application_name` begins with.
const PREFIX: &str = "headstart-hold";

/// Takes the session's lock on the connection, without waiting.
const TRY_LOCK: &str = "SELECT pg_try_advisory_lock($1, hashtext($2))";

/// The `application_name` of the connection holding the session's lock, if it can be seen.
const HOLDER: &str = "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
      AND l.classid::bigint = $1::bigint AND l.objid::bigint = (hashtext($2)::bigint & 4294967295)
    LIMIT 1";

/// Names the connection as the holder.
const NAME_HOLDER: &str = "SELECT set_config('application_name', $1, false)";

/// A process's hold on a session of a PostgreSQL store; dropping it releases the session.
pub struct PgSessionHold {
    connection: Option<Object>,
}

impl std::fmt::Debug for PgSessionHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgSessionHold").finish_non_exhaustive()
    }
}

impl Drop for PgSessionHold {
    fn drop(&mut self) {
        // Out of the pool for good: the connection closes, and with it the session's lock.
        if let Some(connection) = self.connection.take() {
            drop(Object::take(connection));
        }
    }
}

/// The advisory locks of one PostgreSQL database, taken through one pool of connections: it connects at the first
/// take, and every later take (and every clone of this value) uses it, so a recovery of many sessions, or a package's
/// `recover` called again and again, connects once. Each hold takes its connection out of the pool for as long as it
/// lasts ([`PgSessionHold`]). A take that could not connect leaves nothing behind: the next one tries again.
#[derive(Clone)]
pub struct DatabaseLocks {
    url: Arc<str>,
    store: Arc<tokio::sync::OnceCell<PgStore>>,
}

impl DatabaseLocks {
    /// The locks of the database at the connection string `url`, not connected yet.
    pub fn new(url: &str) -> Self {
        DatabaseLocks {
            url: url.into(),
            store: Arc::default(),
        }
    }

    /// Holds `session` for this process ([`PgStore::hold_session`]); [`OwnershipError::Lock`], naming the database
    /// without its password, when it cannot be reached.
    pub async fn take(&self, session: &SessionId, now_us: i64) -> Result<PgSessionHold, OwnershipError> {
        let store = self
            .store
            .get_or_try_init(|| async {
                // Holds need no notifications: no listening connection.
                let options = PgOptions {
                    listen: false,
                    ..PgOptions::default()
                };
                PgStore::connect(&self.url, options).await
            })
            .await
            .map_err(|error| OwnershipError::Lock {
                path: crate::redact(&self.url),
                message: error.to_string(),
            })?;
        store.hold_session(session, now_us).await
    }

    /// Whether a take has connected the pool (the takes after it use the same).
    pub fn is_connected(&self) -> bool {
        self.store.initialized()
    }
}

impl std::fmt::Debug for DatabaseLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseLocks")
            .field("database", &crate::redact(&self.url))
            .field("connected", &self.is_connected())
            .finish()
    }
}

/// `record` as a connection's `application_name` (at most 63 bytes: the host is cut to fit).
fn application_name(record: &ProcessRecord) -> String {
    let mut name = format!("{PREFIX} {} {} {}", record.pid, record.since_us, record.host);
    while name.len() > 63 {
        name.pop();
    }
    name
}

/// The record an `application_name` written by [`application_name`] holds.
fn record_of(name: &str) -> Option<ProcessRecord> {
    let mut parts = name.strip_prefix(PREFIX)?.trim_start().splitn(3, ' ');
    let pid = parts.next()?.parse().ok()?;
    let since_us = parts.next()?.parse().ok()?;
    let host = parts.next().unwrap_or("unknown").to_owned();
    Some(ProcessRecord { pid, host, since_us })
}

impl PgStore {
    /// Holds `session` for this process (taken at `now_us`) until the returned hold is dropped: another process
    /// asking for it meanwhile is refused ([`OwnershipError::Refused`], naming this one). A session under a worker's
    /// lease is refused too. [`OwnershipError::Lock`] when the database cannot be asked.
    pub async fn hold_session(&self, session: &SessionId, now_us: i64) -> Result<PgSessionHold, OwnershipError> {
        let failed = |message: String| OwnershipError::Lock {
            path: self.label().to_owned(),
            message,
        };
        let info = self.session(session).await.map_err(|error| failed(error.to_string()))?;
        if let Some(worker) = info.as_ref().and_then(Holder::of_session) {
            decide(session, Some(&worker), false, now_us)?;
        }
        let client = self
            .pool()
            .get()
            .await
            .map_err(|error| failed(format!("no connection: {error}")))?;
        let taken: bool = client
            .query_one(TRY_LOCK, &[&NAMESPACE, &session.0])
            .await
            .and_then(|row| row.try_get(0))
            .map_err(|error| failed(error.to_string()))?;
        if taken {
            // The hold owns the connection before anything else can fail: a failure to name it drops the hold,
            // which closes the connection and so releases the lock, instead of handing the pool a locked one.
            let hold = PgSessionHold {
                connection: Some(client),
            };
            if let Some(connection) = &hold.connection {
                let name = application_name(&ProcessRecord::current(now_us));
                connection
                    .execute(NAME_HOLDER, &[&name])
                    .await
                    .map_err(|error| failed(error.to_string()))?;
            }
            return Ok(hold);
        }
        // A holder that has not named itself yet is a process that has not recorded itself yet.
        let holder = client
            .query_opt(HOLDER, &[&i64::from(NAMESPACE), &session.0])
            .await
            .map_err(|error| failed(error.to_string()))?
            .and_then(|row| row.try_get::<_, String>(0).ok())
            .and_then(|name| record_of(&name));
        Err(OwnershipError::Refused(Refusal {
            session: session.clone(),
            holder: Holder::Process(holder),
            now_us,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_reads_back_from_its_application_name() {
        let record = ProcessRecord {
            pid: 4242,
            host: "worker-7.example".to_owned(),
            since_us: 1_796_155_863_000_000,
        };
        assert_eq!(record_of(&application_name(&record)), Some(record));
        assert_eq!(record_of("psql"), None);
        assert_eq!(record_of("headstart-hold x 1 h"), None);
    }

    #[test]
    fn a_long_host_is_cut_to_fit_the_name() {
        let record = ProcessRecord {
            pid: 1,
            host: "h".repeat(200),
            since_us: 2,
        };
        let name = application_name(&record);
        assert_eq!(name.len(), 63);
        assert_eq!(record_of(&name).map(|read| read.pid), Some(1));
    }
}
