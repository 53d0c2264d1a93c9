//! The sessions' turns as a Restate server sees them, read from its admin API for `inspect --restate` and `serve
//! --restate`; without the `restate` feature, a clear refusal.

use std::sync::Arc;

use headstart_serve::restate::{RestateTurn, RestateTurns};

/// The turns of every session the server at `admin` knows (or of `only`), grouped by session in the order the
/// server lists their first turn.
pub async fn by_session(admin: &str, only: Option<&str>) -> Result<Vec<(String, Vec<RestateTurn>)>, String> {
    let turns = imp::all(admin, only).await?;
    let mut sessions: Vec<(String, Vec<RestateTurn>)> = Vec::new();
    for (session, turn) in turns {
        match sessions.iter_mut().find(|(id, _)| *id == session) {
            Some((_, list)) => list.push(turn),
            None => sessions.push((session, vec![turn])),
        }
    }
    Ok(sessions)
}

/// What `serve --restate ADMIN_URL` asks for each session page.
pub fn source(admin: &str) -> Result<Arc<dyn RestateTurns>, String> {
    imp::source(admin)
}

#[cfg(feature = "restate")]
mod imp {
    use std::sync::Arc;

    use futures::future::BoxFuture;
    use headstart_restate::{RestateClient, TurnStatus};
    use headstart_serve::restate::{RestateTurn, RestateTurns};

    pub async fn all(admin: &str, only: Option<&str>) -> Result<Vec<(String, RestateTurn)>, String> {
        let turns = RestateClient::new(admin)
            .turns(only)
            .await
            .map_err(|error| error.to_string())?;
        Ok(turns
            .into_iter()
            .map(|turn| (turn.session.clone(), shown(turn)))
            .collect())
    }

    pub fn source(admin: &str) -> Result<Arc<dyn RestateTurns>, String> {
        Ok(Arc::new(Admin(RestateClient::new(admin))))
    }

    /// A Restate server's admin API.
    struct Admin(RestateClient);

    impl RestateTurns for Admin {
        fn turns<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<Vec<RestateTurn>, String>> {
            Box::pin(async move {
                let turns = self.0.turns(Some(session)).await.map_err(|error| error.to_string())?;
                Ok(turns.into_iter().map(shown).collect())
            })
        }
    }

    fn shown(turn: TurnStatus) -> RestateTurn {
        RestateTurn {
            invocation: turn.invocation,
            status: turn.status,
            retries: turn.retries,
            last_failure: turn.last_failure,
            created_at: turn.created_at,
        }
    }
}

#[cfg(not(feature = "restate"))]
mod imp {
    use std::sync::Arc;

    use headstart_serve::restate::{RestateTurn, RestateTurns};

    const NOT_BUILT: &str = "--restate needs a binary built with the `restate` feature";

    pub async fn all(_admin: &str, _only: Option<&str>) -> Result<Vec<(String, RestateTurn)>, String> {
        Err(NOT_BUILT.to_owned())
    }

    pub fn source(_admin: &str) -> Result<Arc<dyn RestateTurns>, String> {
        Err(NOT_BUILT.to_owned())
    }
}
