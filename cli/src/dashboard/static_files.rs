//! The dashboard's own static files: its style sheet, its script (the live
//! refresh of `data-live` parts), and an empty favicon. (The charts' files
//! are `charts`'.)

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::state::Shared;

/// The routes of the static files.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/static/app.css", get(app_css))
        .route("/static/app.js", get(app_js))
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
}

const APP_CSS: &str = include_str!("assets/app.css");
const APP_JS: &str = include_str!("assets/app.js");

/// `GET /static/app.css`.
async fn app_css() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        APP_CSS,
    )
        .into_response()
}

/// `GET /static/app.js`.
async fn app_js() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        APP_JS,
    )
        .into_response()
}
