//! The `heat` source (POLL_SERVER_HEAT), as os-collect-config's heat collector reads it: a
//! Keystone v3 token (`keystone`), the orchestration endpoint of its catalog (already
//! `/v1/{project_id}`), then `GET {endpoint}/stacks/{stack_id}/resources/{resource_name}/metadata`
//! with `X-Auth-Token`; Heat answers `{"metadata": {...}}` and the inner object is the document.
//! A 401 drops the token and the request is made once more with a fresh one. The client is the
//! agent's one kind (`httpclient`); the password and the token never reach a log or an error.

use std::time::Duration;

use reqwest::header::ACCEPT;
use reqwest::{Client, Response, StatusCode, Url};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::body::{read_limited, request_error};
use super::{Fetched, MAX_DOCUMENT_BYTES, SourceError, parse_document, require_object};
use crate::config::HeatSourceConfig;
use crate::httpclient::{self, TrustRoots};
use crate::keystone::{AUTH_TOKEN_HEADER, Credentials, KeystoneSession};
use crate::secret::redact_url;

/// The catalog service type of Heat's native API.
pub(crate) const ORCHESTRATION: &str = "orchestration";

/// A heat metadata source: its Keystone session and what to read.
#[derive(Debug)]
pub(crate) struct HeatSource {
    name: String,
    keystone: KeystoneSession,
    region: Option<String>,
    stack_id: String,
    resource_name: String,
    client: Client,
    read_timeout: Duration,
    body_limit: usize,
}

impl HeatSource {
    /// Builds the client (trusting `roots` besides the system's); nothing is sent yet.
    pub(crate) fn new(name: String, config: &HeatSourceConfig, roots: &TrustRoots) -> Result<HeatSource, SourceError> {
        let client = httpclient::build(config.client.connect_timeout, None, roots)
            .map_err(|source| SourceError::Client { source_name: name.clone(), source })?;
        let keystone =
            KeystoneSession::new(Credentials::from(&config.keystone), client.clone(), config.client.read_timeout)
                .map_err(|source| SourceError::Keystone { source_name: name.clone(), source })?;
        Ok(HeatSource {
            name,
            keystone,
            region: config.keystone.region_name.clone(),
            stack_id: config.stack_id.clone(),
            resource_name: config.resource_name.clone(),
            client,
            read_timeout: config.client.read_timeout,
            body_limit: MAX_DOCUMENT_BYTES,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// What the source reads, for the cache identity (no secret in it).
    pub(super) fn described(&self) -> String {
        let credentials = self.keystone.credentials();
        format!(
            "heat {} {} {} {} {}",
            credentials.auth_url, credentials.user_id, credentials.project_id, self.stack_id, self.resource_name
        )
    }

    pub(crate) async fn fetch(&mut self, shutdown: &CancellationToken) -> Result<Fetched, SourceError> {
        tokio::select! {
            result = self.fetch_now() => result,
            () = shutdown.cancelled() => Ok(Fetched::Cancelled),
        }
    }

    async fn fetch_now(&self) -> Result<Fetched, SourceError> {
        let keystone_error = |source| SourceError::Keystone { source_name: self.name.clone(), source };
        let mut retried = false;
        loop {
            let token = self.keystone.token().await.map_err(keystone_error)?;
            let endpoint = token.endpoint(ORCHESTRATION, self.region.as_deref()).map_err(keystone_error)?;
            let url = metadata_url(&endpoint, &self.stack_id, &self.resource_name)
                .ok_or_else(|| self.bad_endpoint(&endpoint))?;
            let redacted = redact_url(url.as_str());
            tracing::debug!(source = %self.name, url = %redacted, "fetching metadata");
            let response = self
                .client
                .get(url)
                .timeout(self.read_timeout)
                .header(AUTH_TOKEN_HEADER, token.header())
                .header(ACCEPT, "application/json")
                .send()
                .await
                .map_err(|source| request_error(&self.name, &redacted, source))?;
            if response.status() == StatusCode::UNAUTHORIZED && !retried {
                // The token was revoked or expired early: one more try with a fresh one.
                tracing::debug!(source = %self.name, "heat refused the token; authenticating again");
                self.keystone.invalidate(&token).await;
                retried = true;
                continue;
            }
            return self.handle(response, &redacted).await;
        }
    }

    async fn handle(&self, response: Response, url: &str) -> Result<Fetched, SourceError> {
        let status = response.status().as_u16();
        let (source_name, url) = (self.name.clone(), url.to_string());
        match status {
            200..=299 => {}
            404 => return Err(SourceError::NotFound { source_name, url }),
            300..=399 => return Err(SourceError::Redirect { source_name, url, status }),
            _ => return Err(SourceError::Status { source_name, url, status }),
        }
        let body = read_limited(&self.name, &url, response, self.body_limit).await?;
        let mut answer = parse_document(&self.name, &url, &body)?;
        // Heat wraps the metadata: `{"metadata": {...}}` (heatclient reads the inner object).
        let metadata = answer.get_mut("metadata").map(Value::take).unwrap_or(Value::Null);
        let document = require_object(&self.name, &format!("the \"metadata\" of {url}"), metadata)?;
        tracing::debug!(source = %self.name, bytes = body.len(), "fetched metadata");
        Ok(Fetched::Document(document))
    }

    fn bad_endpoint(&self, endpoint: &str) -> SourceError {
        SourceError::BadEndpoint {
            source_name: self.name.clone(),
            url: redact_url(endpoint),
            service_type: ORCHESTRATION,
        }
    }

    #[cfg(test)]
    fn set_body_limit(&mut self, limit: usize) {
        self.body_limit = limit;
    }
}

/// `{endpoint}/stacks/{stack_id}/resources/{resource_name}/metadata`, as heatclient builds it:
/// the stack id's `NAME/ID` keeps its slash, every part is percent-encoded as a path segment.
/// `None` when the endpoint cannot carry a path, or a part is `.` or `..` (which would climb).
pub(crate) fn metadata_url(endpoint: &str, stack_id: &str, resource_name: &str) -> Option<Url> {
    resource_url(endpoint, stack_id, resource_name, "metadata")
}

/// `{endpoint}/stacks/{stack_id}/resources/{resource_name}/{action}` (`metadata`, `signal`).
pub(crate) fn resource_url(endpoint: &str, stack_id: &str, resource_name: &str, action: &str) -> Option<Url> {
    let mut url = Url::parse(endpoint).ok()?;
    let dots = |part: &str| part == "." || part == "..";
    if !matches!(url.scheme(), "http" | "https") || dots(resource_name) || stack_id.split('/').any(dots) {
        return None;
    }
    {
        let mut segments = url.path_segments_mut().ok()?;
        segments.pop_if_empty().push("stacks");
        segments.extend(stack_id.split('/').filter(|part| !part.is_empty()));
        segments.push("resources").push(resource_name).push(action);
    }
    Some(url)
}

#[cfg(test)]
mod tests;
