//! Admin routes for stacks: create (201), list, show, update (202), delete (202), cancel (202), events
//! (paged as Heat's API: `?limit=&marker=&sort_dir=`) and the stored template and environment. The engine validates templates and names;
//! this layer only checks that the body's name agrees with the URL.

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;

use super::auth::Admin;
use super::extract::{JsonBody, StackBody};
use super::{ApiError, AppState};
use serde::Deserialize;

use crate::model::{
    Event, Failure, Service, StackDetail, StackEnvironment, StackPlan, StackRequest, StackSummary, StackTemplate,
};

/// `POST /v1/stacks`: the body must name the stack.
pub(super) async fn create<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    StackBody(request): StackBody,
) -> Result<(StatusCode, Json<StackSummary>), ApiError> {
    if request.name.as_deref().is_none_or(str::is_empty) {
        return Err(ApiError::bad_request("stack name is required: the body needs \"name\""));
    }
    refuse_existing(&request)?;
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

/// `GET /v1/stacks/{name}`'s query: Heat's `resolve_outputs` (default true; `false` leaves the
/// outputs out, as Heat's stack show does, and costs no evaluation). Other parameters are
/// ignored, as in `EventsQuery`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ShowQuery {
    resolve_outputs: Option<String>,
}

/// `GET /v1/stacks/{name}[?resolve_outputs=false]`.
pub(super) async fn show<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<ShowQuery>, QueryRejection>,
) -> Result<Json<StackDetail>, ApiError> {
    let Path(name) = path?;
    let Query(query) = query?;
    // heat.api.openstack.v1.util.extract_bool: true or false, in any case.
    let resolve = match query.resolve_outputs.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("true") => true,
        Some("false") => false,
        Some(_) => {
            let given = query.resolve_outputs.unwrap_or_default();
            return Err(ApiError::bad_request(format!("Invalid value '{given}' specified for 'resolve_outputs'")));
        }
    };
    let detail = if resolve {
        state.service.show_stack(&name).await?
    } else {
        state.service.show_stack_unresolved(&name).await?
    };
    Ok(Json(detail))
}

/// `GET /v1/stacks/{name}/graph`: the component graph (see `crate::graph`).
pub(super) async fn graph<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<crate::graph::StackGraph>, ApiError> {
    let Path(name) = path?;
    Ok(Json(state.service.stack_graph(&name).await?))
}

/// `GET /v1/stacks/{name}/template`: the stored template (Heat's `get_template`).
pub(super) async fn template<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<StackTemplate>, ApiError> {
    let Path(name) = path?;
    Ok(Json(state.service.stack_template(&name).await?))
}

/// `GET /v1/stacks/{name}/environment`: the parameter values in effect, hidden ones masked
/// (Heat's `get_environment`).
pub(super) async fn environment<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<StackEnvironment>, ApiError> {
    let Path(name) = path?;
    Ok(Json(state.service.stack_environment(&name).await?))
}

/// `PUT /v1/stacks/{name}`: the body's name, if any, must be the path's; the engine always
/// gets it filled in.
pub(super) async fn update<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
    StackBody(mut request): StackBody,
) -> Result<(StatusCode, Json<StackSummary>), ApiError> {
    let Path(name) = path?;
    named_as_in_path(&request, &name)?;
    request.name = Some(name.clone());
    let summary = state.service.update_stack(&name, request).await?;
    Ok((StatusCode::ACCEPTED, Json(summary)))
}

/// `POST /v1/stacks/{name}/cancel`'s body: `{"rollback": false}` stops without rolling back.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CancelRequest {
    #[serde(default = "roll_back_by_default")]
    rollback: bool,
}

fn roll_back_by_default() -> bool {
    true
}

/// `POST /v1/stacks/{name}/cancel` (202): Heat's `cancel_update` (and with `rollback: false`,
/// `cancel_without_rollback`); 409 when no create or update is in progress.
pub(super) async fn cancel<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
    JsonBody(request): JsonBody<CancelRequest>,
) -> Result<(StatusCode, Json<StackSummary>), ApiError> {
    let Path(name) = path?;
    let summary = state.service.cancel_stack(&name, request.rollback).await?;
    Ok((StatusCode::ACCEPTED, Json(summary)))
}

/// `GET /v1/stacks/{name}/failures`: the failed resources with their runs' output (Heat's
/// `stack failures list`).
pub(super) async fn failures<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Vec<Failure>>, ApiError> {
    let Path(name) = path?;
    Ok(Json(state.service.stack_failures(&name).await?))
}

/// `POST .../resources/{resource}/mark-unhealthy`'s body: Heat's mark-unhealthy reason, and
/// `reset` to take a mark back.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MarkRequest {
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    reset: bool,
}

/// The longest mark-unhealthy reason taken (it becomes a status reason and an event).
const MAX_MARK_REASON_BYTES: usize = 4096;

/// `POST /v1/stacks/{name}/resources/{resource}/mark-unhealthy` (204): the deployment runs
/// again on the next update (`resource` percent-encoded: a member is `group%2Fmember`).
pub(super) async fn mark_unhealthy<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<(String, String)>, PathRejection>,
    JsonBody(request): JsonBody<MarkRequest>,
) -> Result<StatusCode, ApiError> {
    let Path((name, resource)) = path?;
    if request.reason.as_ref().is_some_and(|reason| reason.len() > MAX_MARK_REASON_BYTES) {
        return Err(ApiError::bad_request(format!("reason is longer than {MAX_MARK_REASON_BYTES} bytes")));
    }
    state.service.mark_unhealthy(&name, &resource, request.reason, request.reset).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The query of both preview routes: Heat's `show_nested` (default false): with it the group
/// members are in `resource_changes`, each with its `parent_resource`, as Heat's preview-update
/// lists the resources of nested stacks.
#[derive(Debug, Default, Deserialize)]
pub(super) struct PreviewQuery {
    show_nested: Option<String>,
}

impl PreviewQuery {
    /// heat.common.param_utils.extract_bool: true or false, in any case.
    fn show_nested(&self) -> Result<bool, ApiError> {
        match self.show_nested.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(_) => {
                let given = self.show_nested.as_deref().unwrap_or_default();
                Err(ApiError::bad_request(format!(
                    "Unrecognized value \"{given}\" for \"show_nested\", acceptable values are: true, false."
                )))
            }
        }
    }

    /// The plan as asked for: without the members unless `show_nested`.
    fn shown(&self, mut plan: StackPlan) -> Result<Json<StackPlan>, ApiError> {
        if !self.show_nested()? {
            plan.resource_changes = plan.resource_changes.top_level();
        }
        Ok(Json(plan))
    }
}

/// `POST /v1/stacks/{name}/preview` (a create) and `PUT` (an update, Heat's preview-update),
/// `[?show_nested=true]`: the plan, nothing stored or sent.
pub(super) async fn preview_create<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<PreviewQuery>, QueryRejection>,
    StackBody(mut request): StackBody,
) -> Result<Json<StackPlan>, ApiError> {
    let Path(name) = path?;
    let Query(query) = query?;
    query.show_nested()?;
    named_as_in_path(&request, &name)?;
    refuse_existing(&request)?;
    request.name = Some(name);
    query.shown(state.service.preview_stack(None, request).await?)
}

pub(super) async fn preview_update<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<PreviewQuery>, QueryRejection>,
    StackBody(mut request): StackBody,
) -> Result<Json<StackPlan>, ApiError> {
    let Path(name) = path?;
    let Query(query) = query?;
    query.show_nested()?;
    named_as_in_path(&request, &name)?;
    request.name = Some(name.clone());
    query.shown(state.service.preview_stack(Some(&name), request).await?)
}

/// A body that names a stack must name the path's.
fn named_as_in_path(request: &StackRequest, name: &str) -> Result<(), ApiError> {
    match request.name.as_deref().filter(|named| *named != name) {
        Some(named) => Err(ApiError::bad_request(format!("the body names stack {named:?} but the URL names {name:?}"))),
        None => Ok(()),
    }
}

/// A create has nothing stored for `existing` to reuse.
fn refuse_existing(request: &StackRequest) -> Result<(), ApiError> {
    match request.existing {
        true => Err(ApiError::bad_request("\"existing\" is for an update: a create has nothing stored to reuse")),
        false => Ok(()),
    }
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

/// The paging parameters of `GET /v1/stacks/{name}/events`, as Heat's events API takes them.
/// Other parameters are ignored, as Heat's API drops what is not in its list.
#[derive(Debug, Default, Deserialize)]
pub(super) struct EventsQuery {
    /// At most this many events.
    limit: Option<String>,
    /// The id of the last event of the previous page: the page starts after it.
    marker: Option<String>,
    /// `asc` (oldest first, the default) or `desc`.
    sort_dir: Option<String>,
}

/// `GET /v1/stacks/{name}/events[?limit=N&marker=<event id>&sort_dir=asc|desc]`. The marker is
/// compared by id, so a page boundary whose event retention has since removed still pages on.
pub(super) async fn events<S: Service>(
    _: Admin,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Json<Vec<Event>>, ApiError> {
    let Path(name) = path?;
    let Query(query) = query?;
    let limit = query.limit.as_deref().map(|text| parse_number("limit", text)).transpose()?;
    let marker = query.marker.as_deref().map(|text| parse_number("marker", text)).transpose()?;
    let descending = match query.sort_dir.as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!("sort_dir must be asc or desc, got {other:?}")));
        }
    };
    let mut events = state.service.stack_events(&name).await?;
    if descending {
        events.reverse();
    }
    let after_marker = |event: &Event| match marker {
        None => true,
        Some(marker) if descending => event.id < marker,
        Some(marker) => event.id > marker,
    };
    let limit = limit.map_or(usize::MAX, |limit| usize::try_from(limit).unwrap_or(usize::MAX));
    Ok(Json(events.into_iter().filter(after_marker).take(limit).collect()))
}

fn parse_number(name: &str, text: &str) -> Result<u64, ApiError> {
    text.parse().map_err(|_| ApiError::bad_request(format!("{name} must be a non-negative integer, got {text:?}")))
}
