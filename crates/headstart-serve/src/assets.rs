//! The stylesheet and the live script, embedded in the binary: no build step, no CDN, works offline.

use axum::http::header;
use axum::response::IntoResponse;

/// `/assets/style.css`.
pub async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../assets/style.css"),
    )
}

/// `/assets/live.js`.
pub async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../assets/live.js"),
    )
}
