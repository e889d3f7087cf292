//! HTTP conditional-request arithmetic for metadata documents: the `"<version>"` entity tag,
//! `If-None-Match` matching, and `If-Modified-Since` against `Last-Modified` (dates parsed by
//! `crate::dates`). Pure functions; no I/O.

use axum::http::{HeaderMap, header};

use crate::dates::parse_http_date;

/// The entity tag of a document version.
pub(super) fn entity_tag(version: u64) -> String {
    format!("\"{version}\"")
}

/// Whether `If-None-Match` names this version (weak tags compare equal, as RFC 9110 asks for
/// `If-None-Match`; `*` matches any current document). `None` when the header is absent.
pub(super) fn if_none_match(headers: &HeaderMap, version: u64) -> Option<bool> {
    let value = headers.get(header::IF_NONE_MATCH)?;
    let Ok(text) = value.to_str() else {
        return Some(false);
    };
    let current = entity_tag(version);
    Some(text.split(',').map(str::trim).any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == current))
}

/// Whether `If-Modified-Since` says the client's copy is at least as new as `last_modified`.
/// An unparsable date on either side falls back to comparing the texts (RFC 9110 says to
/// ignore an invalid date; an exact echo of our own header is still a safe match).
pub(super) fn not_modified_since(headers: &HeaderMap, last_modified: &str) -> bool {
    let Some(since) = headers.get(header::IF_MODIFIED_SINCE).and_then(|value| value.to_str().ok()) else {
        return false;
    };
    match (parse_http_date(since), parse_http_date(last_modified)) {
        (Some(since), Some(modified)) => since >= modified,
        _ => since.trim() == last_modified.trim(),
    }
}
