//! The agent's one Keystone v3 client, shared by the `heat` and `zaqar` sources and by the
//! HEAT_SIGNAL and ZAQAR_SIGNAL transports: password authentication by user id, scoped to a
//! project id (as os-collect-config's keystone module and heat-config-notify authenticate), the
//! token cached until it nears expiry, and service endpoints picked from the token's catalog.
//!
//! A `KeystoneSession` holds one set of credentials and its cached token; `token()` returns the
//! cached token or authenticates again, `invalidate()` drops a token the service refused (HTTP
//! 401) so the caller authenticates once more. The password and the token never reach a log line
//! or an error text: both are `Secret`s and errors name only the (redacted) URL and the user id.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anneal_protocol::dates::parse_rfc3339_millis;
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use reqwest::{Client, Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use crate::secret::{Secret, redact_url};

/// The header Keystone returns a new token in, and services take it in.
pub(crate) const SUBJECT_TOKEN_HEADER: &str = "x-subject-token";
pub(crate) const AUTH_TOKEN_HEADER: &str = "x-auth-token";
/// The largest token response read. A catalog of a large cloud is some hundred kilobytes.
const MAX_TOKEN_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// A token is renewed this long before it expires (keystoneauth's default margin is smaller; a
/// signal sent just before expiry must not be refused), or at half its lifetime if that is
/// sooner.
const RENEW_BEFORE_EXPIRY: Duration = Duration::from_secs(5 * 60);

/// Why no token or endpoint could be had. Texts name the identity endpoint without query or
/// userinfo and the user id, never the password or a token.
#[derive(Debug, thiserror::Error)]
pub enum KeystoneError {
    #[error("invalid keystone auth_url {url}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("cannot reach keystone at {url}")]
    Request {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("keystone at {url} refused the credentials of user {user_id} for project {project_id} (HTTP {status})")]
    Refused { url: String, user_id: String, project_id: String, status: u16 },
    #[error("keystone at {url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("keystone at {url} answered a token response that is larger than {limit} bytes")]
    TooLarge { url: String, limit: usize },
    #[error("keystone at {url} answered a malformed token response: {reason}")]
    BadResponse { url: String, reason: String },
    #[error("the keystone catalog has no public endpoint for service type {service_type}{}", region_text(.region))]
    NoEndpoint { service_type: String, region: Option<String> },
}

fn region_text(region: &Option<String>) -> String {
    region.as_ref().map(|region| format!(" in region {region}")).unwrap_or_default()
}

impl KeystoneError {
    /// Whether trying again later may succeed: Keystone unreachable, overloaded or failing (connect
    /// errors, timeouts, 5xx, 408, 429). Refused credentials, a malformed answer or a catalog
    /// without the service are permanent.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            KeystoneError::Request { .. } => true,
            KeystoneError::Status { status, .. } => *status >= 500 || *status == 408 || *status == 429,
            _ => false,
        }
    }
}

/// Keystone v3 password credentials: what a session authenticates with.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Credentials {
    /// The identity endpoint as configured, with or without `/v3`.
    pub(crate) auth_url: String,
    pub(crate) user_id: String,
    pub(crate) password: Secret<String>,
    pub(crate) project_id: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Credentials")
            .field("auth_url", &redact_url(&self.auth_url))
            .field("user_id", &self.user_id)
            .field("password", &self.password)
            .field("project_id", &self.project_id)
            .finish()
    }
}

impl From<&crate::config::KeystoneConfig> for Credentials {
    fn from(config: &crate::config::KeystoneConfig) -> Credentials {
        Credentials {
            auth_url: config.auth_url.clone(),
            user_id: config.user_id.clone(),
            password: config.password.clone(),
            project_id: config.project_id.clone(),
        }
    }
}

/// One issued token and the catalog that came with it.
pub(crate) struct Token {
    value: Secret<HeaderValue>,
    catalog: Vec<CatalogService>,
    renew_at: Instant,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Token").field("value", &self.value).field("renew_at", &self.renew_at).finish()
    }
}

impl Token {
    /// The `X-Auth-Token` value (marked sensitive, so it is never printed by the HTTP stack).
    pub(crate) fn header(&self) -> HeaderValue {
        self.value.expose().clone()
    }

    /// The `public` URL of `service_type` in the catalog, in `region` when one is given (matched
    /// against the endpoint's `region_id` or `region`, as keystoneauth does); the first match wins.
    pub(crate) fn endpoint(&self, service_type: &str, region: Option<&str>) -> Result<String, KeystoneError> {
        self.catalog
            .iter()
            .filter(|service| service.service_type == service_type)
            .flat_map(|service| &service.endpoints)
            .filter(|endpoint| endpoint.interface == "public")
            .find(|endpoint| {
                region.is_none_or(|region| {
                    endpoint.region_id.as_deref() == Some(region) || endpoint.region.as_deref() == Some(region)
                })
            })
            .map(|endpoint| endpoint.url.clone())
            .ok_or_else(|| KeystoneError::NoEndpoint {
                service_type: service_type.to_string(),
                region: region.map(str::to_string),
            })
    }
}

#[derive(Debug, Deserialize)]
struct TokenResponse {
    token: TokenBody,
}

#[derive(Debug, Deserialize)]
struct TokenBody {
    expires_at: String,
    issued_at: Option<String>,
    #[serde(default)]
    catalog: Vec<CatalogService>,
}

#[derive(Debug, Deserialize)]
struct CatalogService {
    #[serde(rename = "type")]
    service_type: String,
    #[serde(default)]
    endpoints: Vec<CatalogEndpoint>,
}

#[derive(Debug, Deserialize)]
struct CatalogEndpoint {
    interface: String,
    url: String,
    region_id: Option<String>,
    region: Option<String>,
}

/// One set of credentials and its cached token. Shared (`Arc`) by every request made with the
/// same credentials; concurrent callers wait for one authentication instead of each doing one.
pub(crate) struct KeystoneSession {
    credentials: Credentials,
    tokens_url: String,
    redacted_url: String,
    client: Client,
    timeout: Duration,
    cached: tokio::sync::Mutex<Option<Arc<Token>>>,
}

impl std::fmt::Debug for KeystoneSession {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("KeystoneSession")
            .field("url", &self.redacted_url)
            .field("user_id", &self.credentials.user_id)
            .finish_non_exhaustive()
    }
}

impl KeystoneSession {
    /// A session that authenticates over `client` (the agent's one kind, `httpclient::build`),
    /// each token request bounded by `timeout`. Nothing is sent before the first `token()`.
    pub(crate) fn new(credentials: Credentials, client: Client, timeout: Duration) -> Result<Self, KeystoneError> {
        let tokens_url = tokens_url(&credentials.auth_url)?;
        Ok(KeystoneSession {
            redacted_url: redact_url(&tokens_url),
            tokens_url,
            credentials,
            client,
            timeout,
            cached: tokio::sync::Mutex::new(None),
        })
    }

    pub(crate) fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// The cached token while it is fresh, else a new one.
    pub(crate) async fn token(&self) -> Result<Arc<Token>, KeystoneError> {
        let mut cached = self.cached.lock().await;
        if let Some(token) = cached.as_ref().filter(|token| Instant::now() < token.renew_at) {
            return Ok(Arc::clone(token));
        }
        *cached = None;
        let token = Arc::new(self.authenticate().await?);
        *cached = Some(Arc::clone(&token));
        Ok(token)
    }

    /// Drops `refused` (a token a service answered 401 to) so the next `token()` authenticates
    /// again; a newer token another caller already got is kept.
    pub(crate) async fn invalidate(&self, refused: &Arc<Token>) {
        let mut cached = self.cached.lock().await;
        if cached.as_ref().is_some_and(|token| Arc::ptr_eq(token, refused)) {
            *cached = None;
        }
    }

    async fn authenticate(&self) -> Result<Token, KeystoneError> {
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "id": self.credentials.user_id,
                "password": self.credentials.password.expose(),
            }}},
            "scope": {"project": {"id": self.credentials.project_id}},
        }});
        tracing::debug!(url = %self.redacted_url, user_id = %self.credentials.user_id, "authenticating with keystone");
        let sent = Instant::now();
        let response = self
            .client
            .post(&self.tokens_url)
            .timeout(self.timeout)
            .header(CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|source| self.request_error(source))?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(KeystoneError::Refused {
                url: self.redacted_url.clone(),
                user_id: self.credentials.user_id.clone(),
                project_id: self.credentials.project_id.clone(),
                status: status.as_u16(),
            });
        }
        if !status.is_success() {
            return Err(KeystoneError::Status { url: self.redacted_url.clone(), status: status.as_u16() });
        }
        let mut value = response
            .headers()
            .get(SUBJECT_TOKEN_HEADER)
            .filter(|value| !value.is_empty())
            .cloned()
            .ok_or_else(|| self.bad_response("no X-Subject-Token header"))?;
        value.set_sensitive(true);
        let bytes = self.read_body(response).await?;
        let parsed: TokenResponse = serde_json::from_slice(&bytes)
            .map_err(|error| self.bad_response(&format!("not a token object: {error}")))?;
        let lifetime = token_lifetime(&parsed.token)
            .ok_or_else(|| self.bad_response("expires_at or issued_at is not an ISO 8601 UTC time"))?;
        Ok(Token { value: Secret::new(value), catalog: parsed.token.catalog, renew_at: sent + renew_after(lifetime) })
    }

    async fn read_body(&self, mut response: Response) -> Result<Vec<u8>, KeystoneError> {
        let too_large = || KeystoneError::TooLarge { url: self.redacted_url.clone(), limit: MAX_TOKEN_RESPONSE_BYTES };
        if response.content_length().is_some_and(|length| length > MAX_TOKEN_RESPONSE_BYTES as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|source| self.request_error(source))? {
            if body.len() + chunk.len() > MAX_TOKEN_RESPONSE_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn request_error(&self, source: reqwest::Error) -> KeystoneError {
        KeystoneError::Request { url: self.redacted_url.clone(), source: source.without_url() }
    }

    fn bad_response(&self, reason: &str) -> KeystoneError {
        KeystoneError::BadResponse { url: self.redacted_url.clone(), reason: reason.to_string() }
    }
}

/// `{auth_url}/v3/auth/tokens`, accepting an auth_url with or without its `/v3` (and mapping a
/// `/v2.0` one to `/v3`, which Keystone serves beside it), as keystoneauth's discovery ends up.
pub(crate) fn tokens_url(auth_url: &str) -> Result<String, KeystoneError> {
    let bad = |reason: &str| KeystoneError::BadUrl { url: redact_url(auth_url), reason: reason.to_string() };
    let parsed = reqwest::Url::parse(auth_url).map_err(|error| bad(&error.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(bad("a query string or fragment is not allowed"));
    }
    let base = auth_url.trim_end_matches('/');
    let base = base.strip_suffix("/v2.0").unwrap_or(base);
    let base = base.strip_suffix("/v3").unwrap_or(base);
    Ok(format!("{base}/v3/auth/tokens"))
}

/// How long a token lives: `expires_at - issued_at` by Keystone's own clock (so a VM whose clock
/// is off still renews in time), or `expires_at - now` when Keystone omits `issued_at`.
fn token_lifetime(token: &TokenBody) -> Option<Duration> {
    let expires = parse_rfc3339_millis(&token.expires_at)?;
    let issued = match &token.issued_at {
        Some(issued) => parse_rfc3339_millis(issued)?,
        None => u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()?,
    };
    Some(Duration::from_millis(expires.saturating_sub(issued)))
}

/// When to renew a token of `lifetime`: 5 minutes before it expires, or at half its lifetime if
/// that comes first.
pub(crate) fn renew_after(lifetime: Duration) -> Duration {
    let margin = RENEW_BEFORE_EXPIRY.min(lifetime / 2);
    lifetime - margin
}

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
