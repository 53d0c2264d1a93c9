//! The `STORE` argument of the commands that read or write a transcript store: a PostgreSQL connection string (a
//! `postgres://…` or `postgresql://…` URL, the scheme in any case, or libpq's `host=… dbname=…` form) or the path
//! of a SQLite file. One parser and one opener serve every command.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use headstart::store::{SessionInfo, SessionQueue, SqliteOptions, SqliteStore};
use headstart_postgres::{PgOptions, PgStore};

/// Where a store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection string (it may hold a password: shown only through [`headstart_postgres::redact`]).
    Postgres(String),
}

/// How a command uses the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads only: a SQLite file is opened read-only and must exist; a PostgreSQL database must hold the store
    /// already (nothing is created or upgraded).
    Read,
    /// Writes to an existing store (a SQLite file must exist: a typo must not create an empty one).
    WriteExisting,
    /// Writes, creating a SQLite file when there is none.
    Create,
}

impl StoreUrl {
    /// Parses a command-line argument: a PostgreSQL connection string
    /// ([`headstart_postgres::is_connection_string`]), else a path.
    pub fn parse(text: &str) -> StoreUrl {
        if headstart_postgres::is_connection_string(text) {
            StoreUrl::Postgres(text.to_owned())
        } else {
            StoreUrl::Sqlite(PathBuf::from(text))
        }
    }

    /// Opens the store.
    pub async fn open(&self, access: Access) -> Result<Arc<dyn SessionQueue>, String> {
        match self {
            StoreUrl::Sqlite(path) => {
                if access != Access::Create && !path.exists() {
                    return Err(format!("{} does not exist", path.display()));
                }
                let store = if access == Access::Read {
                    SqliteStore::open_read_only(path)
                } else {
                    SqliteStore::open(path, SqliteOptions::default())
                };
                Ok(Arc::new(store.map_err(|error| damaged_hint(&error))?))
            }
            StoreUrl::Postgres(url) => {
                let store = if access == Access::Read {
                    PgStore::connect_read_only(url, PgOptions::default()).await
                } else {
                    PgStore::connect(url, PgOptions::default()).await
                };
                Ok(Arc::new(store.map_err(|error| error.to_string())?))
            }
        }
    }

    /// The sessions of `store` (opened from this URL): every one, or only the session `only`, which must exist
    /// (else the error `<store> has no session <id>`).
    pub async fn sessions(&self, store: &dyn SessionQueue, only: Option<&str>) -> Result<Vec<SessionInfo>, String> {
        let mut sessions = store.sessions().await.map_err(|error| error.to_string())?;
        if let Some(id) = only {
            sessions.retain(|info| info.id.0 == id);
            if sessions.is_empty() {
                return Err(format!("{self} has no session {id}"));
            }
        }
        Ok(sessions)
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Sqlite(path) => write!(f, "{}", path.display()),
            StoreUrl::Postgres(conn) => f.write_str(&headstart_postgres::redact(conn)),
        }
    }
}

/// A current-thread runtime for the commands that only wait on the store.
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start a runtime: {error}"))
}

/// `error`'s text, with what can be done when the SQLite file is damaged: nothing headstart writes, since a process
/// killed at any instant leaves a file that loads (docs/reliability.md, property 4).
pub(crate) fn damaged_hint(error: &headstart::store::StoreError) -> String {
    match error {
        headstart::store::StoreError::Corrupt(_) => format!(
            "{error}; nothing was written to it. headstart cannot repair a damaged file, and a killed process does \
             not leave one (each write is one transaction): suspect the disk, or a copy taken while it was written. \
             `sqlite3 FILE .recover` may save what it holds; recover and resume work on the file it makes"
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_a_postgresql_scheme_are_postgres_and_anything_else_a_path() {
        assert_eq!(
            StoreUrl::parse("postgres://u@h/db"),
            StoreUrl::Postgres("postgres://u@h/db".to_owned())
        );
        assert_eq!(
            StoreUrl::parse("postgresql:///db?host=/tmp"),
            StoreUrl::Postgres("postgresql:///db?host=/tmp".to_owned())
        );
        assert_eq!(StoreUrl::parse("runs.db"), StoreUrl::Sqlite(PathBuf::from("runs.db")));
        assert_eq!(
            StoreUrl::parse("postgres.db"),
            StoreUrl::Sqlite(PathBuf::from("postgres.db"))
        );
        for conn in [
            "POSTGRESQL://u:s3cret@h/db",
            "Postgres://h/db",
            "host=db.internal dbname=agents user=w password=s3cret",
            "dbname = agents",
        ] {
            assert_eq!(StoreUrl::parse(conn), StoreUrl::Postgres(conn.to_owned()), "{conn}");
        }
        assert_eq!(StoreUrl::parse("./a=b.db"), StoreUrl::Sqlite(PathBuf::from("./a=b.db")));
    }

    #[test]
    fn a_shown_store_never_shows_its_password() {
        assert_eq!(
            StoreUrl::parse("postgres://agent:s3cret@h/db").to_string(),
            "postgres://agent:***@h/db"
        );
        assert_eq!(
            StoreUrl::parse("host=h user=agent password='s3 cret'").to_string(),
            "host=h user=agent password=***"
        );
    }
}
