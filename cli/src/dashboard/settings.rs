//! `GET /settings/time?zone=utc|local`: the operator's choice of clock for
//! every time on the pages, kept in a cookie.

use axum::extract::Query;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use super::guard::ZONE_COOKIE;
use super::state::Shared;

/// The route of the clock setting.
pub(super) fn routes() -> Router<Shared> {
    Router::new().route("/settings/time", get(time_setting))
}

/// `?zone=utc|local&back=/path` of `GET /settings/time`.
#[derive(Debug, Default, serde::Deserialize)]
struct ZoneParams {
    zone: Option<String>,
    back: Option<String>,
}

/// `GET /settings/time?zone=utc|local`: remembers the operator's clock in a
/// cookie (a display preference: it changes nothing in Redis) and goes back
/// to the page it came from (a path on this dashboard only).
async fn time_setting(Query(p): Query<ZoneParams>) -> Response {
    let zone = match p.zone.as_deref() {
        Some("local") => "local",
        Some("utc") => "utc",
        other => {
            return (
                StatusCode::BAD_REQUEST,
                format!("zone {other:?} is not utc or local\n"),
            )
                .into_response()
        }
    };
    let back = p
        .back
        .filter(|b| b.starts_with('/') && !b.starts_with("//") && !b.contains('\\'))
        .unwrap_or_else(|| "/".into());
    let mut resp = Redirect::to(&back).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{ZONE_COOKIE}={zone}; Path=/; SameSite=Strict; Max-Age=31536000"
    )) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}
