//! The Keystone-authenticated signal transports, as heat-config-notify sends them: HEAT_SIGNAL
//! (`POST {orchestration}/stacks/{deploy_stack_id}/resources/{deploy_resource_name}/signal` with
//! the signal body) and ZAQAR_SIGNAL (`POST {messaging}/v2/queues/{deploy_queue_id}/messages` with
//! `{"messages": [{"body": <signal body>, "ttl": 600}]}`), both with a token for the deployment's
//! `deploy_*` credentials. Sessions are cached per credentials (`KeystoneSessions`), so a burst
//! of signals authenticates once; a 401 from the service renews the token once.
//!
//! Classification: Keystone unreachable or failing is transient, refused credentials or a
//! catalog without the service permanent, a 401 with a fresh token permanent, the service's
//! other answers as for HTTP signals. An error text never holds the password or the token.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anneal_protocol::KeystoneInputs;
use anneal_protocol::signal::{MAX_SIGNAL_CHARS, signal_body};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{Client, StatusCode, Url};

use super::{SIGNAL_ID_HEADER, SignalSender, classify_error, read_outcome};
use crate::keystone::{AUTH_TOKEN_HEADER, Credentials, KeystoneError, KeystoneSession, Token};
use crate::secret::{Secret, redact_url};
use crate::signal::outcome::{DeliveryOutcome, signal_id};
use crate::source::heat::{ORCHESTRATION, resource_url};
use crate::source::zaqar::{CLIENT_ID_HEADER, MESSAGING, PROJECT_ID_HEADER, client_id, queue_url};
use anneal_protocol::HookResult;

/// How many credentials' sessions are kept; one per deployment user is typical, and an agent
/// runs a handful of signalling deployments at a time.
const MAX_SESSIONS: usize = 16;
/// The message lifetime heat-config-notify gives a ZAQAR_SIGNAL.
const ZAQAR_SIGNAL_TTL: u32 = 600;

/// The Keystone sessions of recent signals, keyed by their credentials.
#[derive(Debug, Default)]
pub(crate) struct KeystoneSessions {
    sessions: Mutex<Vec<Arc<KeystoneSession>>>,
}

impl KeystoneSessions {
    /// The session for `credentials`, reused when one exists; the oldest is dropped when full.
    /// Token requests over `client` take at most `timeout`.
    fn get(
        &self,
        credentials: Credentials,
        client: &Client,
        timeout: Duration,
    ) -> Result<Arc<KeystoneSession>, KeystoneError> {
        let mut sessions = self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(session) = sessions.iter().find(|session| *session.credentials() == credentials) {
            return Ok(Arc::clone(session));
        }
        let session = Arc::new(KeystoneSession::new(credentials, client.clone(), timeout)?);
        // Same user, new password: the old session is of no use any more.
        sessions.retain(|old| {
            let old = old.credentials();
            let new = session.credentials();
            !(old.auth_url == new.auth_url && old.user_id == new.user_id && old.project_id == new.project_id)
        });
        if sessions.len() >= MAX_SESSIONS {
            sessions.remove(0);
        }
        sessions.push(Arc::clone(&session));
        Ok(session)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.sessions.lock().unwrap().len()
    }
}

/// One signal to send: the deployment id, its credentials, where it goes and the result.
struct Signal<'a> {
    id: &'a str,
    keystone: &'a KeystoneInputs,
    target: Target<'a>,
    result: &'a HookResult,
}

/// What differs between the two transports: the catalog service, the URL and the body.
enum Target<'a> {
    Heat { stack_id: &'a str, resource_name: &'a str },
    Zaqar { queue_id: &'a str },
}

impl Target<'_> {
    fn transport(&self) -> &'static str {
        match self {
            Target::Heat { .. } => "HEAT_SIGNAL",
            Target::Zaqar { .. } => "ZAQAR_SIGNAL",
        }
    }

    fn service_type(&self) -> &'static str {
        match self {
            Target::Heat { .. } => ORCHESTRATION,
            Target::Zaqar { .. } => MESSAGING,
        }
    }

    fn url(&self, endpoint: &str) -> Option<Url> {
        match self {
            Target::Heat { stack_id, resource_name } => resource_url(endpoint, stack_id, resource_name, "signal"),
            Target::Zaqar { queue_id } => queue_url(endpoint, queue_id, &["messages"], &[]),
        }
    }

    fn body(&self, signal: &str) -> String {
        match self {
            Target::Heat { .. } => signal.to_string(),
            Target::Zaqar { .. } => format!(r#"{{"messages": [{{"body": {signal}, "ttl": {ZAQAR_SIGNAL_TTL}}}]}}"#),
        }
    }

    /// The inputs this transport cannot do without, by name.
    fn required(&self) -> Vec<(&'static str, &str)> {
        match self {
            Target::Heat { stack_id, resource_name } => {
                vec![("deploy_stack_id", stack_id), ("deploy_resource_name", resource_name)]
            }
            Target::Zaqar { queue_id } => vec![("deploy_queue_id", queue_id)],
        }
    }
}

impl SignalSender {
    pub(super) async fn send_heat(
        &self,
        id: &str,
        keystone: &KeystoneInputs,
        stack_id: &str,
        resource_name: &str,
        result: &HookResult,
    ) -> DeliveryOutcome {
        self.send_openstack(&Signal { id, keystone, target: Target::Heat { stack_id, resource_name }, result }).await
    }

    pub(super) async fn send_zaqar(
        &self,
        id: &str,
        keystone: &KeystoneInputs,
        queue_id: &str,
        result: &HookResult,
    ) -> DeliveryOutcome {
        self.send_openstack(&Signal { id, keystone, target: Target::Zaqar { queue_id }, result }).await
    }

    async fn send_openstack(&self, signal: &Signal<'_>) -> DeliveryOutcome {
        let (keystone, target) = (signal.keystone, &signal.target);
        let transport = target.transport();
        let mut required = vec![
            ("deploy_auth_url", keystone.auth_url.as_str()),
            ("deploy_user_id", &keystone.user_id),
            ("deploy_password", &keystone.password),
            ("deploy_project_id", &keystone.project_id),
        ];
        required.extend(target.required());
        if let Some((name, _)) = required.iter().find(|(_, value)| value.trim().is_empty()) {
            return DeliveryOutcome::Permanent {
                error: format!("{transport} needs the {name} input, which is missing or empty"),
            };
        }
        let client = match self.client() {
            Ok(client) => client,
            Err(error) => return DeliveryOutcome::Transient { error: crate::error_chain(&error) },
        };
        let credentials = Credentials {
            auth_url: keystone.auth_url.clone(),
            user_id: keystone.user_id.clone(),
            password: Secret::new(keystone.password.clone()),
            project_id: keystone.project_id.clone(),
        };
        let session = match self.sessions.get(credentials, client, self.request) {
            Ok(session) => session,
            Err(error) => return keystone_outcome(transport, &error),
        };
        let outcome = self.post_with_token(signal, &session, client).await;
        scrub(outcome, &keystone.password)
    }

    /// Posts the signal with a token, once more with a fresh token after a 401.
    async fn post_with_token(
        &self,
        signal: &Signal<'_>,
        session: &KeystoneSession,
        client: &Client,
    ) -> DeliveryOutcome {
        let (id, keystone, target) = (signal.id, signal.keystone, &signal.target);
        let transport = target.transport();
        let signal_text = signal_body(signal.result, MAX_SIGNAL_CHARS);
        let signal_id = signal_id(id, &signal_text);
        let body = target.body(&signal_text);
        let mut retried = false;
        loop {
            let token = match session.token().await {
                Ok(token) => token,
                Err(error) => return keystone_outcome(transport, &error),
            };
            let url = match endpoint_url(&token, keystone, target) {
                Ok(url) => url,
                Err(error) => return DeliveryOutcome::Permanent { error },
            };
            tracing::debug!(deployment_id = id, transport, url = %redact_url(url.as_str()), %signal_id, "sending signal");
            crate::failpoint::hit_mid_signal(&url, "POST", &signal_id, &body);
            let mut request = client
                .post(url)
                .header(AUTH_TOKEN_HEADER, token.header())
                .header(CONTENT_TYPE, "application/json")
                .header(ACCEPT, "application/json")
                .header(SIGNAL_ID_HEADER, &signal_id)
                .body(body.clone());
            if let Target::Zaqar { queue_id } = target {
                let client_id = client_id(&format!("zaqar signal {} {queue_id}", keystone.user_id));
                request = request.header(CLIENT_ID_HEADER, client_id).header(PROJECT_ID_HEADER, &keystone.project_id);
            }
            let response = match request.send().await {
                Ok(response) => response,
                Err(error) => return classify_error(error),
            };
            if response.status() == StatusCode::UNAUTHORIZED && !retried {
                tracing::debug!(deployment_id = id, transport, "the token was refused; authenticating again");
                session.invalidate(&token).await;
                retried = true;
                continue;
            }
            let outcome = read_outcome(response).await;
            return scrub(outcome, token.header().to_str().unwrap_or_default());
        }
    }
}

/// The signal URL on the catalog's endpoint for the target's service; a permanent error text when
/// the catalog has none or it cannot carry the path.
fn endpoint_url(token: &Token, keystone: &KeystoneInputs, target: &Target<'_>) -> Result<Url, String> {
    let transport = target.transport();
    let endpoint = token
        .endpoint(target.service_type(), keystone.region_name.as_deref())
        .map_err(|error| format!("{transport}: {}", crate::error_chain(&error)))?;
    target.url(&endpoint).ok_or_else(|| {
        format!(
            "{transport}: the {} endpoint {} cannot carry the signal path",
            target.service_type(),
            redact_url(&endpoint)
        )
    })
}

/// A Keystone failure as a delivery outcome: transient when Keystone may recover.
fn keystone_outcome(transport: &str, error: &KeystoneError) -> DeliveryOutcome {
    let error_text = format!("{transport}: {}", crate::error_chain(error));
    if error.is_transient() {
        DeliveryOutcome::Transient { error: error_text }
    } else {
        DeliveryOutcome::Permanent { error: error_text }
    }
}

/// The outcome with `secret` masked in its error text, in case a server echoed it.
fn scrub(outcome: DeliveryOutcome, secret: &str) -> DeliveryOutcome {
    if secret.len() < 4 {
        return outcome;
    }
    match outcome {
        DeliveryOutcome::Transient { error } => DeliveryOutcome::Transient { error: error.replace(secret, "***") },
        DeliveryOutcome::Permanent { error } => DeliveryOutcome::Permanent { error: error.replace(secret, "***") },
        delivered => delivered,
    }
}

#[cfg(test)]
mod tests;
