//! The one place where SQLite errors become [`StoreError`]s.

use rusqlite::ffi::ErrorCode;

use crate::StoreError;

/// Classifies a SQLite error.
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
    let described = match opening {
        Some(label) => format!("{label}: {what}: {err}"),
        None => format!("{what}: {err}"),
    };
    match &err {
        rusqlite::Error::SqliteFailure(failure, _) => match failure.code {
            ErrorCode::ReadOnly => return StoreError::ReadOnly(described),
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => return StoreError::Locked(described),
            ErrorCode::DiskFull => return StoreError::Full(described),
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => return StoreError::Corrupt(described),
            ErrorCode::ConstraintViolation => return StoreError::Conflict(described),
            _ => {}
        },
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::InvalidColumnType(..) => return StoreError::Decode(described),
        _ => {}
    }
    match opening {
        Some(label) => StoreError::Open {
            path: label.to_owned(),
            message: format!("{what}: {err}"),
        },
        None => StoreError::Backend(described),
    }
}
