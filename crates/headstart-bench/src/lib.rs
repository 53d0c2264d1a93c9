//! # headstart-bench
//!
//! The measurements behind `headstart bench` (issue 6): each mode runs its contenders side by side in one process,
//! so its figures are ratios and differences taken under the same conditions, and returns a report that prints as
//! a human table or as one JSON object with a fixed set of keys.
//!
//! | mode | what it measures | runtime |
//! |---|---|---|
//! | [`overlap`] | a realistic response on the wall clock: early execution vs end-of-stream batching vs the lower bound, beside a bare SQLite commit after an idle pause | current-thread |
//! | [`deltas`] | the per-delta cost of the full adapter (with a real SQLite store) vs a bare counting loop | current-thread |
//! | [`admission`] | sealed `toolcall_end` → the tool's `execute` starting, vs a bare SQLite commit of a same-sized row | current-thread |
//! | [`sessions`] | thousands of concurrent agent sessions against one SQLite file: throughput and peak memory | multi-thread |
//! | [`history`] | one long session: the step gap (last durable write → next request) at its start and at its end | current-thread |
//! | [`headroom`] | recordings replayed through each Chat Completions sealing rule: when each call is sealed, and its headroom | none (pure) |
//! | [`fleet`] | worker processes on one store (`headstart bench sessions --store`): the scenario and the report | processes |
//!
//! The single-response modes use a current-thread runtime: one response is one task, and a second worker thread
//! would only add cross-thread wake-ups to what is measured (SQLite work still runs on tokio's blocking pool, as in
//! production). `sessions` uses a multi-thread runtime with one worker per core, as a server would.
//!
//! Every mode writes its SQLite files to a fresh temporary directory (under [`std::env::temp_dir`] unless a
//! directory is given), so the store runs on a real file system; the directory is removed afterwards.
#![warn(missing_docs)]

pub mod admission;
pub mod deltas;
pub mod fleet;
pub mod headroom;
pub mod history;
pub mod overlap;
pub mod prometheus;
pub mod provider_async;
pub mod scheduler;
pub mod sessions;

mod floor;
mod instrumented;
mod stats;
mod tools;

use std::fmt;
use std::path::Path;

pub use headstart::store::Durability;
pub use instrumented::{instrumented, Instrumentation, InstrumentedStore};
pub use stats::{median, percentile};
pub use tools::{BenchTool, CallLog};

/// Why a benchmark could not run (a store, runtime or engine failure; never a slow result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchError(pub String);

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

impl BenchError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        BenchError(message.into())
    }
}

impl From<headstart::store::StoreError> for BenchError {
    fn from(error: headstart::store::StoreError) -> Self {
        BenchError(format!("store: {error}"))
    }
}

impl From<std::io::Error> for BenchError {
    fn from(error: std::io::Error) -> Self {
        BenchError(format!("i/o: {error}"))
    }
}

impl From<rusqlite::Error> for BenchError {
    fn from(error: rusqlite::Error) -> Self {
        BenchError(format!("sqlite: {error}"))
    }
}

/// The name of a durability level as it appears in reports (`full`, `normal`).
pub fn durability_name(durability: Durability) -> &'static str {
    match durability {
        Durability::Full => "full",
        Durability::Normal => "normal",
    }
}

/// The peak resident set size of this process in MiB (`VmHWM` of `/proc/self/status`), or `None` where that file
/// does not exist (not Linux).
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: f64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

/// A fresh temporary directory for a benchmark's SQLite files, inside `parent` (default: the system's temporary
/// directory). Removed when dropped.
pub(crate) fn bench_dir(parent: Option<&Path>) -> Result<tempfile::TempDir, BenchError> {
    let builder = {
        let mut builder = tempfile::Builder::new();
        builder.prefix("headstart-bench-");
        builder
    };
    let dir = match parent {
        Some(parent) => builder.tempdir_in(parent)?,
        None => builder.tempdir()?,
    };
    Ok(dir)
}

/// A current-thread tokio runtime with I/O and time enabled.
pub(crate) fn current_thread_runtime() -> Result<tokio::runtime::Runtime, BenchError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(BenchError::from)
}

/// Rounds to 3 decimals (reports carry µs/ms with a sensible precision).
pub(crate) fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}
