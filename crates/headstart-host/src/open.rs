//! [`open_response`]: one response of a session opened for a host, as both packages open one: the session created
//! under the host's id when asked, the prompt's new user messages recorded before the response, and, after an
//! earlier response of the same chat, a refusal when that response's calls do not all have stored results.

use futures::Stream;
use headstart::core::{DeltaEvent, ModelError};
use headstart::store::StoreError;
use headstart::{CancellationToken, Clock, Engine, EventStream, SessionId, SystemClock, UserMessage};
use serde::Deserialize;

/// What comes before a response: the session, the user messages.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Opening {
    /// Create the session under its id first (the host named a new one, [`new_session_id`]).
    pub create: bool,
    /// The user messages to record before the response, in order.
    pub users: Vec<String>,
    /// An earlier response of the same chat came before this one (its run has ended): refuse to open when its calls
    /// do not all have stored results.
    #[serde(alias = "after_previous")]
    pub after_previous: bool,
}

/// Why a response did not open.
#[derive(Debug)]
pub enum OpenError {
    /// The store failed.
    Store(StoreError),
    /// The previous response's calls lack stored results (a write of them failed).
    Unfinished {
        /// The session.
        session: SessionId,
        /// The calls without a result.
        calls: Vec<String>,
    },
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Store(error) => error.fmt(f),
            OpenError::Unfinished { session, calls } => write!(
                f,
                "session {session}: the previous response's calls {} have no stored result (a write of them \
                 failed); resume the session before going on",
                calls.join(", ")
            ),
        }
    }
}

impl std::error::Error for OpenError {}

impl From<StoreError> for OpenError {
    fn from(error: StoreError) -> Self {
        OpenError::Store(error)
    }
}

/// A fresh session id (a UUIDv7, as the stores make them), at once: the first response opened with
/// [`Opening::create`] creates the session, so the first request need not wait for the store.
pub fn new_session_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Opens the next response of `session` over `deltas`, after what `opening` asks; the engine's events.
pub async fn open_response<S>(
    engine: &Engine,
    session: &SessionId,
    opening: Opening,
    deltas: S,
    cancel: CancellationToken,
) -> Result<EventStream, OpenError>
where
    S: Stream<Item = Result<DeltaEvent, ModelError>> + Send + 'static,
{
    let store = engine.store();
    if opening.after_previous {
        let unfinished = store.unfinished_calls(session).await?;
        if !unfinished.is_empty() {
            return Err(OpenError::Unfinished {
                session: session.clone(),
                calls: unfinished.into_iter().map(|call| call.call.id).collect(),
            });
        }
    }
    if opening.create {
        store.create_session_with_id(session, SystemClock.now_us()).await?;
    }
    for text in opening.users {
        store
            .append_user(session, &UserMessage::new(text), SystemClock.now_us())
            .await?;
    }
    Ok(engine.wrap_next(session, deltas, cancel).await?)
}
