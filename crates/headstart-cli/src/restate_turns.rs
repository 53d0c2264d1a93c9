//! The sessions' turns as a Restate server sees them, read from its admin API for `inspect --restate` and `serve
//! --restate`; without the `restate` feature, a clear refusal.

use std::collections::HashMap;
use std::sync::Arc;

use headstart_serve::restate::{RestateTurn, RestateTurns};

/// The turns a server knows, by session, in the order the server lists each session's first turn.
#[derive(Debug, Default)]
pub struct SessionTurns {
    order: Vec<String>,
    turns: HashMap<String, Vec<RestateTurn>>,
}

impl SessionTurns {
    /// Groups `turns` (oldest first) by session.
    fn of(turns: Vec<(String, RestateTurn)>) -> Self {
        let mut grouped = SessionTurns::default();
        for (session, turn) in turns {
            match grouped.turns.get_mut(&session) {
                Some(list) => list.push(turn),
                None => {
                    grouped.order.push(session.clone());
                    grouped.turns.insert(session, vec![turn]);
                }
            }
        }
        grouped
    }

    /// Whether the server knows no turn.
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    /// Takes `session`'s turns out; none when the server kept none.
    pub fn take(&mut self, session: &str) -> Vec<RestateTurn> {
        self.turns.remove(session).unwrap_or_default()
    }

    /// The sessions not taken, with their turns, in order.
    pub fn rest(mut self) -> Vec<(String, Vec<RestateTurn>)> {
        let order = std::mem::take(&mut self.order);
        order
            .into_iter()
            .filter_map(|session| {
                let turns = self.turns.remove(&session)?;
                Some((session, turns))
            })
            .collect()
    }
}

/// The turns of every session the server at `admin` knows (or of `only`), by session.
pub async fn by_session(admin: &str, only: Option<&str>) -> Result<SessionTurns, String> {
    Ok(SessionTurns::of(imp::all(admin, only).await?))
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
    use headstart_serve::restate::{RestateCall, RestateTurn, RestateTurns};

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
            failing_calls: turn
                .failing_calls
                .into_iter()
                .map(|call| RestateCall {
                    invocation: call.invocation,
                    status: call.status,
                    retries: call.retries,
                    last_failure: call.last_failure,
                })
                .collect(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(invocation: &str) -> RestateTurn {
        RestateTurn {
            invocation: invocation.to_owned(),
            status: "completed".to_owned(),
            retries: 0,
            last_failure: None,
            created_at: None,
            failing_calls: Vec::new(),
        }
    }

    #[test]
    fn turns_are_grouped_by_session_and_the_rest_keeps_the_servers_order() {
        let mut grouped = SessionTurns::of(vec![
            ("b".to_owned(), turn("inv_1")),
            ("a".to_owned(), turn("inv_2")),
            ("b".to_owned(), turn("inv_3")),
            ("c".to_owned(), turn("inv_4")),
        ]);
        let b: Vec<String> = grouped.take("b").into_iter().map(|turn| turn.invocation).collect();
        assert_eq!(b, ["inv_1", "inv_3"]);
        assert!(grouped.take("nowhere").is_empty());
        let rest: Vec<String> = grouped.rest().into_iter().map(|(session, _)| session).collect();
        assert_eq!(rest, ["a", "c"]);
    }
}
