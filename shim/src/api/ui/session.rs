//! The web view's sessions: the admin token, given once to `POST /ui/login`, becomes a session
//! cookie (`anneal_ui`, HttpOnly, SameSite=Strict, Path=/ui, Secure over TLS) that holds no
//! token, only a random id. The store keeps the session under a key, an HMAC of the id keyed by
//! the admin token's hash (so neither the id nor the token is stored, and a new admin token
//! makes every session's key another one: they all end), with its expiry; `POST /ui/logout`
//! deletes it, so a copied cookie stops working at once, on every replica sharing the database.
//! A stolen cookie opens the read-only view for at most `SESSION_SECS`, never the API. The
//! `AdminSession` extractor accepts that cookie (one primary-key read) or the admin bearer
//! token.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::api::auth::Admin;
use crate::api::{ApiError, AppState};
use crate::model::Service;
use crate::token::{hex, is_well_formed, new_token};

pub(super) const COOKIE: &str = "anneal_ui";
/// How long a login lasts: a working day.
pub(super) const SESSION_SECS: u64 = 12 * 3600;

/// Proof that the request comes from a logged-in view (or carries the admin bearer token).
pub(crate) struct AdminSession {
    /// The session's key; `None` for the admin bearer token, which has no session.
    pub(super) session: Option<String>,
}

impl<S: Service> FromRequestParts<AppState<S>> for AdminSession {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState<S>) -> Result<AdminSession, ApiError> {
        if parts.headers.contains_key(header::AUTHORIZATION) {
            Admin::from_request_parts(parts, state).await?;
            return Ok(AdminSession { session: None });
        }
        let Some(key) = cookie_key(&parts.headers, &state.config.admin_token_hash) else {
            return Err(ApiError::Unauthenticated);
        };
        if state.service.ui_session_valid(&key).await? {
            Ok(AdminSession { session: Some(key) })
        } else {
            Err(ApiError::Unauthenticated)
        }
    }
}

/// A new session: its cookie's id and the key the store keeps it under.
pub(super) fn new_session(admin_token_hash: &str) -> Result<(String, String), ApiError> {
    let id = new_token().map_err(|error| ApiError::Rejected {
        status: axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        message: format!("cannot make a session id: {error}"),
    })?;
    let key = session_key(admin_token_hash, &id);
    Ok((id, key))
}

/// The key of the session whose cookie the request carries, if it carries one of our shape.
pub(super) fn cookie_key(headers: &HeaderMap, admin_token_hash: &str) -> Option<String> {
    cookie(headers, COOKIE).filter(|id| is_well_formed(id)).map(|id| session_key(admin_token_hash, id))
}

/// The `Set-Cookie` value of the session `id`.
pub(super) fn set_cookie(id: &str, secure: bool) -> String {
    attributes(id, SESSION_SECS, secure)
}

/// The `Set-Cookie` value that ends the session in the browser.
pub(super) fn clear(secure: bool) -> String {
    attributes("", 0, secure)
}

fn attributes(value: &str, max_age: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{COOKIE}={value}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
}

/// What the store knows a session by: never the id itself, and another key under another
/// admin token.
fn session_key(admin_token_hash: &str, id: &str) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(admin_token_hash.as_bytes()) else { return String::new() };
    mac.update(b"anneal-ui-session\0");
    mac.update(id.as_bytes());
    hex(&mac.finalize().into_bytes())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_cookie_holds_a_random_id_and_its_key_depends_on_the_admin_token() {
        let (id, key) = new_session("hash-a").unwrap();
        assert!(is_well_formed(&id));
        assert_ne!(new_session("hash-a").unwrap().0, id, "ids are random");
        assert!(!key.contains(&id), "the key does not reveal the id");
        assert_eq!(session_key("hash-a", &id), key);
        assert_ne!(session_key("hash-b", &id), key, "another admin token's key is another");
        let cookie = set_cookie(&id, false);
        assert!(cookie.starts_with(&format!("anneal_ui={id};")));
        assert!(cookie.contains("; HttpOnly; SameSite=Strict; Max-Age=43200") && !cookie.contains("Secure"));
        assert!(set_cookie(&id, true).ends_with("; Secure"));
        assert!(clear(false).contains("Max-Age=0"));
    }

    #[test]
    fn the_cookie_is_found_among_others_and_only_in_our_shape() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, "a=1; anneal_ui=v.s".parse().unwrap());
        assert_eq!(cookie(&headers, COOKIE), Some("v.s"));
        assert_eq!(cookie_key(&headers, "hash"), None, "not an id of ours");
        headers.clear();
        headers.append(header::COOKIE, "anneal_uix=1".parse().unwrap());
        assert_eq!(cookie(&headers, COOKIE), None);
        headers.clear();
        headers.append(header::COOKIE, format!("anneal_ui={}", "ab".repeat(32)).parse().unwrap());
        assert_eq!(cookie_key(&headers, "hash"), Some(session_key("hash", &"ab".repeat(32))));
    }
}
