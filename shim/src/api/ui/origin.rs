//! Cross-site checks of the web view's POSTs (`/ui/login`, `/ui/logout`), so that another
//! site's page cannot log a browser in or out: a browser says where a request comes from in
//! `Sec-Fetch-Site` (only `same-origin` and `none`, a typed URL or bookmark, are accepted) and in
//! `Origin`, which must then be the shim's own: the request's `Host` with the scheme the shim
//! is reached by (`https` when it serves TLS or `--public-url` says so, else `http`). A client
//! that sends neither header (the CLI, curl) is not a browser and is let through. See
//! docs/http-api.md, "The web view's routes".

use axum::http::{HeaderMap, header};

use crate::api::ApiError;

/// The `Sec-Fetch-Site` values a request of the view's own pages carries.
const SAME_ORIGIN_SITES: [&str; 2] = ["same-origin", "none"];

/// Refuses (403, naming why) a request another site may have made.
pub(super) fn check_same_origin(headers: &HeaderMap, https: bool) -> Result<(), ApiError> {
    let refuse = |reason: String| Err(ApiError::CrossSite { reason });
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("(not text)").trim();
        if !SAME_ORIGIN_SITES.iter().any(|allowed| site.eq_ignore_ascii_case(allowed)) {
            return refuse(format!("Sec-Fetch-Site is {site}; the web view accepts only its own pages' requests"));
        }
    }
    let Some(origin) = headers.get(header::ORIGIN) else { return Ok(()) };
    let origin = origin.to_str().unwrap_or("(not text)").trim();
    let host = headers.get(header::HOST).and_then(|host| host.to_str().ok()).map(str::trim);
    let scheme = if https { "https" } else { "http" };
    match host {
        Some(host) if same_origin(origin, scheme, host) => Ok(()),
        Some(host) => refuse(format!("Origin {origin} is not this shim's ({scheme}://{host})")),
        None => refuse(format!("Origin {origin} came without a Host header to compare it with")),
    }
}

/// Whether `origin` (`scheme://host[:port]`) is `scheme` at `host` (a `Host` header value),
/// ignoring case and a default port on either side.
fn same_origin(origin: &str, scheme: &str, host: &str) -> bool {
    let Some((origin_scheme, origin_host)) = origin.split_once("://") else { return false };
    origin_scheme.eq_ignore_ascii_case(scheme)
        && without_default_port(origin_host, scheme).eq_ignore_ascii_case(without_default_port(host, scheme))
}

fn without_default_port<'a>(host: &'a str, scheme: &str) -> &'a str {
    let default = if scheme == "https" { ":443" } else { ":80" };
    host.strip_suffix(default).unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, value.parse().unwrap());
        }
        headers
    }

    fn refused(pairs: &[(&'static str, &str)], https: bool) -> Option<String> {
        check_same_origin(&headers(pairs), https).err().map(|error| error.to_string())
    }

    #[test]
    fn the_views_own_requests_and_clients_without_the_headers_pass() {
        let host = ("host", "shim.example:8080");
        assert_eq!(refused(&[], false), None, "the CLI and curl send neither header");
        assert_eq!(
            refused(&[host, ("sec-fetch-site", "same-origin"), ("origin", "http://shim.example:8080")], false),
            None
        );
        assert_eq!(refused(&[host, ("sec-fetch-site", "none")], false), None);
        assert_eq!(refused(&[("host", "Shim.Example"), ("origin", "https://shim.example:443")], true), None);
    }

    #[test]
    fn other_sites_are_refused_with_the_reason() {
        let host = ("host", "shim.example:8080");
        let cross = refused(&[host, ("sec-fetch-site", "cross-site")], false).unwrap();
        assert!(cross.contains("Sec-Fetch-Site is cross-site"), "{cross}");
        assert!(refused(&[host, ("sec-fetch-site", "same-site")], false).is_some(), "a sibling site is another site");
        let foreign = refused(&[host, ("origin", "http://evil.example")], false).unwrap();
        assert!(
            foreign.contains("Origin http://evil.example is not this shim's (http://shim.example:8080)"),
            "{foreign}"
        );
        assert!(refused(&[host, ("origin", "null")], false).is_some(), "an opaque origin");
        assert!(refused(&[host, ("origin", "http://shim.example:8080")], true).is_some(), "the scheme counts");
        assert!(refused(&[("origin", "http://shim.example")], false).is_some(), "no Host to compare with");
    }
}
