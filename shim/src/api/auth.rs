//! Who may call what: the admin bearer token (compared by hash, in constant time) for the
//! management routes, and a server's own bearer token for its metadata (its previous one, after
//! a rotation, during the grace period). Capability tokens in
//! signal and os-collect-config URLs are checked by the engine's lookup, after a cheap shape
//! check here.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};

use super::{ApiError, AppState};
use crate::model::Service;
use crate::token::{constant_time_eq, hash_token, is_well_formed};

/// The token of an `Authorization: Bearer <token>` header; 401 when it is missing or in
/// another form.
pub(super) fn bearer_token(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = headers.get(header::AUTHORIZATION).ok_or(ApiError::Unauthenticated)?;
    let text = value.to_str().map_err(|_| ApiError::Unauthenticated)?;
    let (scheme, token) = text.trim().split_once(' ').ok_or(ApiError::Unauthenticated)?;
    let token = token.trim_start();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() || token.contains(char::is_whitespace) {
        return Err(ApiError::Unauthenticated);
    }
    Ok(token)
}

/// Proof that the request carries the admin token. As an extractor it runs before the body
/// is read, so an unauthenticated client cannot make the server buffer anything.
pub(super) struct Admin;

impl<S: Service> FromRequestParts<AppState<S>> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState<S>) -> Result<Admin, ApiError> {
        let token = bearer_token(&parts.headers)?;
        if constant_time_eq(hash_token(token).as_bytes(), state.config.admin_token_hash.as_bytes()) {
            Ok(Admin)
        } else {
            Err(ApiError::Forbidden { resource: "the admin API".to_string() })
        }
    }
}

/// Proof that the request may read the metrics: the metrics token (`serve
/// --metrics-token-file`) or the admin token.
pub(super) struct MetricsReader;

impl<S: Service> FromRequestParts<AppState<S>> for MetricsReader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState<S>) -> Result<MetricsReader, ApiError> {
        let hash = hash_token(bearer_token(&parts.headers)?);
        let admin = constant_time_eq(hash.as_bytes(), state.config.admin_token_hash.as_bytes());
        let reader = state
            .config
            .metrics_token_hash
            .as_ref()
            .is_some_and(|own| constant_time_eq(hash.as_bytes(), own.as_bytes()));
        if admin || reader {
            Ok(MetricsReader)
        } else {
            Err(ApiError::Forbidden { resource: "the metrics".to_string() })
        }
    }
}

/// 401 without a bearer token, or with `server`'s own token replaced by a rotation whose grace
/// is over (so its agent re-reads its token file, see docs/security.md); 403 unless the token is
/// `server`'s own. The token, and when its grace ends if it is a replaced one.
pub(super) async fn authorize_server<S: Service>(
    state: &AppState<S>,
    headers: &HeaderMap,
    server: &str,
) -> Result<ServerCredential, ApiError> {
    let token = bearer_token(headers)?;
    let grace_ends_at = check_server_token(state, token, server).await?;
    Ok(ServerCredential { token: token.to_string(), grace_ends_at })
}

/// A server token that opened its server's metadata.
pub(super) struct ServerCredential {
    pub(super) token: String,
    /// Unix milliseconds, for a token replaced by a rotation: after it the token gets 401.
    pub(super) grace_ends_at: Option<u64>,
}

/// Whether `token` is `server`'s (as `authorize_server`), checked again for a held long-poll
/// before it answers with a newer document.
pub(super) async fn check_server_token<S: Service>(
    state: &AppState<S>,
    token: &str,
    server: &str,
) -> Result<Option<u64>, ApiError> {
    let owner = if is_well_formed(token) { state.service.token_owner(token).await? } else { None };
    match owner {
        Some(owner) if owner.server == server && !owner.expired => Ok(owner.grace_ends_at),
        Some(owner) if owner.server == server => Err(ApiError::TokenExpired),
        _ => Err(ApiError::Forbidden { resource: format!("the metadata of server {server}") }),
    }
}

/// The server whose token `token` is (for os-collect-config's token-in-URL route); 404 for
/// anything else, so the URL reveals nothing.
pub(super) async fn server_of_url_token<S: Service>(state: &AppState<S>, token: &str) -> Result<String, ApiError> {
    let owner = if is_well_formed(token) { state.service.server_for_token(token).await? } else { None };
    owner.ok_or_else(|| ApiError::NotFound { what: "metadata".to_string() })
}
