//! What a request that cannot be answered gets: a status and a sentence saying why, as plain text (escaped by
//! nature: no HTML).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use headstart::store::StoreError;

/// Why a request failed.
#[derive(Debug)]
pub enum ServeError {
    /// No such session (404).
    NotFound(String),
    /// A query parameter the server does not understand (400).
    BadRequest(String),
    /// The store failed (500).
    Store(StoreError),
}

impl From<StoreError> for ServeError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NoSession(id) => ServeError::NotFound(format!("no session {id}")),
            other => ServeError::Store(other),
        }
    }
}

impl IntoResponse for ServeError {
    fn into_response(self) -> Response {
        let (status, text) = match self {
            ServeError::NotFound(text) => (StatusCode::NOT_FOUND, text),
            ServeError::BadRequest(text) => (StatusCode::BAD_REQUEST, text),
            ServeError::Store(error) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the store could not be read: {error}"),
            ),
        };
        (status, format!("{text}\n")).into_response()
    }
}
