//! Failures of dashboard requests: why ([`DashError`]), answered as JSON
//! ([`ApiError`]) or as a page ([`PageError`], drawn by `html`).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use leasehold_core::Error;
use serde_json::json;

use crate::failure::{classify, Failure};

/// A handler's result.
pub(crate) type Res<T> = Result<T, DashError>;

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DashError {
    /// 400: the request cannot work.
    BadRequest(String),
    /// 401: an action without the right token.
    Unauthorized(String),
    /// 403: actions are disabled (no token configured).
    Disabled,
    /// 403: a form posted with a session but without its CSRF token.
    Csrf(String),
    /// 404: no such job or page.
    NotFound(String),
    /// 409: the state model refuses the move.
    Refused(String),
    /// 503: Redis cannot be reached.
    Unavailable(String),
    /// 500: anything else.
    Internal(String),
}

/// The message a 403 gives.
pub(crate) const DISABLED: &str =
    "actions are disabled: this dashboard was started without a token; \
     restart it with --token or LEASEHOLD_DASHBOARD_TOKEN to allow cancel, retry, resolve and enqueue";

impl DashError {
    /// From a core error, with the Redis URL for messages.
    pub(crate) fn from_core(shown_url: &str, e: Error) -> DashError {
        match classify(shown_url, e) {
            Failure::Usage(m) => DashError::BadRequest(m),
            Failure::UnknownJob(m) => DashError::NotFound(m),
            Failure::Refused(m) => DashError::Refused(m),
            Failure::Unreachable(m) | Failure::AuthFailed(m) => DashError::Unavailable(m),
            Failure::Other(m) => DashError::Internal(m),
            // classify never gives it (only a write to stdout does)
            Failure::Closed | Failure::Interrupted => {
                DashError::Internal("stdout closed or interrupted".into())
            }
        }
    }

    /// The HTTP status.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            DashError::BadRequest(_) => StatusCode::BAD_REQUEST,
            DashError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            DashError::Disabled | DashError::Csrf(_) => StatusCode::FORBIDDEN,
            DashError::NotFound(_) => StatusCode::NOT_FOUND,
            DashError::Refused(_) => StatusCode::CONFLICT,
            DashError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            DashError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A short machine-readable kind.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            DashError::BadRequest(_) => "bad_request",
            DashError::Unauthorized(_) => "unauthorized",
            DashError::Disabled => "actions_disabled",
            DashError::Csrf(_) => "csrf",
            DashError::NotFound(_) => "not_found",
            DashError::Refused(_) => "refused",
            DashError::Unavailable(_) => "redis_unavailable",
            DashError::Internal(_) => "internal",
        }
    }

    /// The message for humans.
    pub(crate) fn message(&self) -> &str {
        match self {
            DashError::BadRequest(m)
            | DashError::Unauthorized(m)
            | DashError::Csrf(m)
            | DashError::NotFound(m)
            | DashError::Refused(m)
            | DashError::Unavailable(m)
            | DashError::Internal(m) => m,
            DashError::Disabled => DISABLED,
        }
    }

    /// A short title for the error page.
    pub(crate) fn title(&self) -> &'static str {
        match self {
            DashError::BadRequest(_) => "Bad request",
            DashError::Unauthorized(_) => "Not authorised",
            DashError::Disabled => "Actions disabled",
            DashError::Csrf(_) => "Form expired",
            DashError::NotFound(_) => "Not found",
            DashError::Refused(_) => "Refused",
            DashError::Unavailable(_) => "Redis unavailable",
            DashError::Internal(_) => "Error",
        }
    }

    /// Logs what the operator of the dashboard must see (Redis down, a bug).
    pub(super) fn log(&self) {
        if matches!(self, DashError::Internal(_) | DashError::Unavailable(_)) {
            eprintln!("leasehold dashboard: {}", self.message());
        }
    }

    /// `resp` with this failure's status and headers.
    pub(super) fn finish(&self, mut resp: Response) -> Response {
        *resp.status_mut() = self.status();
        if let DashError::Unauthorized(_) = self {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"leasehold dashboard\""),
            );
        }
        if let DashError::Unavailable(_) = self {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
        }
        resp
    }
}

/// A failure answered as JSON: `{"error": kind, "message": ..., "status": code}`.
#[derive(Debug)]
pub(crate) struct ApiError(pub DashError);

impl From<DashError> for ApiError {
    fn from(e: DashError) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.0.log();
        let body = axum::Json(json!({
            "error": self.0.kind(),
            "message": self.0.message(),
            "status": self.0.status().as_u16(),
        }));
        self.0.finish(body.into_response())
    }
}

/// A failure answered as an HTML page.
#[derive(Debug)]
pub(crate) struct PageError(pub DashError);

impl From<DashError> for PageError {
    fn from(e: DashError) -> Self {
        PageError(e)
    }
}
