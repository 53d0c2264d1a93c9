//! The `STORE` argument of the commands that read or write a transcript store: a PostgreSQL URL (`postgres://…` or
//! `postgresql://…`) or the path of a SQLite file. One parser and one opener serve every command.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use headstart::store::{SessionQueue, SqliteOptions, SqliteStore};
use headstart_postgres::{PgOptions, PgStore};

/// Where a store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL.
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
    /// Parses a command-line argument: a URL with a PostgreSQL scheme, else a path.
    pub fn parse(text: &str) -> StoreUrl {
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
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
                Ok(Arc::new(store.map_err(|error| error.to_string())?))
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
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Sqlite(path) => write!(f, "{}", path.display()),
            // The URL may hold a password: show where, not how.
            StoreUrl::Postgres(_) => f.write_str("the PostgreSQL database"),
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
        assert_eq!(
            StoreUrl::parse("postgres://secret@h/db").to_string(),
            "the PostgreSQL database"
        );
    }
}
