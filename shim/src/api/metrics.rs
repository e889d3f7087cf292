//! `GET /metrics` (admin): the Prometheus scrape, in the OpenMetrics text format (see
//! `crate::metrics` and docs/http-api.md). Prometheus sends the admin token as its bearer token
//! (`authorization: {credentials_file: ...}` in its scrape config).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::auth::Admin;
use super::{ApiError, AppState};
use crate::model::Service;

pub(super) async fn scrape<S: Service>(_: Admin, State(state): State<AppState<S>>) -> Result<Response, ApiError> {
    let snapshot = state.service.metrics_snapshot().await?;
    let text = state.service.metrics().render(&snapshot);
    Ok(([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response())
}
