//! How an operation runs: on its own tokio task, in one transaction of its kind on a pooled connection.

use std::sync::Arc;

use deadpool_postgres::Transaction;
use headstart_store::backend;
use headstart_store::{Durability, StoreError};
use tokio_postgres::IsolationLevel;

use super::PgStore;
use crate::errors::{connection_lost, pg_error, pool_error, Stage};
use crate::metrics;
use crate::ops::{Access, OpFuture};
use crate::sql;

impl PgStore {
    /// Runs `op` in a transaction of kind `access` on a pooled connection, on its own task (see the design notes:
    /// a dropped future never abandons a transaction half-way), and commits it. `what` names the operation in
    /// errors.
    pub(super) async fn run<T, F>(&self, what: String, access: Access, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a Transaction<'a>, &'a str) -> OpFuture<'a, T> + Send + 'static,
    {
        self.run_announcing(what, access, None, op).await
    }

    /// [`run`](Self::run), then, once committed, `announcement` on the queue's channel (see the design notes on
    /// wake-ups), from the same connection. A notification that fails is dropped: it is a hint, and the operation
    /// succeeded.
    pub(super) async fn run_announcing<T, F>(
        &self,
        what: String,
        access: Access,
        announcement: Option<String>,
        op: F,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> FnOnce(&'a Transaction<'a>, &'a str) -> OpFuture<'a, T> + Send + 'static,
    {
        if self.inner.read_only && access != Access::Read {
            return Err(backend::read_only(&self.inner.label, &what));
        }
        let inner = Arc::clone(&self.inner);
        let task = tokio::spawn(async move {
            let what = what.as_str();
            let fail = |err: tokio_postgres::Error| pg_error(err, what, Stage::Running);
            let mut op = Some(op);
            // A pooled connection the server has dropped since (a restart, an administrator) is found out only
            // when used: its BEGIN fails. Nothing was done then, so the next connection is tried; each failure
            // removes a dead connection from the pool, so this ends.
            let mut lost = 0;
            loop {
                let mut client = inner
                    .pool
                    .get()
                    .await
                    .map_err(|err| pool_error(err, what, Stage::Running))?;
                let value = {
                    let builder = client.build_transaction();
                    let begun = match access {
                        Access::Read => builder.isolation_level(IsolationLevel::RepeatableRead).read_only(true),
                        Access::Write | Access::WriteRelaxable => {
                            builder.isolation_level(IsolationLevel::ReadCommitted)
                        }
                    }
                    .start()
                    .await;
                    metrics::sent(1);
                    let tx = match begun {
                        Ok(tx) => tx,
                        Err(err) if connection_lost(&err) && lost < inner.pool.status().max_size => {
                            lost += 1;
                            continue;
                        }
                        Err(err) => return Err(fail(err)),
                    };
                    if access == Access::WriteRelaxable && inner.durability == Durability::Normal {
                        metrics::sent(1);
                        tx.batch_execute(sql::RELAX_COMMIT).await.map_err(fail)?;
                    }
                    let Some(op) = op.take() else {
                        return Err(StoreError::Backend(
                            format!("{what}: internal error: the operation ran twice").into(),
                        ));
                    };
                    // On error, dropping the transaction rolls it back before the connection is reused.
                    let value = op(&tx, what).await?;
                    metrics::sent(1);
                    tx.commit().await.map_err(fail)?;
                    value
                };
                if let Some(payload) = &announcement {
                    if let Ok(notify) = client.prepare_cached(sql::NOTIFY).await {
                        metrics::sent(1);
                        let _ = client.execute(&notify, &[payload]).await;
                    }
                }
                return Ok(value);
            }
        });
        match task.await {
            Ok(outcome) => outcome,
            Err(err) if err.is_panic() => Err(StoreError::Backend("a store operation panicked".into())),
            Err(err) => Err(StoreError::Backend(
                format!("a store operation did not run: {err}").into(),
            )),
        }
    }
}
