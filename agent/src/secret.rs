//! Keeping secrets out of logs: a `Secret` newtype whose `Debug` and `Display` print `***`, and
//! URL redaction that drops query strings and userinfo (pre-signed signal URLs carry their
//! credentials there).

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

/// `url` with its query string and any `user:password@` replaced, fit for a log line.
pub fn redact_url(url: &str) -> String {
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
            format!("{scheme}://{userinfo}{host}{slash}{path}")
        }
        None => without_query,
    }
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
}
