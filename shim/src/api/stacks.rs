//! Admin routes for stacks: create (201), list, show, update (202), delete (202) and events.
//! The engine validates templates and names; this layer only checks that the body's name
//! agrees with the URL.

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::auth::Admin;
use super::extract::JsonBody;
use super::{ApiError, AppState};
use crate::model::{Event, Service, StackDetail, StackRequest, StackSummary};

/// `POST /v1/stacks`: the body must name the stack.
pub(super) async fn create<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    JsonBody(request): JsonBody<StackRequest>,
) -> Result<(StatusCode, Json<StackSummary>), ApiError> {
    if request.name.as_deref().is_none_or(str::is_empty) {
        return Err(ApiError::bad_request("stack name is required: the body needs \"name\""));
    }
    let summary = state.service.create_stack(request).await?;
    Ok((StatusCode::CREATED, Json(summary)))
}

/// `GET /v1/stacks`.
pub(super) async fn list<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
) -> Result<Json<Vec<StackSummary>>, ApiError> {
    Ok(Json(state.service.list_stacks().await?))
}

/// `GET /v1/stacks/{name}`.
pub(super) async fn show<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<StackDetail>, ApiError> {
    let Path(name) = path?;
    Ok(Json(state.service.show_stack(&name).await?))
}

/// `PUT /v1/stacks/{name}`: the body's name, if any, must be the path's; the engine always
/// gets it filled in.
pub(super) async fn update<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
    JsonBody(mut request): JsonBody<StackRequest>,
) -> Result<(StatusCode, Json<StackSummary>), ApiError> {
    let Path(name) = path?;
    if let Some(named) = request.name.as_deref().filter(|named| *named != name) {
        return Err(ApiError::bad_request(format!("the body names stack {named:?} but the URL names {name:?}")));
    }
    request.name = Some(name.clone());
    let summary = state.service.update_stack(&name, request).await?;
    Ok((StatusCode::ACCEPTED, Json(summary)))
}

/// `DELETE /v1/stacks/{name}`.
pub(super) async fn delete<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<(StatusCode, Json<StackSummary>), ApiError> {
    let Path(name) = path?;
    let summary = state.service.delete_stack(&name).await?;
    Ok((StatusCode::ACCEPTED, Json(summary)))
}

/// `GET /v1/stacks/{name}/events`.
pub(super) async fn events<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Vec<Event>>, ApiError> {
    let Path(name) = path?;
    Ok(Json(state.service.stack_events(&name).await?))
}
