//! The listing's query parameters (`?page=2&state=running`), checked with a clear answer for anything else: a
//! bad parameter is a 400 that names it, never a silent first page.

use std::collections::HashMap;

use headstart::store::{SessionState, SessionsQuery};

use crate::error::ServeError;

/// Sessions on one page of the listing.
pub const PER_PAGE: u64 = 50;

/// The highest page number accepted (50 million sessions).
const MAX_PAGE: u64 = 1_000_000;

/// The listing's parameters, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListParams {
    /// The page, from 1.
    pub page: u64,
    /// Only sessions in this state.
    pub state: Option<SessionState>,
}

impl ListParams {
    /// Reads `page` and `state` from the query's parameters; any other parameter is refused (`token` is the
    /// token rule's, removed before this).
    pub fn parse(query: &HashMap<String, String>) -> Result<ListParams, ServeError> {
        if let Some(unknown) = query.keys().find(|key| !matches!(key.as_str(), "page" | "state")) {
            return Err(ServeError::BadRequest(format!(
                "unknown parameter {unknown:?}: the listing takes page (a number from 1) and state"
            )));
        }
        let page = match query.get("page").map(String::as_str) {
            None | Some("") => 1,
            Some(text) => match text.parse::<u64>() {
                Ok(page) if (1..=MAX_PAGE).contains(&page) => page,
                _ => {
                    return Err(ServeError::BadRequest(format!(
                        "page must be a whole number from 1 to {MAX_PAGE}, not {text:?}"
                    )))
                }
            },
        };
        let state = match query.get("state").map(String::as_str) {
            None | Some("" | "all") => None,
            Some(text) => Some(SessionState::parse(text).ok_or_else(|| {
                ServeError::BadRequest(format!(
                    "state must be one of all, unqueued, pending, running, completed, failed, not {text:?}"
                ))
            })?),
        };
        Ok(ListParams { page, state })
    }

    /// The store query for this page.
    pub fn query(&self) -> SessionsQuery {
        SessionsQuery {
            state: self.state,
            offset: (self.page - 1) * PER_PAGE,
            limit: PER_PAGE,
        }
    }

    /// How many pages `total` sessions fill (at least one, empty).
    pub fn pages(total: u64) -> u64 {
        total.div_ceil(PER_PAGE).max(1)
    }
}
