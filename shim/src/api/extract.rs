//! Request-body extraction for the admin routes: a JSON body read within the body limit and
//! parsed with the error mapped to a 400 that names the problem (axum's `Json` would answer
//! 415/422 in plain text, and insist on a Content-Type).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use super::{ApiError, AppState};
use crate::model::Service;

/// A JSON request body of type `T` (any Content-Type is accepted).
pub(super) struct JsonBody<T>(pub T);

impl<S: Service, T: DeserializeOwned> FromRequest<AppState<S>> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState<S>) -> Result<JsonBody<T>, ApiError> {
        let body = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| ApiError::from_body_rejection(rejection, state.config.body_limit))?;
        parse_json(&body).map(JsonBody)
    }
}

/// A stack create or update body, with whether it has a `template` at all (one with
/// `"existing": true` need not; any other is refused without one, as serde would).
pub(super) struct StackBody(pub crate::model::StackRequest);

impl<S: Service> FromRequest<AppState<S>> for StackBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState<S>) -> Result<StackBody, ApiError> {
        /// Only whether the key is there.
        #[derive(serde::Deserialize)]
        struct Keys {
            template: Option<serde::de::IgnoredAny>,
        }
        let body = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| ApiError::from_body_rejection(rejection, state.config.body_limit))?;
        let parsed: crate::model::StackRequest = parse_json(&body)?;
        let named = serde_json::from_slice::<Keys>(&body).is_ok_and(|keys| keys.template.is_some());
        if !named && !parsed.existing {
            return Err(ApiError::bad_request("invalid request body: missing field `template`"));
        }
        Ok(StackBody(parsed))
    }
}

/// `body` as a `T`; 400 naming the problem (empty body, not an object, syntax, unknown or
/// missing field).
pub(super) fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    match body.iter().find(|byte| !byte.is_ascii_whitespace()) {
        None => return Err(ApiError::bad_request("request body is empty; a JSON object is expected")),
        // serde would also fill a struct from a JSON array (`["vm9"]` is a server named vm9).
        Some(byte) if *byte != b'{' => {
            return Err(ApiError::bad_request("invalid request body: a JSON object is expected"));
        }
        Some(_) => {}
    }
    serde_json::from_slice(body).map_err(|error| ApiError::bad_request(format!("invalid request body: {error}")))
}
