//! Admin routes for servers: `POST /v1/servers` registers one and returns its credentials
//! (the only time its token is shown), `GET /v1/servers` lists them, `DELETE
//! /v1/servers/{name}` removes one and so revokes its token, `POST /v1/servers/{name}/token`
//! gives one a new token (the old one keeps working for a grace period). See docs/security.md.

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::auth::Admin;
use super::extract::JsonBody;
use super::{ApiError, AppState};
use crate::model::{
    AddServer, DEFAULT_TOKEN_GRACE_SECS, RotateToken, RotatedCredentials, ServerCredentials, ServerSummary, Service,
};

/// `POST /v1/servers`: 201 with the credentials.
pub(super) async fn add<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    JsonBody(request): JsonBody<AddServer>,
) -> Result<(StatusCode, Json<ServerCredentials>), ApiError> {
    let credentials = state.service.add_server(request).await?;
    Ok((StatusCode::CREATED, Json(credentials)))
}

/// `GET /v1/servers`.
pub(super) async fn list<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
) -> Result<Json<Vec<ServerSummary>>, ApiError> {
    Ok(Json(state.service.list_servers().await?))
}

/// `DELETE /v1/servers/{name}`: 204; 404 for an unknown server, 409 while a stack uses it.
pub(super) async fn remove<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    let Path(name) = path?;
    state.service.remove_server(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/servers/{name}/token`: 200 with the new credentials; 404 for an unknown server.
pub(super) async fn rotate_token<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
    JsonBody(request): JsonBody<RotateToken>,
) -> Result<Json<RotatedCredentials>, ApiError> {
    let Path(name) = path?;
    let grace_secs = request.grace_secs.unwrap_or(DEFAULT_TOKEN_GRACE_SECS);
    Ok(Json(state.service.rotate_server_token(&name, grace_secs).await?))
}
