//! Opening the transcript store a location names, as the CLI's `STORE` argument does: a PostgreSQL connection
//! string, else the path of a SQLite file.

use std::sync::Arc;

use headstart::store::{Durability, SqliteOptions, SqliteStore, TranscriptStore};
use headstart_postgres::{PgOptions, PgStore};
use pyo3::prelude::*;

use crate::errors::store_error;
use crate::runtime::block_on;

/// Whether the store is written (a SQLite file is created when missing) or only read (it must exist).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read and write, a SQLite file with this durability.
    Write(Durability),
    /// Read only.
    Read,
}

/// Opens the store at `location`, with the GIL released while it connects.
pub(crate) fn open_store(py: Python<'_>, location: &str, access: Access) -> PyResult<Arc<dyn TranscriptStore>> {
    if headstart_postgres::is_connection_string(location) {
        let store = block_on(py, async {
            match access {
                Access::Write(_) => PgStore::connect(location, PgOptions::default()).await,
                Access::Read => PgStore::connect_read_only(location, PgOptions::default()).await,
            }
        });
        return Ok(Arc::new(store.map_err(store_error)?));
    }
    let store = py.detach(|| match access {
        Access::Write(durability) => SqliteStore::open(
            location,
            SqliteOptions {
                durability,
                ..SqliteOptions::default()
            },
        ),
        Access::Read => SqliteStore::open_read_only(location),
    });
    Ok(Arc::new(store.map_err(store_error)?))
}
