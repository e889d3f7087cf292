//! The web view's login: the admin token, given once to `POST /ui/login`, becomes a session
//! cookie (`anneal_ui`, HttpOnly, SameSite=Strict, Path=/ui, Secure over TLS) that holds no
//! token, only its expiry and an HMAC of it keyed by the admin token's hash. So it is valid on
//! every replica sharing the token, dies with a new admin token, and a stolen cookie opens the
//! read-only view for at most `SESSION_SECS`, never the API. The `AdminSession` extractor
//! accepts that cookie or the admin bearer token.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::api::auth::Admin;
use crate::api::{ApiError, AppState};
use crate::model::Service;
use crate::token::constant_time_eq;

pub(super) const COOKIE: &str = "anneal_ui";
/// How long a login lasts: a working day.
pub(super) const SESSION_SECS: u64 = 12 * 3600;

/// Proof that the request comes from a logged-in view (or carries the admin bearer token).
pub(crate) struct AdminSession;

impl<S: Service> FromRequestParts<AppState<S>> for AdminSession {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState<S>) -> Result<AdminSession, ApiError> {
        if parts.headers.contains_key(header::AUTHORIZATION) {
            Admin::from_request_parts(parts, state).await?;
            return Ok(AdminSession);
        }
        match cookie(&parts.headers, COOKIE) {
            Some(value) if verify(&state.config.admin_token_hash, value, now()) => Ok(AdminSession),
            _ => Err(ApiError::Unauthenticated),
        }
    }
}

/// The `Set-Cookie` value of a new session.
pub(super) fn issue(admin_token_hash: &str, secure: bool) -> String {
    let expires = now() + SESSION_SECS;
    let value = format!("{expires}.{}", signature(admin_token_hash, expires));
    attributes(&value, SESSION_SECS, secure)
}

/// The `Set-Cookie` value that ends the session in the browser.
pub(super) fn clear(secure: bool) -> String {
    attributes("", 0, secure)
}

fn attributes(value: &str, max_age: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}={value}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
}

/// Whether `value` is a session of this admin token that has not expired at `now`.
pub(super) fn verify(admin_token_hash: &str, value: &str, now: u64) -> bool {
    let Some((expires, signed)) = value.split_once('.') else { return false };
    let Ok(expires) = expires.parse::<u64>() else { return false };
    expires > now && constant_time_eq(signature(admin_token_hash, expires).as_bytes(), signed.as_bytes())
}

fn signature(admin_token_hash: &str, expires: u64) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(admin_token_hash.as_bytes()) else { return String::new() };
    mac.update(b"anneal-ui-session\0");
    mac.update(expires.to_string().as_bytes());
    mac.finalize().into_bytes().iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_valid_for_its_token_until_it_expires() {
        let cookie = issue("hash-a", false);
        assert!(cookie.starts_with("anneal_ui="));
        assert!(cookie.contains("; HttpOnly; SameSite=Strict; Max-Age=43200") && !cookie.contains("Secure"));
        assert!(issue("hash-a", true).ends_with("; Secure"));
        let value = cookie.trim_start_matches("anneal_ui=").split(';').next().unwrap();
        assert!(verify("hash-a", value, now()));
        assert!(!verify("hash-b", value, now()), "another admin token's sessions are not valid");
        let expires: u64 = value.split('.').next().unwrap().parse().unwrap();
        assert!(!verify("hash-a", value, expires), "expired");
        let later = format!("{}.{}", expires + 3600, value.split('.').nth(1).unwrap());
        assert!(!verify("hash-a", &later, now()), "the expiry is signed");
        for forged in ["", ".", "x.y", "99999999999.", "1.00", &format!("{expires}.{}", "0".repeat(64))] {
            assert!(!verify("hash-a", forged, now()), "{forged:?}");
        }
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, "a=1; anneal_ui=v.s".parse().unwrap());
        assert_eq!(cookie(&headers, COOKIE), Some("v.s"));
        headers.clear();
        headers.append(header::COOKIE, "anneal_uix=1".parse().unwrap());
        assert_eq!(cookie(&headers, COOKIE), None);
    }
}
