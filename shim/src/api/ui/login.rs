//! `POST /ui/login` and `POST /ui/logout`. Both refuse what another site's page may have sent
//! (`origin`). A login is admitted through the per-address throttle (`throttle`) before its body
//! is read, compares the token in constant time, and opens a session in the store (`session`); a
//! logout deletes the session the cookie names, on every replica, and ends this process's live
//! streams of it at once.

use std::time::Instant;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::origin::check_same_origin;
use super::session::{self, SESSION_SECS};
use super::throttle::{self, Holder, Outcome, Refused};
use super::{ViewState, peer_of};
use crate::api::extract::JsonBody;
use crate::api::{ApiError, AppState, PeerKey};
use crate::model::Service;
use crate::token::{constant_time_eq, hash_token};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Login {
    token: String,
}

/// A login attempt let through by the cross-site check and the throttle; its outcome is
/// recorded when it is dropped (`Abandoned` unless `fail` or `succeed` said otherwise).
pub(crate) struct LoginAttempt {
    view: std::sync::Arc<ViewState>,
    peer: PeerKey,
    holder: Holder,
    outcome: Outcome,
}

impl<S: Service> FromRequestParts<AppState<S>> for LoginAttempt {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState<S>) -> Result<LoginAttempt, ApiError> {
        check_same_origin(&parts.headers, state.config.served_over_https)?;
        let peer = peer_of(parts);
        let holder = state.view.throttle.begin(peer, Instant::now()).map_err(|refused| match refused {
            Refused::LockedOut { retry_after } => {
                let seconds = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
                ApiError::TooManyRequests {
                    message: format!(
                        "too many failed logins from {peer} ({} within {} s); try again in {seconds} s",
                        throttle::MAX_FAILURES,
                        throttle::WINDOW.as_secs(),
                    ),
                    retry_after_secs: seconds,
                }
            }
            Refused::Busy => ApiError::TooManyRequests {
                message: format!("another login from {peer} is being checked; try again in a moment"),
                retry_after_secs: 1,
            },
        })?;
        Ok(LoginAttempt { view: std::sync::Arc::clone(&state.view), peer, holder, outcome: Outcome::Abandoned })
    }
}

impl Drop for LoginAttempt {
    fn drop(&mut self) {
        if self.view.throttle.finish(self.holder, self.outcome, Instant::now()) {
            tracing::warn!(
                peer = %self.peer,
                failures = throttle::MAX_FAILURES,
                lockout_secs = throttle::LOCKOUT.as_secs(),
                "web view logins refused from an address after repeated failures"
            );
        }
    }
}

/// `POST /ui/login` with `{"token": "<admin token>"}`: 204 and the session cookie, or 403.
pub(crate) async fn login<S: Service>(
    State(state): State<AppState<S>>,
    mut attempt: LoginAttempt,
    JsonBody(login): JsonBody<Login>,
) -> Result<Response, ApiError> {
    let token = login.token.trim();
    if token.is_empty() || !constant_time_eq(hash_token(token).as_bytes(), state.config.admin_token_hash.as_bytes()) {
        attempt.outcome = Outcome::Failed;
        return Err(ApiError::Forbidden { resource: "the web view (that is not the admin token)".into() });
    }
    attempt.outcome = Outcome::Succeeded;
    let (id, key) = session::new_session(&state.config.admin_token_hash)?;
    state.service.open_ui_session(&key, SESSION_SECS).await?;
    tracing::info!(peer = %attempt.peer, "web view login");
    let cookie = session::set_cookie(&id, state.config.secure_cookies);
    Ok((StatusCode::NO_CONTENT, [(header::SET_COOKIE, cookie)]).into_response())
}

/// `POST /ui/logout`: the session the cookie names is deleted (its cookie, wherever copied,
/// opens nothing more) and its live streams here end; 204, and the browser forgets the cookie.
pub(crate) async fn logout<S: Service>(
    State(state): State<AppState<S>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    check_same_origin(&headers, state.config.served_over_https)?;
    if let Some(key) = session::cookie_key(&headers, &state.config.admin_token_hash) {
        state.service.close_ui_session(&key).await?;
        state.view.live.revoke(&key);
    }
    let cookie = session::clear(state.config.secure_cookies);
    Ok((StatusCode::NO_CONTENT, [(header::SET_COOKIE, cookie)]).into_response())
}
