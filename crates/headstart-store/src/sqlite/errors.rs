//! The one place where SQLite errors become [`StoreError`]s.

use std::sync::Arc;

use rusqlite::ffi::ErrorCode;

use crate::{DatabaseCode, Detail, StoreError};

/// Classifies a SQLite error; the [`StoreError`] keeps `err` as its source.
///
/// `what` says what failed ("commit a fragment to session …"). `opening` is the database's label (its path, or
/// `:memory:`) while a store is being opened: failures that fit no specific variant then become
/// [`StoreError::Open`] instead of [`StoreError::Backend`], and the other variants name the file.
///
/// | SQLite | `StoreError` |
/// |---|---|
/// | `SQLITE_READONLY*` | `ReadOnly` |
/// | `SQLITE_BUSY*`, `SQLITE_LOCKED*` | `Locked` |
/// | `SQLITE_FULL` | `Full` |
/// | `SQLITE_CORRUPT*`, `SQLITE_NOTADB` | `Corrupt` |
/// | `SQLITE_CONSTRAINT*` | `Conflict` |
/// | a stored value of an unexpected type or range | `Decode` |
/// | anything else | `Open` while opening, else `Backend` |
pub(super) fn sqlite_error(err: rusqlite::Error, what: &str, opening: Option<&str>) -> StoreError {
    shared_sqlite_error(&Arc::new(err), what, opening)
}

/// [`sqlite_error`] of an error several writes share (a group's failed `COMMIT` fails each of its writes).
pub(super) fn shared_sqlite_error(err: &Arc<rusqlite::Error>, what: &str, opening: Option<&str>) -> StoreError {
    let code = match err.as_ref() {
        rusqlite::Error::SqliteFailure(failure, _) => Some(DatabaseCode::Sqlite(failure.extended_code)),
        _ => None,
    };
    let detail = |message: String| Detail::caused_by(message, code.clone(), err.clone());
    let described = match opening {
        Some(label) => format!("{label}: {what}: {err}"),
        None => format!("{what}: {err}"),
    };
    match err.as_ref() {
        rusqlite::Error::SqliteFailure(failure, _) => match failure.code {
            ErrorCode::ReadOnly => return StoreError::ReadOnly(detail(described)),
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => return StoreError::Locked(detail(described)),
            ErrorCode::DiskFull => return StoreError::Full(detail(described)),
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => return StoreError::Corrupt(detail(described)),
            ErrorCode::ConstraintViolation => return StoreError::Conflict(detail(described)),
            _ => {}
        },
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::InvalidColumnType(..) => return StoreError::Decode(detail(described)),
        _ => {}
    }
    match opening {
        Some(label) => StoreError::Open {
            path: label.to_owned(),
            message: detail(format!("{what}: {err}")),
        },
        None => StoreError::Backend(detail(described)),
    }
}
