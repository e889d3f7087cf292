//! `GET /metrics`: the Prometheus scrape, in the OpenMetrics text format (see `crate::metrics`
//! and docs/http-api.md). Prometheus sends the metrics token (`serve --metrics-token-file`), or
//! the admin token, as its bearer token (`authorization: {credentials_file: ...}` in its scrape
//! config).

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::auth::MetricsReader;
use super::{ApiError, AppState};
use crate::model::Service;

pub(super) async fn scrape<S: Service>(
    _: MetricsReader,
    State(state): State<AppState<S>>,
) -> Result<Response, ApiError> {
    let snapshot = state.service.metrics_snapshot().await?;
    let text = state.service.metrics().render(&snapshot);
    Ok(([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response())
}
