//! [`NativeStore`]: a transcript store opened once from its location, shared by the engines built on it.

use std::sync::Arc;

use headstart::store::{Durability, TranscriptStore};
use headstart::SessionId;
use headstart_postgres::{open_location, session_locks, Access, SessionLocksAt};
use napi_derive::napi;

use crate::{js_error, one_of};

/// An open transcript store.
#[napi]
pub struct NativeStore {
    pub(crate) store: Arc<dyn TranscriptStore>,
    /// The session locks (beside a SQLite file, or the database's): a recovery takes its session's.
    pub(crate) locks: SessionLocksAt,
}

/// Opens the store at `location`: a PostgreSQL connection string (`postgresql://…`), else the path of a SQLite file,
/// created when `write` and missing. `durability` (SQLite, when writing) is `full` (each commit synced: survives
/// power loss) or `normal` (survives a crash of the process).
#[napi]
pub async fn open_store(location: String, write: bool, durability: String) -> napi::Result<NativeStore> {
    let durability = one_of(
        "durability",
        &durability,
        [("full", Durability::Full), ("normal", Durability::Normal)],
    )?;
    let access = if write { Access::Write(durability) } else { Access::Read };
    let store = open_location(&location, access).await.map_err(js_error)?;
    Ok(NativeStore {
        store,
        locks: session_locks(&location),
    })
}

#[napi]
impl NativeStore {
    /// The sessions of the store (only `session` when given), with their messages, tool runs and figures, as the
    /// JSON text `headstart inspect --json` gives.
    #[napi]
    pub async fn inspect(&self, session: Option<String>) -> napi::Result<String> {
        let report = headstart_timeline::stored::inspect_json(self.store.as_ref(), session.as_deref())
            .await
            .map_err(js_error)?;
        Ok(report.to_string())
    }

    /// The stored log of `session` (every message with its sequence number and times), as JSON text: what a
    /// resumed loop rebuilds its messages from.
    #[napi]
    pub async fn load_log(&self, session: String) -> napi::Result<String> {
        let log = self.store.load_log(&SessionId(session)).await.map_err(js_error)?;
        serde_json::to_string(&log).map_err(js_error)
    }

    /// The figures of `session` from its stored times (headroom, seal to start, overlap per call; the tool round
    /// per response), as JSON text; with `after`, only of what was stored after that sequence number.
    #[napi]
    pub async fn figures(&self, session: String, after: Option<i64>) -> napi::Result<String> {
        let after = after.map(|seq| u64::try_from(seq).unwrap_or(0));
        let figures = headstart_timeline::stored::figures_json(self.store.as_ref(), &SessionId(session), after)
            .await
            .map_err(js_error)?;
        Ok(figures.to_string())
    }
}
