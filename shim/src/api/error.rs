//! Every failure the HTTP layer answers, and its one JSON shape:
//! `{"error": {"code": <status>, "message": "...", "problems": [...]?}}`. This includes axum's
//! own rejections (unknown route, wrong method, unreadable path, query or body), so a client
//! never sees a plain-text error.

use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::body::{BodyRefusal, refusal_in};
use super::caps::Refusal;
use crate::error_chain;
use crate::model::ServiceError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 401: no credentials, or not in the `Bearer <token>` form.
    #[error("missing or malformed Authorization header: expected `Bearer <token>`")]
    Unauthenticated,
    /// 401: the server's own token, replaced by a rotation whose grace period is over; its
    /// agent re-reads its token file on a 401.
    #[error("the token was replaced (server rotate-token) and its grace period is over; use the new one")]
    TokenExpired,
    /// 403: credentials given, but not ones that open this resource.
    #[error("the token does not grant access to {resource}")]
    Forbidden { resource: String },
    /// 403: a web view POST that another site's page may have made (`Sec-Fetch-Site`, `Origin`).
    #[error("cross-site request refused: {reason}")]
    CrossSite { reason: String },
    /// 429 with `Retry-After`: over a rate or a cap (the message names which, and the limit).
    #[error("{message}")]
    TooManyRequests { message: String, retry_after_secs: u64 },
    /// 404.
    #[error("{what} not found")]
    NotFound { what: String },
    /// 405.
    #[error("method {method} is not allowed here")]
    MethodNotAllowed { method: Method },
    /// 400: the request is unreadable or breaks a rule of the API.
    #[error("{message}")]
    BadRequest { message: String },
    /// 413.
    #[error("request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// An axum rejection with a status other than the above (kept as axum chose it).
    #[error("{message}")]
    Rejected { status: StatusCode, message: String },
    /// 503 (429 for a capability token's bodies): over one of the caps of `limits`/`budget`;
    /// the client retries after `Retry-After`.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The client closed the connection while its request was held; nobody reads the answer
    /// (499, as nginx logs it).
    #[error("the client closed the connection")]
    ClientGone,
    /// Whatever the engine said; see [`ApiError::status`] for the mapping.
    #[error(transparent)]
    Service(#[from] ServiceError),
}

/// Seconds a client waits before retrying a 503 for an unreachable database: a restarting
/// PostgreSQL takes about that long.
const UNAVAILABLE_RETRY_AFTER: &str = "2";
/// Seconds before retrying a request refused for a cap: others' requests end within that.
const REFUSED_RETRY_AFTER: &str = "1";

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthenticated | ApiError::TokenExpired => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden { .. } | ApiError::CrossSite { .. } => StatusCode::FORBIDDEN,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::NotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Rejected { status, .. } => *status,
            ApiError::Refused(Refusal::TokenBodies { .. }) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Refused(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::ClientGone => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
            ApiError::Service(error) => match error {
                ServiceError::NotFound { .. } => StatusCode::NOT_FOUND,
                ServiceError::Conflict { .. } | ServiceError::InUse { .. } => StatusCode::CONFLICT,
                ServiceError::Invalid { .. } | ServiceError::Template { .. } => StatusCode::BAD_REQUEST,
                ServiceError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
                ServiceError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            },
        }
    }

    /// A failed read of the request body: 413 over the route's limit (`limit` when axum's own
    /// check refused it), 408 when the client stalled or was too slow, 503 when the body budget
    /// had no room, else 400 (client went away, broken chunking).
    pub fn from_body_rejection(rejection: BytesRejection, limit: usize) -> ApiError {
        match refusal_in(&rejection) {
            Some(BodyRefusal::TooLarge { limit }) => ApiError::PayloadTooLarge { limit },
            Some(refusal @ (BodyRefusal::TooSlow { .. } | BodyRefusal::Stalled { .. })) => {
                ApiError::Rejected { status: StatusCode::REQUEST_TIMEOUT, message: refusal.to_string() }
            }
            Some(BodyRefusal::Busy(refusal)) => ApiError::Refused(refusal),
            None if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge { limit },
            None => ApiError::Rejected { status: rejection.status(), message: rejection.body_text() },
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::BadRequest { message: message.into() }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> ApiError {
        ApiError::Rejected { status: rejection.status(), message: rejection.body_text() }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> ApiError {
        ApiError::Rejected { status: rejection.status(), message: rejection.body_text() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if let ApiError::Service(ServiceError::Store(source)) = &self {
            tracing::error!(error = %error_chain(source.as_ref()), "storage failure while answering a request");
        } else if let ApiError::Service(ServiceError::Unavailable(source)) = &self {
            tracing::warn!(error = %error_chain(source.as_ref()), "database unavailable while answering a request");
        } else if status.is_server_error() && !matches!(self, ApiError::Rejected { .. } | ApiError::Refused(_)) {
            // (A `Rejected` or `Refused` 5xx is a refusal chosen on purpose, such as a limit's 503.)
            tracing::error!(error = %self, "internal error while answering a request");
        }
        let mut error = json!({"code": status.as_u16(), "message": self.to_string()});
        if let ApiError::Service(ServiceError::Template { problems }) = &self {
            error["problems"] = json!(problems);
        }
        let mut response = (status, axum::Json(json!({ "error": error }))).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if matches!(self, ApiError::Service(ServiceError::Unavailable(_))) {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static(UNAVAILABLE_RETRY_AFTER));
        }
        if matches!(self, ApiError::Refused(_)) {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static(REFUSED_RETRY_AFTER));
        }
        if let ApiError::TooManyRequests { retry_after_secs, .. } = &self {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
        }
        response
    }
}

/// The fallback for paths no route matches.
pub(super) async fn no_route() -> ApiError {
    ApiError::NotFound { what: "route".to_string() }
}

/// The fallback for a known path with a method it does not serve (axum adds `Allow`).
pub(super) async fn method_not_allowed(method: Method) -> ApiError {
    ApiError::MethodNotAllowed { method }
}
