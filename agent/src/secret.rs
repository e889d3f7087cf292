//! Keeping secrets out of logs: a `Secret` newtype whose `Debug` and `Display` print `***`, and
//! URL redaction that drops query strings and userinfo (pre-signed signal URLs carry their
//! credentials there) and path segments long enough to be a token (the shim's signal,
//! wait-condition and os-collect-config URLs carry theirs in the path).

use std::fmt;

/// A value that must never be printed: tokens, passwords, signed URLs.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    pub fn new(value: T) -> Secret<T> {
        Secret(value)
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("***")
    }
}

impl<T> fmt::Display for Secret<T> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("***")
    }
}

/// A path segment longer than this may be a token (the shim's are 64 hex digits) and is
/// masked; the same rule as the shim's own request log.
const LONGEST_PLAIN_SEGMENT: usize = 31;

/// `url` with its query string, any `user:password@` and every path segment that may be a
/// token replaced, fit for a log line.
pub(crate) fn redact_url(url: &str) -> String {
    let without_query = match url.split_once(['?', '#']) {
        Some((head, _)) => format!("{head}?***"),
        None => url.to_string(),
    };
    match without_query.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
            let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
            let slash = if rest.contains('/') { "/" } else { "" };
            let userinfo = if authority.contains('@') { "***@" } else { "" };
            format!("{scheme}://{userinfo}{host}{slash}{}", redact_segments(path))
        }
        None => redact_segments(&without_query),
    }
}

/// `path` with each segment longer than `LONGEST_PLAIN_SEGMENT` replaced by `***`; the `?***`
/// that query redaction left is kept.
fn redact_segments(path: &str) -> String {
    let (path, query) = match path.split_once('?') {
        Some((path, query)) => (path, format!("?{query}")),
        None => (path, String::new()),
    };
    let masked: Vec<&str> =
        path.split('/').map(|segment| if segment.len() > LONGEST_PLAIN_SEGMENT { "***" } else { segment }).collect();
    format!("{}{query}", masked.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_prints() {
        let token = Secret::new("hunter2".to_string());
        assert_eq!(format!("{token:?} {token}"), "*** ***");
        assert_eq!(token.expose(), "hunter2");
    }

    #[test]
    fn urls_lose_query_and_credentials() {
        assert_eq!(redact_url("http://h:8000/v1/signal/x?Signature=abc&A=b"), "http://h:8000/v1/signal/x?***");
        assert_eq!(redact_url("https://user:pw@h/p"), "https://***@h/p");
        assert_eq!(redact_url("http://h"), "http://h");
        assert_eq!(redact_url("http://h/a#frag"), "http://h/a?***");
    }

    #[test]
    fn urls_lose_tokens_in_their_path() {
        let token = "0123456789abcdef".repeat(4);
        let signal = format!("http://127.0.0.1:8080/v1/signals/{token}");
        assert_eq!(redact_url(&signal), "http://127.0.0.1:8080/v1/signals/***");
        let handle = format!("http://h/v1/waitconditions/{token}?x=1");
        assert_eq!(redact_url(&handle), "http://h/v1/waitconditions/***?***");
        assert_eq!(redact_url(&format!("/v1/metadata/{token}/")), "/v1/metadata/***/");
        assert_eq!(redact_url("http://h/v1/servers/web1/metadata"), "http://h/v1/servers/web1/metadata");
    }
}
