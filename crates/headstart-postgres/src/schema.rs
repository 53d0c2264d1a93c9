//! Schema versioning: brings a database up to [`LATEST_VERSION`] by applying [`sql::MIGRATIONS`] in order.

use deadpool_postgres::Client;
use headstart_store::StoreError;

use crate::errors::{pg_error, Stage};
use crate::sql;

/// The schema version this build writes: the number of migrations applied to a database it has opened.
pub const LATEST_VERSION: i64 = sql::MIGRATIONS.len() as i64;

/// Reads the stored schema version: `None` when there is no `schema_version` table.
async fn stored_version<C: tokio_postgres::GenericClient>(client: &C, label: &str) -> Result<Option<i64>, StoreError> {
    let fail = |what: &'static str| move |err: tokio_postgres::Error| pg_error(err, what, Stage::Opening(label));
    let exists: bool = client
        .query_one(sql::SCHEMA_VERSION_TABLE_EXISTS, &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(fail("read the schema version"))?;
    if !exists {
        return Ok(None);
    }
    let version = client
        .query_opt(sql::SELECT_SCHEMA_VERSION, &[])
        .await
        .map_err(fail("read the schema version"))?
        .map(|row| row.try_get::<_, i64>(0))
        .transpose()
        .map_err(fail("read the schema version"))?;
    Ok(Some(version.unwrap_or(0)))
}

/// Checks, changing nothing, that the database holds exactly the schema this build reads (a read-only handle
/// neither creates nor upgrades it). `label` names the database in errors.
pub(crate) async fn check<C: tokio_postgres::GenericClient>(client: &C, label: &str) -> Result<(), StoreError> {
    let found = stored_version(client, label).await?;
    let message = match found {
        Some(found) if found == LATEST_VERSION => return Ok(()),
        Some(found) if found > LATEST_VERSION => return Err(newer(found)),
        Some(found) => format!(
            "the store's schema is version {found}, older than this build's {LATEST_VERSION}: connect for writing \
             once (a worker does) to upgrade it"
        ),
        None => {
            "there is no headstart store in this database yet (`headstart submit` or a worker creates it)".to_owned()
        }
    };
    Err(StoreError::Open {
        path: label.to_owned(),
        message: message.into(),
    })
}

fn newer(found: i64) -> StoreError {
    StoreError::NewerSchema {
        found,
        supported: LATEST_VERSION,
    }
}

/// Applies the missing migrations in one transaction, under an advisory lock so that workers starting together
/// migrate once. `label` names the database in errors.
pub(crate) async fn migrate(client: &mut Client, label: &str) -> Result<(), StoreError> {
    let fail = |what: &'static str| move |err: tokio_postgres::Error| pg_error(err, what, Stage::Opening(label));

    // Fast path without the lock: an up-to-date database (the common case) needs nothing.
    match stored_version(&***client, label).await? {
        Some(found) if found == LATEST_VERSION => return Ok(()),
        Some(found) if found > LATEST_VERSION => return Err(newer(found)),
        _ => {}
    }

    let tx = client.transaction().await.map_err(fail("begin the schema migration"))?;
    tx.batch_execute(sql::LOCK_MIGRATIONS)
        .await
        .map_err(fail("wait for other processes' schema migrations"))?;
    let found = match stored_version(&*tx, label).await? {
        Some(found) => found,
        None => {
            let tables: i64 = tx
                .query_one(sql::COUNT_TABLES, &[])
                .await
                .and_then(|row| row.try_get(0))
                .map_err(fail("list the tables"))?;
            if tables > 0 {
                return Err(StoreError::Open {
                    path: label.to_owned(),
                    message: format!(
                        "the schema {} holds tables but no schema_version table: it is not a headstart transcript \
                         store",
                        sql::SCHEMA
                    )
                    .into(),
                });
            }
            tx.batch_execute(sql::CREATE_SCHEMA_VERSION)
                .await
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
        tx.batch_execute(step).await.map_err(fail("apply a schema migration"))?;
    }
    tx.execute(sql::SET_SCHEMA_VERSION, &[&LATEST_VERSION])
        .await
        .map_err(fail("record the schema version"))?;
    tx.commit().await.map_err(fail("commit the schema migration"))
}
