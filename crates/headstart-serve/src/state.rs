//! What every handler reads: the store, and the change counter the live pages wait on.

use std::sync::Arc;

use headstart::store::{SessionInfo, SessionQueue, SessionsPage};
use tokio::sync::watch;

use crate::data::SessionData;
use crate::error::ServeError;
use crate::params::ListParams;
use crate::restate::{RestateTurns, Turns};
use crate::summary::Summary;

/// The handlers' shared state.
#[derive(Clone)]
pub struct AppState {
    /// The store, opened read-only.
    pub store: Arc<dyn SessionQueue>,
    /// Moves when the store may have changed (see `changes`).
    pub changes: watch::Receiver<u64>,
    /// Where sessions' turns on Restate are read, when shown.
    pub restate: Option<Arc<dyn RestateTurns>>,
}

impl AppState {
    /// The summaries of one page of the listing, and the number of matching sessions.
    pub async fn listing(&self, params: ListParams) -> Result<(Vec<Summary>, u64), ServeError> {
        let SessionsPage { sessions, total } = self.store.sessions_page(&params.query()).await?;
        let mut rows = Vec::with_capacity(sessions.len());
        for info in sessions {
            rows.push(Summary::of(&self.load(info).await?));
        }
        Ok((rows, total))
    }

    /// Session `id` with its records; 404 when there is none.
    pub async fn session(&self, id: &str) -> Result<SessionData, ServeError> {
        SessionData::find(self.store.as_ref(), &id.into())
            .await?
            .ok_or_else(|| ServeError::NotFound(format!("no session {id}")))
    }

    /// The turns of session `id` on Restate; `None` when the server was not asked to show them.
    pub async fn restate_turns(&self, id: &str) -> Option<Turns> {
        match &self.restate {
            Some(restate) => Some(restate.turns(id).await),
            None => None,
        }
    }

    async fn load(&self, info: SessionInfo) -> Result<SessionData, ServeError> {
        Ok(SessionData::load(self.store.as_ref(), info).await?)
    }
}
