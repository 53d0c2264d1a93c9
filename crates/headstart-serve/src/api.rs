//! `/api/…`: the pages' data as JSON. A session is the object `headstart inspect --json` prints for it; the
//! listing is its summaries with the paging; the fleet is [`Fleet`].

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use serde_json::{json, Value};

use crate::error::ServeError;
use crate::fleet::Fleet;
use crate::params::{ListParams, PER_PAGE};
use crate::restate::turns_json;
use crate::state::AppState;

/// `/api/sessions?page=&state=`.
pub async fn sessions(
    State(app): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ServeError> {
    let params = ListParams::parse(&query)?;
    let (rows, total) = app.listing(params).await?;
    Ok(Json(json!({
        "sessions": rows,
        "total": total,
        "page": params.page,
        "pages": ListParams::pages(total),
        "per_page": PER_PAGE,
        "state": params.state.map(|state| state.as_str()),
    })))
}

/// `/api/sessions/{id}`.
pub async fn session(State(app): State<AppState>, Path(id): Path<String>) -> Result<Json<Value>, ServeError> {
    let mut session = app.session(&id).await?.to_json();
    if let Some(turns) = app.restate_turns(&id).await {
        session["restate"] = turns_json(&turns);
    }
    Ok(Json(session))
}

/// `/api/fleet`.
pub async fn fleet(State(app): State<AppState>) -> Result<Json<Fleet>, ServeError> {
    Ok(Json(Fleet::of(&app.store.sessions().await?)))
}
