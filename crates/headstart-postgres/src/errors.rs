//! Classifies PostgreSQL and pool errors as [`StoreError`]s: one function for each, so every operation fails the
//! same way for the same cause.

use std::sync::Arc;

use deadpool_postgres::{PoolError, TimeoutType};
use headstart_store::{DatabaseCode, Detail, StoreError};

/// How to read an error: during [`PgStore::connect`](crate::PgStore::connect) (errors without a better class are
/// [`StoreError::Open`] naming the database) or during an operation ([`StoreError::Backend`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stage<'a> {
    /// Connecting to the database labelled so.
    Opening(&'a str),
    /// An operation on an open store.
    Running,
}

/// The class of an error by its SQLSTATE (<https://www.postgresql.org/docs/current/errcodes-appendix.html>).
fn by_code(code: &str, detail: Detail) -> Option<StoreError> {
    Some(match code {
        // integrity_constraint_violation: a duplicate key, a failed check or foreign key.
        _ if code.starts_with("23") => StoreError::Conflict(detail),
        // read_only_sql_transaction: a read-only transaction or a hot standby.
        "25006" => StoreError::ReadOnly(detail),
        // disk_full; too_many_connections (the server refuses connections: try again later).
        "53100" => StoreError::Full(detail),
        "53300" => StoreError::Unavailable(detail),
        // serialization_failure, deadlock_detected, lock_not_available.
        "40001" | "40P01" | "55P03" => StoreError::Locked(detail),
        // connection_exception; admin_shutdown, crash_shutdown, cannot_connect_now; idle_session_timeout.
        _ if code.starts_with("08") => StoreError::Unavailable(detail),
        "57P01" | "57P02" | "57P03" | "57P05" => StoreError::Unavailable(detail),
        // data_corrupted, index_corrupted.
        "XX001" | "XX002" => StoreError::Corrupt(detail),
        _ => return None,
    })
}

/// `message` with `err` behind it: the error and its SQLSTATE stay reachable from the [`StoreError`].
fn caused_by(message: String, err: &Arc<tokio_postgres::Error>) -> Detail {
    let code = err.code().map(|code| DatabaseCode::Sqlstate(code.code().to_owned()));
    Detail::caused_by(
        message,
        code,
        Arc::clone(err) as Arc<dyn std::error::Error + Send + Sync>,
    )
}

/// Whether `err` says the connection is gone: closed, its socket failed, or the server ended it
/// (`admin_shutdown`, `crash_shutdown`, a `connection_exception`), as opposed to the server refusing a statement.
pub(crate) fn connection_lost(err: &tokio_postgres::Error) -> bool {
    let ended = err
        .code()
        .is_some_and(|code| matches!(code.code(), "57P01" | "57P02") || code.code().starts_with("08"));
    ended || err.is_closed() || std::error::Error::source(err).is_some_and(|source| source.is::<std::io::Error>())
}

/// An error in words: the server's message with its SQLSTATE and detail, or the client's with its cause
/// (`tokio_postgres::Error`'s own text is only its kind, "db error").
pub(crate) fn describe(err: &tokio_postgres::Error) -> String {
    if let Some(db) = err.as_db_error() {
        let mut text = format!("{} (SQLSTATE {})", db.message(), db.code().code());
        if let Some(detail) = db.detail() {
            text.push_str(&format!(": {detail}"));
        }
        return text;
    }
    match std::error::Error::source(err) {
        Some(cause) => format!("{err}: {cause}"),
        None => err.to_string(),
    }
}

/// A `tokio_postgres` error of operation `what`; the [`StoreError`] keeps `err` as its source.
pub(crate) fn pg_error(err: tokio_postgres::Error, what: &str, stage: Stage<'_>) -> StoreError {
    let text = describe(&err);
    let err = Arc::new(err);
    let described = match stage {
        Stage::Opening(label) => format!("{label}: {what}: {text}"),
        Stage::Running => format!("{what}: {text}"),
    };
    if let Some(code) = err.code() {
        if let Some(error) = by_code(code.code(), caused_by(described.clone(), &err)) {
            return error;
        }
    }
    // No SQLSTATE: the connection closed, or the socket failed (refused, reset, timed out: tokio-postgres reports
    // a connect timeout as an I/O error too).
    if connection_lost(&err) {
        return StoreError::Unavailable(caused_by(described, &err));
    }
    match stage {
        Stage::Opening(label) => StoreError::Open {
            path: label.to_owned(),
            message: caused_by(format!("{what}: {text}"), &err),
        },
        Stage::Running => StoreError::Backend(caused_by(described, &err)),
    }
}

/// A stored value of operation `what` that does not convert to the type asked for (`err`, from `Row::try_get`).
pub(crate) fn decode_error(err: tokio_postgres::Error, what: &str) -> StoreError {
    let message = format!("{what}: {}", describe(&err));
    StoreError::Decode(caused_by(message, &Arc::new(err)))
}

/// An error getting a connection from the pool for operation `what`.
pub(crate) fn pool_error(err: PoolError, what: &str, stage: Stage<'_>) -> StoreError {
    let prefix = match stage {
        Stage::Opening(label) => format!("{label}: {what}"),
        Stage::Running => what.to_owned(),
    };
    match err {
        PoolError::Backend(err) => pg_error(err, what, stage),
        PoolError::PostCreateHook(deadpool_postgres::HookError::Backend(err)) => pg_error(err, what, stage),
        PoolError::PostCreateHook(deadpool_postgres::HookError::Message(message)) => match stage {
            Stage::Opening(label) => StoreError::Open {
                path: label.to_owned(),
                message: format!("{what}: {message}").into(),
            },
            Stage::Running => StoreError::Backend(format!("{prefix}: {message}").into()),
        },
        PoolError::Timeout(TimeoutType::Wait) => StoreError::Unavailable(
            format!("{prefix}: no database connection became free in time (all are busy)").into(),
        ),
        PoolError::Timeout(TimeoutType::Create) => {
            StoreError::Unavailable(format!("{prefix}: connecting to the database timed out").into())
        }
        PoolError::Timeout(TimeoutType::Recycle) => {
            StoreError::Unavailable(format!("{prefix}: checking a pooled connection timed out").into())
        }
        PoolError::Closed => StoreError::Unavailable(format!("{prefix}: the connection pool is closed").into()),
        PoolError::NoRuntimeSpecified => StoreError::Backend(format!("{prefix}: the pool has no runtime").into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_map_to_store_errors() {
        type Expect = fn(&StoreError) -> bool;
        let cases: Vec<(&str, Expect)> = vec![
            ("23505", |e| matches!(e, StoreError::Conflict(_))),
            ("23503", |e| matches!(e, StoreError::Conflict(_))),
            ("25006", |e| matches!(e, StoreError::ReadOnly(_))),
            ("53100", |e| matches!(e, StoreError::Full(_))),
            ("53300", |e| matches!(e, StoreError::Unavailable(_))),
            ("40001", |e| matches!(e, StoreError::Locked(_))),
            ("40P01", |e| matches!(e, StoreError::Locked(_))),
            ("08006", |e| matches!(e, StoreError::Unavailable(_))),
            ("57P01", |e| matches!(e, StoreError::Unavailable(_))),
            ("57P03", |e| matches!(e, StoreError::Unavailable(_))),
            ("XX001", |e| matches!(e, StoreError::Corrupt(_))),
        ];
        for (code, expected) in cases {
            let error = by_code(code, format!("do the thing ({code})").into()).expect("classified");
            assert!(expected(&error), "{code}: {error:?}");
            assert!(error.to_string().contains("do the thing"), "{error}");
        }
        assert_eq!(by_code("42P01", "x".into()), None, "undefined_table is a bug: Backend");
        assert_eq!(by_code("P0001", "x".into()), None, "raise_exception: Backend");
    }

    #[test]
    fn pool_failures_are_unavailable() {
        for timeout in [TimeoutType::Wait, TimeoutType::Create, TimeoutType::Recycle] {
            let error = pool_error(PoolError::Timeout(timeout), "load the log", Stage::Running);
            assert!(
                matches!(&error, StoreError::Unavailable(m) if m.message().starts_with("load the log")),
                "{error:?}"
            );
        }
        let error = pool_error(PoolError::Closed, "claim", Stage::Opening("postgresql://h/db"));
        assert!(
            matches!(&error, StoreError::Unavailable(m) if m.message().contains("postgresql://h/db")),
            "{error:?}"
        );
    }
}
