//! The HTML routes: each reads what it shows through [`AppState`] and renders one page.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use maud::Markup;

use crate::error::ServeError;
use crate::fleet::Fleet;
use crate::pages::{fleet::fleet_page, listing::listing_page, session::session_page};
use crate::params::ListParams;
use crate::state::AppState;

/// `/`.
pub async fn listing(
    State(app): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Markup, ServeError> {
    let params = ListParams::parse(&query)?;
    let (rows, total) = app.listing(params).await?;
    Ok(listing_page(params, &rows, total))
}

/// `/sessions/{id}`.
pub async fn session(State(app): State<AppState>, Path(id): Path<String>) -> Result<Markup, ServeError> {
    let data = app.session(&id).await?;
    Ok(session_page(&data, app.restate_turns(&id).await.as_ref()))
}

/// `/fleet`.
pub async fn fleet(State(app): State<AppState>) -> Result<Markup, ServeError> {
    Ok(fleet_page(&Fleet::of(&app.store.sessions().await?)))
}
