//! Opening the transcript store a location names, as the CLI's `STORE` argument does: a PostgreSQL connection
//! string, else the path of a SQLite file (`headstart_postgres::open_location`, which Node's package uses too).

use std::sync::Arc;

use headstart::store::{SessionQueue, TranscriptStore};
pub(crate) use headstart_postgres::Access;
use pyo3::prelude::*;

use crate::errors::store_error;
use crate::runtime::block_on;

/// Opens the store at `location`, with the GIL released while it connects or opens the file.
pub(crate) fn open_store(py: Python<'_>, location: &str, access: Access) -> PyResult<Arc<dyn TranscriptStore>> {
    block_on(py, headstart_postgres::open_location(location, access)).map_err(store_error)
}

/// Opens the store at `location` as a fleet's queue, with the GIL released while it connects or opens the file.
pub(crate) fn open_queue(py: Python<'_>, location: &str, access: Access) -> PyResult<Arc<dyn SessionQueue>> {
    block_on(py, headstart_postgres::open_queue_location(location, access)).map_err(store_error)
}
