//! The web view's plan on demand (`GET /ui/api/stacks/{name}/plan`): what `stack update NAME
//! --existing` would do now, i.e. the engine's plan of the stack's own stored request, which
//! re-runs exactly the failed and marked-unhealthy deployments (docs/day-two.md, "Plans").
//! Read-only like the other data routes: the plan is computed in a transaction that is always
//! rolled back. While it runs it holds the store's writer, as an update does, so signals wait
//! for it; a page must not be able to stack plans up behind each other: this process computes
//! one plan for the view at a time (until the plan ends, even when its client has hung up) and
//! refuses another meanwhile (429) instead of queueing it.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use tokio::sync::Semaphore;

use super::AdminSession;
use crate::api::{ApiError, AppState};
use crate::model::{Service, StackPlan, StackRequest};

/// The `Retry-After` of a plan refused while another runs (a small stack's plan takes
/// milliseconds, a 10,000-member group's seconds).
const BUSY_RETRY_AFTER_SECS: u64 = 1;

/// The one plan the view may be computing in this process.
pub(super) struct PlanTurn(Arc<Semaphore>);

impl Default for PlanTurn {
    fn default() -> PlanTurn {
        PlanTurn(Arc::new(Semaphore::new(1)))
    }
}

/// `GET /ui/api/stacks/{name}/plan`: the `StackPlan` of `{"existing": true}`, as `PUT
/// /v1/stacks/{name}/preview?show_nested=true` answers it (members included). 404 for an
/// unknown stack, 400 for one with no stored request, 429 while another plan of the view runs.
pub(in crate::api) async fn plan<S: Service>(
    _: AdminSession,
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<StackPlan>, ApiError> {
    let Path(name) = path?;
    let Ok(turn) = Arc::clone(&state.view.plans.0).try_acquire_owned() else {
        return Err(ApiError::TooManyRequests {
            message: "another preview is being computed; try again in a moment".into(),
            retry_after_secs: BUSY_RETRY_AFTER_SECS,
        });
    };
    let request = StackRequest { name: Some(name.clone()), existing: true, ..StackRequest::default() };
    let service = Arc::clone(&state.service);
    // Its own task: the turn is held until the plan ends, whether or not its client waits.
    let task = tokio::spawn(async move {
        let plan = service.preview_stack(Some(&name), request).await;
        drop(turn);
        plan
    });
    let plan = task.await.map_err(|error| ApiError::Rejected {
        status: axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        message: format!("the preview stopped: {error}"),
    })?;
    Ok(Json(plan?))
}
