//! Opening a database file for reading only, without ever writing to it or beside it when that cannot be done.
//!
//! A read-only connection (`mode=ro`) never writes the database file and never changes its journal mode. A file in
//! WAL mode still needs the WAL's shared-memory index (`<db>-shm`), which SQLite creates beside the file: in a
//! directory the process cannot write, opening fails (`SQLITE_READONLY_DIRECTORY`, "attempt to write a readonly
//! database"). The file is then opened `immutable=1`: SQLite reads the file alone, with no lock and no index, which
//! is exact when no WAL holds commits the file lacks (no `<db>-wal`, or an empty one, as a store closed cleanly
//! leaves it). When a non-empty WAL is there, its commits would be missed silently, so the open fails instead and
//! says why.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::ffi;
use rusqlite::{Connection, OpenFlags};

use super::errors::sqlite_error;
use super::sql;
use crate::StoreError;

/// What to do when a read-only open failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fallback {
    /// Open again with `immutable=1`: the failure is the WAL index that cannot be created, and no WAL holds
    /// commits the file lacks.
    Immutable,
    /// The WAL index cannot be created and a WAL with commits is there: reading the file alone would miss them.
    WalPending,
    /// Another failure: report it.
    None,
}

/// The decision after a read-only open failed with SQLite's extended result code `code`, given the size of the
/// WAL file beside the database (`None`: there is none).
pub(super) fn fallback(code: i32, wal_bytes: Option<u64>) -> Fallback {
    // The directory cannot hold the WAL index (`-shm`), or an existing index cannot be initialized read-only; with
    // a WAL beside the file, SQLite says only that it cannot open the database (its index cannot be made).
    let index_unavailable = code == ffi::SQLITE_READONLY_DIRECTORY
        || code == ffi::SQLITE_READONLY_CANTINIT
        || (code == ffi::SQLITE_CANTOPEN && wal_bytes.is_some());
    match (index_unavailable, wal_bytes) {
        (false, _) => Fallback::None,
        (true, None | Some(0)) => Fallback::Immutable,
        (true, Some(_)) => Fallback::WalPending,
    }
}

/// Opens `path` (an existing file) for reading only: `mode=ro`, query-only, and `immutable=1` when [`fallback`]
/// says so. `label` names it in errors. The connection has read the schema once (so a file that is not a database
/// fails here).
pub(super) fn open(path: &Path, label: &str, busy_timeout: Duration) -> Result<Connection, StoreError> {
    match connect(path, label, busy_timeout, false) {
        Ok(conn) => Ok(conn),
        Err((code, error)) => match fallback(code, wal_size(path)) {
            Fallback::Immutable => connect(path, label, busy_timeout, true).map_err(|(_, error)| error),
            Fallback::WalPending => Err(StoreError::ReadOnly(
                format!(
                    "{label}: its directory cannot be written, so SQLite cannot build the WAL index it needs, and the \
                 WAL beside it holds commits the file lacks; copy the database with its -wal file to a writable \
                 directory to read it"
                )
                .into(),
            )),
            Fallback::None => Err(error),
        },
    }
}

/// One read-only connection, with SQLite's extended result code when it fails.
fn connect(path: &Path, label: &str, busy_timeout: Duration, immutable: bool) -> Result<Connection, (i32, StoreError)> {
    let fail = |what: &'static str| {
        move |err: rusqlite::Error| {
            let code = match &err {
                rusqlite::Error::SqliteFailure(failure, _) => failure.extended_code,
                _ => 0,
            };
            (code, sqlite_error(err, what, Some(label)))
        }
    };
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(uri(path, immutable), flags).map_err(fail("open the database"))?;
    conn.busy_timeout(busy_timeout).map_err(fail("set the busy timeout"))?;
    conn.execute_batch(sql::ENABLE_QUERY_ONLY)
        .map_err(fail("make the connection query-only"))?;
    conn.query_row(sql::PROBE, [], |_| Ok(()))
        .map_err(fail("read the database"))?;
    Ok(conn)
}

/// The size of the WAL file beside `path`, `None` when there is none (or it cannot be seen).
fn wal_size(path: &Path) -> Option<u64> {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(PathBuf::from(wal)).ok().map(|meta| meta.len())
}

/// The `file:` URI of `path`, read-only, and immutable if asked: every byte outside the URI's unreserved
/// characters and `/` percent-encoded, so that `?`, `#` and `%` in a file name stay part of the name.
fn uri(path: &Path, immutable: bool) -> String {
    let mut uri = String::from("file:");
    let text = path_bytes(path);
    #[cfg(windows)]
    if text.get(1) == Some(&b':') {
        // `C:/x` must read `file:/C:/x`.
        uri.push('/');
    }
    for &byte in text.iter() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri.push_str(if immutable { "?mode=ro&immutable=1" } else { "?mode=ro" });
    uri
}

#[cfg(unix)]
fn path_bytes(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes().to_vec()
}

/// Elsewhere the path is written with `/` as SQLite's URIs want.
#[cfg(not(unix))]
fn path_bytes(path: &Path) -> Vec<u8> {
    path.to_string_lossy().replace('\\', "/").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_missing_wal_index_falls_back_to_immutable_and_never_over_pending_commits() {
        for code in [ffi::SQLITE_READONLY_DIRECTORY, ffi::SQLITE_READONLY_CANTINIT] {
            assert_eq!(fallback(code, None), Fallback::Immutable);
            assert_eq!(fallback(code, Some(0)), Fallback::Immutable);
            assert_eq!(fallback(code, Some(4152)), Fallback::WalPending);
        }
        // A WAL beside the file: SQLite reports only that it cannot open it.
        assert_eq!(fallback(ffi::SQLITE_CANTOPEN, Some(0)), Fallback::Immutable);
        assert_eq!(fallback(ffi::SQLITE_CANTOPEN, Some(12_392)), Fallback::WalPending);
        for code in [
            ffi::SQLITE_READONLY,
            ffi::SQLITE_CANTOPEN,
            ffi::SQLITE_NOTADB,
            ffi::SQLITE_BUSY,
            0,
        ] {
            assert_eq!(fallback(code, None), Fallback::None, "code {code}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn uris_keep_every_byte_of_the_name() {
        assert_eq!(uri(Path::new("/tmp/a.db"), false), "file:/tmp/a.db?mode=ro");
        assert_eq!(
            uri(Path::new("runs dir/x?y#z%.db"), true),
            "file:runs%20dir/x%3Fy%23z%25.db?mode=ro&immutable=1"
        );
        use std::os::unix::ffi::OsStrExt;
        let odd = Path::new(std::ffi::OsStr::from_bytes(b"/t/\xff.db"));
        assert_eq!(uri(odd, false), "file:/t/%FF.db?mode=ro");
    }

    #[cfg(unix)]
    #[test]
    fn a_file_named_like_a_uri_opens_as_that_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("odd?mode=rwc#%41.db");
        Connection::open(&path)
            .and_then(|conn| conn.execute_batch("CREATE TABLE t (x)"))
            .expect("create");
        let conn = open(&path, "odd", Duration::from_secs(1)).expect("opens by its real name");
        let tables: i64 = conn
            .query_row("SELECT COUNT(*) FROM sqlite_master", [], |row| row.get(0))
            .expect("read");
        assert_eq!(tables, 1);
        assert!(conn.execute_batch("CREATE TABLE u (x)").is_err(), "read-only");
    }
}
