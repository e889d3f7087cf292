//! The admin API client: one `reqwest::Client`, the base URL and the bearer header. It turns
//! transport failures and the API's `{"error": {...}}` bodies into `ClientError`s and answers
//! JSON values; it does not know what the commands do with them. The token is kept in a
//! sensitive header value and never appears in messages or `Debug` output. With `--tls-ca` it
//! trusts that CA (besides the system's roots) for an https URL.

use std::fmt;
use std::fs;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, Url};
use serde_json::Value;

use super::formats::TrustedCa;
use super::render::printable;
use super::{ClientContext, ClientError};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of a non-JSON error body goes into a message.
const ERROR_BODY_CHARS: usize = 200;

pub(crate) struct AdminClient {
    http: reqwest::Client,
    base: Url,
    /// The URL as given, for messages.
    display_url: String,
    authorization: HeaderValue,
    /// `--tls-ca`, as read.
    trusted_ca: Option<TrustedCa>,
}

impl fmt::Debug for AdminClient {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("AdminClient").field("url", &self.display_url).finish_non_exhaustive()
    }
}

impl AdminClient {
    /// Checks the URL, reads the admin token (`context.token` wins over the file) and builds the client.
    pub(crate) fn new(context: &ClientContext) -> Result<AdminClient, ClientError> {
        let base = parse_base_url(&context.url)?;
        let authorization = bearer_header(context)?;
        // reqwest is built with rustls but without a default crypto provider; installing one
        // twice is harmless (the second call reports that one is already installed).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            // The library reads no environment, and the admin API is not meant to be proxied.
            .no_proxy();
        let trusted_ca = match &context.ca_file {
            Some(path) => {
                let (ca, certificates) = read_ca(path)?;
                builder = builder.tls_certs_merge(certificates);
                Some(ca)
            }
            None => None,
        };
        let http = builder.build().map_err(|source| ClientError::BuildClient { source })?;
        Ok(AdminClient { http, base, display_url: context.url.clone(), authorization, trusted_ca })
    }

    /// The CA given with `--tls-ca`, for the agent configs the commands print.
    pub(crate) fn trusted_ca(&self) -> Option<&TrustedCa> {
        self.trusted_ca.as_ref()
    }

    /// `GET <base>/<segments...>`.
    pub(crate) async fn get(&self, segments: &[&str]) -> Result<Value, ClientError> {
        self.request(Method::GET, segments, None).await
    }

    /// A GET with query parameters (each percent-encoded).
    pub(crate) async fn get_query(&self, segments: &[&str], query: &[(&str, String)]) -> Result<Value, ClientError> {
        self.request_query(Method::GET, segments, query, None).await
    }

    /// `request` with query parameters (each percent-encoded; none: no `?`).
    pub(crate) async fn request_query(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        let mut url = self.url(segments)?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        self.send(method, url, body).await
    }

    /// One request; `segments` are joined to the base URL's path, each percent-encoded (a stack
    /// name with '/' or '?' stays one segment). A success without a body (204) answers `Null`.
    pub(crate) async fn request(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        self.request_query(method, segments, &[], body).await
    }

    async fn send(&self, method: Method, url: Url, body: Option<&Value>) -> Result<Value, ClientError> {
        let mut request = self.http.request(method, url.clone()).header(AUTHORIZATION, self.authorization.clone());
        if let Some(body) = body {
            request = request.header(CONTENT_TYPE, "application/json").body(body.to_string());
        }
        let response = request.send().await.map_err(|error| self.transport_error(&error))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|error| self.transport_error(&error))?;
        if !status.is_success() {
            return Err(api_error(status, &bytes));
        }
        if status == reqwest::StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes).map_err(|error| ClientError::Response {
            url: url.to_string(),
            reason: format!("the body is not JSON ({error})"),
        })
    }

    fn url(&self, segments: &[&str]) -> Result<Url, ClientError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| invalid_url(&self.display_url, "it cannot have a path"))?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    fn transport_error(&self, error: &reqwest::Error) -> ClientError {
        let reason = root_cause(error);
        if error.is_connect() {
            ClientError::Connect { url: self.display_url.clone(), reason }
        } else if error.is_timeout() {
            ClientError::Request {
                url: self.display_url.clone(),
                reason: format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()),
            }
        } else {
            ClientError::Request { url: self.display_url.clone(), reason }
        }
    }
}

/// The base URL must be http(s) with a host; a query or fragment would be lost when paths are added.
pub(crate) fn parse_base_url(text: &str) -> Result<Url, ClientError> {
    let url = Url::parse(text.trim()).map_err(|error| invalid_url(text, &error.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid_url(text, "the scheme must be http or https"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid_url(text, "it must not have a query or fragment"));
    }
    Ok(url)
}

/// The PEM bundle at `path`, as text and as certificates; at least one certificate.
fn read_ca(path: &std::path::Path) -> Result<(TrustedCa, Vec<reqwest::Certificate>), ClientError> {
    let bad = |reason: &str| ClientError::BadCa { path: path.to_path_buf(), reason: reason.to_string() };
    let pem = fs::read_to_string(path).map_err(|source| ClientError::ReadCa { path: path.to_path_buf(), source })?;
    let certificates =
        reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|_| bad("not a PEM certificate bundle"))?;
    if certificates.is_empty() {
        return Err(bad("no PEM certificate found"));
    }
    Ok((TrustedCa { path: path.display().to_string(), pem }, certificates))
}

fn invalid_url(url: &str, reason: &str) -> ClientError {
    ClientError::InvalidUrl { url: url.to_string(), reason: reason.to_string() }
}

fn bearer_header(context: &ClientContext) -> Result<HeaderValue, ClientError> {
    let bad = |reason: &str| ClientError::BadToken { path: context.token_file.clone(), reason: reason.to_string() };
    let token = match &context.token {
        Some(token) => token.clone(),
        None => fs::read_to_string(&context.token_file)
            .map_err(|source| ClientError::ReadTokenFile { path: context.token_file.clone(), source })?
            .trim()
            .to_string(),
    };
    if token.is_empty() {
        return Err(bad("the token file is empty"));
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| bad("the token has characters that cannot be sent in an HTTP header"))?;
    value.set_sensitive(true);
    Ok(value)
}

/// `{"error": {"code", "message", "problems"?}}`, or whatever the body says when it is not that
/// (a proxy's HTML page, an empty body).
fn api_error(status: reqwest::StatusCode, body: &[u8]) -> ClientError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|value| value.get("error"));
    let message = error.and_then(|error| error.get("message")).and_then(Value::as_str);
    let problems = error
        .and_then(|error| error.get("problems"))
        .and_then(Value::as_array)
        .map(|problems| problems.iter().map(|problem| problem.as_str().map_or(problem.to_string(), str::to_string)))
        .map(Iterator::collect)
        .unwrap_or_default();
    let message = match message {
        Some(message) => message.to_string(),
        None => {
            let text: String = String::from_utf8_lossy(body).trim().chars().take(ERROR_BODY_CHARS).collect();
            let reason = status.canonical_reason().unwrap_or("error");
            if text.is_empty() {
                format!("HTTP {} {reason}", status.as_u16())
            } else {
                format!("HTTP {} {reason}: {}", status.as_u16(), printable(&text))
            }
        }
    };
    ClientError::Api { status: status.as_u16(), message, problems }
}

/// The innermost cause ("Connection refused (os error 111)"): reqwest's own top-level text
/// repeats the URL, which the message already names.
fn root_cause(error: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_checked() {
        assert!(parse_base_url("http://127.0.0.1:8080").is_ok());
        assert!(parse_base_url("https://shim.example/anneal/").is_ok());
        for bad in ["127.0.0.1:8080", "ftp://x", "http://x/?a=b", "not a url"] {
            let error = parse_base_url(bad).unwrap_err();
            assert!(matches!(error, ClientError::InvalidUrl { .. }), "{bad}");
            assert_eq!(error.exit_code(), 2);
        }
    }

    #[test]
    fn error_bodies_are_read_or_summarised() {
        let status = reqwest::StatusCode::BAD_REQUEST;
        let body = br#"{"error": {"code": 400, "message": "template is invalid", "problems": ["a", "b"]}}"#;
        let ClientError::Api { status: code, message, problems } = api_error(status, body) else { panic!() };
        assert_eq!((code, message.as_str(), problems), (400, "template is invalid", vec!["a".into(), "b".into()]));
        let ClientError::Api { message, .. } = api_error(reqwest::StatusCode::BAD_GATEWAY, b"<html>\n</html>") else {
            panic!()
        };
        assert_eq!(message, "HTTP 502 Bad Gateway: <html>\\n</html>");
        let ClientError::Api { message, .. } = api_error(reqwest::StatusCode::NOT_FOUND, b"") else { panic!() };
        assert_eq!(message, "HTTP 404 Not Found");
    }

    #[test]
    fn client_debug_does_not_show_the_token() {
        let context = ClientContext {
            url: "http://127.0.0.1:1".to_string(),
            token: Some("admintoken".to_string()),
            token_file: "/nonexistent".into(),
            ca_file: None,
        };
        let client = AdminClient::new(&context).unwrap();
        assert!(!format!("{client:?}").contains("admintoken"));
        assert!(!format!("{context:?}").contains("admintoken"));
    }
}
