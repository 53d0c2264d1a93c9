//! Schema versioning: brings a database up to [`LATEST_VERSION`] by applying [`sql::MIGRATIONS`] in order.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use super::errors::sqlite_error;
use super::sql;
use crate::StoreError;

/// The schema version this build writes: the number of migrations.
pub(super) const LATEST_VERSION: i64 = sql::MIGRATIONS.len() as i64;

/// Reads the stored schema version: `None` when the database has no `schema_version` table.
fn stored_version(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    let has_table: bool = conn.query_row(sql::SCHEMA_VERSION_TABLE_EXISTS, [], |row| row.get(0))?;
    if !has_table {
        return Ok(None);
    }
    Ok(Some(
        conn.query_row(sql::SELECT_SCHEMA_VERSION, [], |row| row.get(0))
            .optional()?
            .unwrap_or(0),
    ))
}

fn newer(found: i64) -> StoreError {
    StoreError::NewerSchema {
        found,
        supported: LATEST_VERSION,
    }
}

fn not_headstart(label: &str) -> StoreError {
    StoreError::Open {
        path: label.to_owned(),
        message: "the database holds tables but no schema_version table: it is not a headstart transcript store".into(),
    }
}

/// What a database file holds, as far as headstart is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Contents {
    /// Nothing at all: headstart may create its schema.
    Empty,
    /// A headstart store (it has the `schema_version` table), of whatever version.
    Headstart,
    /// Another application's database: why it is taken for one.
    Foreign(String),
}

/// Classifies a database from its schema object count (tables, indexes, views, triggers), whether it has the
/// `schema_version` table, and the two header fields applications mark their files with. headstart sets neither
/// field, so a file without objects that carries one belongs to someone else.
pub(super) fn classify(objects: i64, has_schema_version: bool, user_version: i64, application_id: i64) -> Contents {
    if has_schema_version {
        Contents::Headstart
    } else if objects > 0 {
        Contents::Foreign(format!(
            "the database holds {objects} schema object(s) but no schema_version table: it is not a headstart \
             transcript store (another application's database?); nothing was written to it"
        ))
    } else if user_version != 0 || application_id != 0 {
        Contents::Foreign(format!(
            "the database's header carries another application's marks (application_id {application_id}, \
             user_version {user_version}) and no schema_version table: it is not a headstart transcript store; \
             nothing was written to it"
        ))
    } else {
        Contents::Empty
    }
}

/// Refuses another application's database ([`classify`]), through any connection: it only reads.
pub(super) fn refuse_foreign(conn: &Connection, label: &str) -> Result<(), StoreError> {
    let fail = |what: &'static str| move |err| sqlite_error(err, what, Some(label));
    let objects: i64 = conn
        .query_row(sql::PROBE, [], |row| row.get(0))
        .map_err(fail("list the schema objects"))?;
    let has_schema_version: bool = conn
        .query_row(sql::SCHEMA_VERSION_TABLE_EXISTS, [], |row| row.get(0))
        .map_err(fail("look for the schema_version table"))?;
    let user_version: i64 = conn
        .query_row(sql::USER_VERSION, [], |row| row.get(0))
        .map_err(fail("read the user version"))?;
    let application_id: i64 = conn
        .query_row(sql::APPLICATION_ID, [], |row| row.get(0))
        .map_err(fail("read the application id"))?;
    match classify(objects, has_schema_version, user_version, application_id) {
        Contents::Empty | Contents::Headstart => Ok(()),
        Contents::Foreign(message) => Err(StoreError::Open {
            path: label.to_owned(),
            message: message.into(),
        }),
    }
}

/// Applies the missing migrations in one `IMMEDIATE` transaction. `label` names the database in errors.
pub(super) fn migrate(conn: &mut Connection, label: &str) -> Result<(), StoreError> {
    let fail = |what: &'static str| move |err| sqlite_error(err, what, Some(label));

    // Fast path without the write lock: an up-to-date database (the common case) needs nothing.
    match stored_version(conn).map_err(fail("read the schema version"))? {
        Some(found) if found == LATEST_VERSION => return Ok(()),
        Some(found) if found > LATEST_VERSION => return Err(newer(found)),
        _ => {}
    }

    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(fail("begin the schema migration"))?;
    let found = match stored_version(&tx).map_err(fail("read the schema version"))? {
        Some(found) => found,
        None => {
            let tables: i64 = tx
                .query_row(sql::COUNT_TABLES, [], |row| row.get(0))
                .map_err(fail("list the tables"))?;
            if tables > 0 {
                return Err(not_headstart(label));
            }
            tx.execute_batch(sql::CREATE_SCHEMA_VERSION)
                .map_err(fail("create the schema_version table"))?;
            0
        }
    };
    if found > LATEST_VERSION {
        return Err(newer(found));
    }
    let applied = usize::try_from(found).map_err(|_| {
        StoreError::Corrupt(format!("{label}: schema_version holds the invalid version {found}").into())
    })?;
    for step in &sql::MIGRATIONS[applied..] {
        tx.execute_batch(step).map_err(fail("apply a schema migration"))?;
    }
    tx.execute(sql::SET_SCHEMA_VERSION, [LATEST_VERSION])
        .map_err(fail("record the schema version"))?;
    tx.commit().map_err(fail("commit the schema migration"))
}

/// Checks that a database opened read-only has exactly the schema this build reads (it cannot be migrated).
pub(super) fn check_read_only(conn: &Connection, label: &str) -> Result<(), StoreError> {
    match stored_version(conn).map_err(|err| sqlite_error(err, "read the schema version", Some(label)))? {
        Some(found) if found == LATEST_VERSION => Ok(()),
        Some(found) if found > LATEST_VERSION => Err(newer(found)),
        Some(found) => Err(StoreError::Open {
            path: label.to_owned(),
            message: format!(
                "schema version {found} is older than {LATEST_VERSION}; open it once read-write to upgrade it"
            )
            .into(),
        }),
        None => Err(StoreError::Open {
            path: label.to_owned(),
            message: "no schema_version table: not a headstart transcript store".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_empty_file_or_a_headstart_store_is_ours() {
        assert_eq!(classify(0, false, 0, 0), Contents::Empty);
        assert_eq!(classify(9, true, 0, 0), Contents::Headstart);
        let Contents::Foreign(why) = classify(2, false, 0, 0) else {
            panic!("tables without schema_version")
        };
        assert!(
            why.contains("2 schema object(s)") && why.contains("schema_version"),
            "{why}"
        );
        let Contents::Foreign(why) = classify(0, false, 0, 0x4d50_4244) else {
            panic!("another application's id")
        };
        assert!(why.contains("application_id 1297105476"), "{why}");
        assert!(
            matches!(classify(0, false, 3, 0), Contents::Foreign(_)),
            "a user version"
        );
    }
}
