//! Signals from inside servers, authenticated by the capability token in their URL:
//! heat-config-notify deployment results (`POST|PUT /v1/signals/{token}`, read with Heat's
//! body acceptance rule) and wait-condition handle signals in both of Heat's styles
//! (`POST /v1/waitconditions/{token}` OS::Heat, `PUT` AWS/cfn-signal). The token is looked up
//! (a read, see `Service::signal_token_known`) before the body is read: an unknown token is
//! answered 404 at once, whatever its client is still sending. A known token may have at most
//! `MAX_BODIES_PER_TOKEN` bodies in flight (429 beyond), so holding one signal URL does not let a
//! client pin many bodies.

use anneal_protocol::waitcondition::{AwsWaitSignal, HeatWaitSignal, WaitStatus};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, FromRequest, Path, Request, State};
use axum::http::{HeaderMap, header};
use serde_json::{Value, json};

use super::budget::CapabilityBody;
use super::limits::Slot;
use super::{ApiError, AppState};
use crate::model::{Service, SignalAck, WaitConditionSignal};
use crate::token::is_well_formed;

/// The agent's idempotency key for a signal.
pub(super) const SIGNAL_ID_HEADER: &str = "x-anneal-signal-id";

/// `POST|PUT /v1/signals/{token}`: 200 `{"result": "applied"|"duplicate"|"stale"}`.
pub(super) async fn deployment<S: Service>(
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
    slot: Option<Extension<Slot>>,
    headers: HeaderMap,
    request: Request,
) -> Result<Json<Value>, ApiError> {
    let outcome = async {
        let token = known_token(&state, path?, "signal").await?;
        let _in_flight = body_of_token(slot, &token)?;
        let body = read_body(&state, request).await?;
        let content_type = headers.get(header::CONTENT_TYPE).map(|value| value.to_str().unwrap_or("unreadable"));
        let details = signal_details(content_type, &body)?;
        let signal_id = signal_id(&headers)?;
        let ack = state.service.deployment_signal(&token, details, signal_id).await?;
        acknowledge(ack, "signal")
    };
    count(&state, "deployment", outcome.await)
}

/// `POST /v1/waitconditions/{token}` with `{status, reason, data, id}`, every key optional;
/// an empty body is a SUCCESS.
pub(super) async fn wait_condition_heat<S: Service>(
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
    slot: Option<Extension<Slot>>,
    request: Request,
) -> Result<Json<Value>, ApiError> {
    let outcome = wait_condition(&state, path, slot, request, |body| {
        let signal = HeatWaitSignal::from_body(body).map_err(metadata_format_invalid)?;
        Ok(WaitConditionSignal {
            success: signal.status == WaitStatus::Success,
            reason: signal.reason,
            data: signal.data,
            id: signal.id,
        })
    });
    count(&state, "wait_condition", outcome.await)
}

/// `PUT /v1/waitconditions/{token}` with exactly `{Status, Reason, UniqueId, Data}` (cfn-signal).
pub(super) async fn wait_condition_aws<S: Service>(
    State(state): State<AppState<S>>,
    path: Result<Path<String>, PathRejection>,
    slot: Option<Extension<Slot>>,
    request: Request,
) -> Result<Json<Value>, ApiError> {
    let outcome = wait_condition(&state, path, slot, request, |body| {
        let signal: AwsWaitSignal = serde_json::from_slice(body).map_err(metadata_format_invalid)?;
        Ok(WaitConditionSignal {
            success: signal.status == WaitStatus::Success,
            reason: Some(signal.reason),
            data: Some(signal.data),
            id: Some(signal.unique_id),
        })
    });
    count(&state, "wait_condition", outcome.await)
}

/// A wait condition handle signal whose body (an object, or empty) `parse` reads in its style.
async fn wait_condition<S: Service>(
    state: &AppState<S>,
    path: Result<Path<String>, PathRejection>,
    slot: Option<Extension<Slot>>,
    request: Request,
    parse: impl FnOnce(&[u8]) -> Result<WaitConditionSignal, ApiError>,
) -> Result<Json<Value>, ApiError> {
    let token = known_token(state, path?, "wait condition handle").await?;
    let _in_flight = body_of_token(slot, &token)?;
    let body = read_body(state, request).await?;
    require_object_or_empty(&body)?;
    let ack = state.service.wait_condition_signal(&token, parse(&body)?).await?;
    acknowledge(ack, "wait condition handle")
}

/// Heat's acceptance rule (`heat/common/wsgi.py::is_json_content_type`): the body is JSON only
/// if its Content-Type is absent, empty, `application/json`, `JSON` or `text/plain...` and it
/// starts with `{` (here: after whitespace). Anything else counts as no body, `{}`, which is
/// what Heat does (it then records a successful deployment). A body that claims to be JSON
/// but does not parse is refused rather than guessed at.
pub fn signal_details(content_type: Option<&str>, body: &[u8]) -> Result<Value, ApiError> {
    let starts_with_brace = body.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b'{');
    if !starts_with_brace || !is_json_content_type(content_type) {
        return Ok(json!({}));
    }
    serde_json::from_slice(body)
        .map_err(|error| ApiError::bad_request(format!("signal body is not valid JSON: {error}")))
}

/// The Content-Type half of Heat's rule. Parameters (`; charset=utf-8`) are ignored, as
/// webob's `content_type` drops them.
pub(super) fn is_json_content_type(content_type: Option<&str>) -> bool {
    let Some(content_type) = content_type else {
        return true;
    };
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    media_type.is_empty()
        || media_type.eq_ignore_ascii_case("application/json")
        || media_type.eq_ignore_ascii_case("json")
        || media_type.get(..10).is_some_and(|prefix| prefix.eq_ignore_ascii_case("text/plain"))
}

/// The path's token, or 404 when it is not one the engine knows (no lookup for one that
/// cannot be one of ours). The signal itself checks the token again: it may be gone by then.
async fn known_token<S: Service>(
    state: &AppState<S>,
    Path(token): Path<String>,
    what: &str,
) -> Result<String, ApiError> {
    if is_well_formed(&token) && state.service.signal_token_known(&token).await? {
        Ok(token)
    } else {
        Err(ApiError::NotFound { what: format!("{what} token") })
    }
}

/// Counts the request's body against its token's bodies in flight (429 beyond); nothing for a
/// router used without `serve` (no connection slot).
fn body_of_token(slot: Option<Extension<Slot>>, token: &str) -> Result<Option<CapabilityBody>, ApiError> {
    slot.map(|Extension(slot)| slot.capability_body(token)).transpose().map_err(ApiError::from)
}

/// The request's body, within the body limit, budget and deadlines (413, 503, 408).
async fn read_body<S: Service>(state: &AppState<S>, request: Request) -> Result<Bytes, ApiError> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| ApiError::from_body_rejection(rejection, state.config.body_limit))
}

fn signal_id(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(SIGNAL_ID_HEADER) else {
        return Ok(None);
    };
    let text = value.to_str().map_err(|_| ApiError::bad_request("X-Anneal-Signal-Id must be visible ASCII"))?.trim();
    Ok((!text.is_empty()).then(|| text.to_string()))
}

/// Heat wants a mapping; serde would also build the struct from a JSON array (`[]` is every
/// field defaulted), so arrays and scalars are refused here. Blank bodies pass: the parsers
/// decide what they mean.
fn require_object_or_empty(body: &[u8]) -> Result<(), ApiError> {
    match body.iter().find(|byte| !byte.is_ascii_whitespace()) {
        None | Some(b'{') => Ok(()),
        Some(_) => Err(ApiError::bad_request("Metadata format invalid: the body must be a JSON object")),
    }
}

fn metadata_format_invalid(error: serde_json::Error) -> ApiError {
    ApiError::bad_request(format!("Metadata format invalid: {error}"))
}

/// Counts the signal under `anneal_shim_signals{route, outcome}`: the acknowledgement, or why it
/// was refused.
fn count<S: Service>(
    state: &AppState<S>,
    route: &str,
    outcome: Result<Json<Value>, ApiError>,
) -> Result<Json<Value>, ApiError> {
    let label = match &outcome {
        Ok(Json(answer)) => answer["result"].as_str().unwrap_or("applied").to_string(),
        Err(error) => match error.status().as_u16() {
            404 => "unknown_token".to_string(),
            400 => "bad_body".to_string(),
            413 => "too_large".to_string(),
            429 => "busy".to_string(),
            408 => "too_slow".to_string(),
            503 => "unavailable".to_string(),
            _ => "error".to_string(),
        },
    };
    state.service.metrics().signal(route, &label);
    outcome
}

fn acknowledge(ack: Option<SignalAck>, what: &str) -> Result<Json<Value>, ApiError> {
    let ack = ack.ok_or_else(|| ApiError::NotFound { what: format!("{what} token") })?;
    Ok(Json(json!({ "result": ack })))
}
