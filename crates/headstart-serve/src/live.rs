//! `/sessions/{id}/events`: the session page's live updates, as server-sent events. On connecting the client
//! gets the page's parts as they are now (whatever it rendered before is replaced, so nothing written in between
//! is missed), then again each time the store changed and the session with it. Each `update` event is a JSON
//! object with the parts' HTML: `status`, `transcript`, `timeline`.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::stream::{self, Stream};
use serde_json::json;

use crate::data::SessionData;
use crate::error::ServeError;
use crate::pages::session::Parts;
use crate::state::AppState;

/// What the stream carries between events.
struct Follow {
    app: AppState,
    id: String,
    /// The session as loaded to answer the request, sent first (not loaded a second time).
    first: Option<SessionData>,
    /// The fingerprint of what was sent last.
    sent: Option<String>,
}

/// The event stream of session `id`; 404 when there is none.
pub async fn events(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ServeError> {
    let first = app.session(&id).await?;
    let follow = Follow {
        app,
        id,
        first: Some(first),
        sent: None,
    };
    let events = stream::unfold(follow, |mut follow| async move {
        loop {
            let data = match follow.first.take() {
                Some(first) => first,
                None => {
                    if follow.app.changes.changed().await.is_err() {
                        return None; // the server is shutting down
                    }
                    // A failed reload (the store busy, the session gone) waits for the next change.
                    let Ok(data) = follow.app.session(&follow.id).await else {
                        continue;
                    };
                    data
                }
            };
            let print = data.fingerprint();
            if follow.sent.as_ref() == Some(&print) {
                continue;
            }
            follow.sent = Some(print);
            let parts = Parts::of(&data);
            let payload = json!({
                "status": parts.status.into_string(),
                "transcript": parts.transcript.into_string(),
                "timeline": parts.timeline.into_string(),
            });
            let event = Event::default().event("update").data(payload.to_string());
            return Some((Ok(event), follow));
        }
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
