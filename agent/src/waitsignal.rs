//! `anneal-agent signal URL`: signals a wait-condition handle, replacing cfn-signal and the
//! handle's `curl_cli` (see docs/cli.md, docs/http-api.md). It builds the body in the style the
//! handle expects, sends it to the URL unchanged, and retries transient failures with jittered
//! backoff until the handle answers or `retry_for` runs out. Unlike cfn-signal it fails loudly on a
//! refusal, and it never asks a metadata service for the instance id. The URL's query string (its
//! credentials) never reaches a log line or an error. Given the agent's config (`--config`), a
//! handle whose origin is one of an `http` source's goes to the next replica's origin after its
//! host failed, as the outbox's signals do (see `signal::route`).

use std::time::Duration;

use anneal_protocol::pyjson;
use anneal_protocol::waitcondition::{AwsWaitSignal, WaitStatus};
use rand::SeedableRng;
use reqwest::{Method, header};
use serde_json::{Map, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::SIGNAL_RETRY;
use crate::config::Config;
use crate::httpclient::{self, TrustRoots};
use crate::secret::redact_url;
use crate::signal::outcome::DeliveryOutcome;
use crate::signal::route::Replicas;
use crate::signal::send::{Attempt, CONNECT_TIMEOUT, REQUEST_TIMEOUT, check_url, read_attempt};

/// cfn-signal's defaults for the AWS style.
pub(crate) const AWS_DEFAULT_REASON: &str = "Configuration Complete";
pub(crate) const AWS_DEFAULT_DATA: &str = "Application has completed configuration.";

const HOSTNAME_PATH: &str = "/proc/sys/kernel/hostname";

/// One wait-condition signal, as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitSignal {
    pub url: String,
    pub status: WaitStatus,
    pub reason: Option<String>,
    pub data: Option<String>,
    pub id: Option<String>,
    /// AWS::CloudFormation::WaitConditionHandle style (PUT, capitalised keys) instead of
    /// OS::Heat::WaitConditionHandle style (POST, lower-case keys).
    pub aws: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum WaitSignalError {
    #[error("cannot build the HTTP client for wait-condition signals")]
    Client {
        #[source]
        source: reqwest::Error,
    },
    #[error("cannot signal {url}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("cannot read the host name from {path} for the signal's UniqueId (pass --id)")]
    Hostname {
        path: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot signal {url}: refused: {error}")]
    Refused { url: String, error: String },
    #[error("cannot signal {url}: gave up after {attempts} attempts in {elapsed:?}: {last_error}")]
    GaveUp { url: String, attempts: u32, elapsed: Duration, last_error: String },
    #[error("cannot signal {url}: stopped by shutdown")]
    Cancelled { url: String },
}

/// Sends `signal`, retrying transient failures (408, 429, 5xx, connection errors, timeouts) until
/// `retry_for` has elapsed; returns the handle's 2xx status. A refusal (other 4xx, 3xx) fails at
/// once with the status and an excerpt of the response body. The client is the agent's one kind,
/// trusting `roots` besides the system's. With `config`, a retry after the host failed goes to
/// the next replica of the `http` source whose origin the URL has, if any.
pub async fn send_wait_signal(
    signal: &WaitSignal,
    retry_for: Duration,
    roots: &TrustRoots,
    config: Option<&Config>,
    shutdown: &CancellationToken,
) -> Result<u16, WaitSignalError> {
    let url = redact_url(&signal.url);
    let mut parsed =
        check_url(&signal.url).map_err(|reason| WaitSignalError::InvalidUrl { url: url.clone(), reason })?;
    let replicas = config.map(Replicas::from_config).unwrap_or_default();
    let (method, body) = request_for(signal)?;
    let client = httpclient::build(CONNECT_TIMEOUT, Some(REQUEST_TIMEOUT), roots)
        .map_err(|source| WaitSignalError::Client { source })?;
    let started = Instant::now();
    let mut rng = rand::rngs::StdRng::from_os_rng();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let request = client
            .request(method.clone(), parsed.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.clone());
        let Attempt { outcome, host_failed } = tokio::select! {
            () = shutdown.cancelled() => return Err(WaitSignalError::Cancelled { url }),
            sent = request.send() => read_attempt(sent).await,
        };
        let last_error = match outcome {
            DeliveryOutcome::Delivered { status } => {
                tracing::info!(url = %url, status, attempts, "wait-condition signal delivered");
                return Ok(status);
            }
            DeliveryOutcome::Permanent { error } => {
                return Err(WaitSignalError::Refused { url, error });
            }
            DeliveryOutcome::Transient { error } => error,
        };
        if host_failed {
            fail_over(&replicas, &mut parsed);
        }
        let remaining = retry_for.saturating_sub(started.elapsed());
        if remaining.is_zero() {
            return Err(WaitSignalError::GaveUp { url, attempts, elapsed: started.elapsed(), last_error });
        }
        // The last wait is cut short so one final attempt happens right at the deadline.
        let delay = SIGNAL_RETRY.delay(attempts, &mut rng).min(remaining);
        let retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        tracing::warn!(url = %url, error = last_error, attempts, retry_in_ms, "wait-condition signal not delivered; will retry");
        tokio::select! {
            () = shutdown.cancelled() => return Err(WaitSignalError::Cancelled { url }),
            () = tokio::time::sleep(delay) => {}
        }
    }
}

/// Points `url` at the next replica's origin when its origin is a source's (logged, redacted).
fn fail_over(replicas: &Replicas, url: &mut reqwest::Url) {
    let Some(next) = replicas.next_url(url.as_str()) else { return };
    match check_url(&next) {
        Ok(parsed) => {
            let (from, to) = (redact_url(url.as_str()), redact_url(&next));
            tracing::warn!(
                url = from,
                next_url = to,
                "wait-condition handle failing; the next attempt goes to the next replica"
            );
            *url = parsed;
        }
        Err(error) => tracing::warn!(error, "cannot fail over the wait-condition signal; retrying its URL"),
    }
}

/// The verb and exact body for `signal`; the AWS style's UniqueId defaults to the host name.
pub(crate) fn request_for(signal: &WaitSignal) -> Result<(Method, String), WaitSignalError> {
    if !signal.aws {
        return Ok((Method::POST, heat_body(signal)));
    }
    let unique_id = match &signal.id {
        Some(id) => id.clone(),
        None => hostname()?,
    };
    Ok((Method::PUT, aws_body(signal, unique_id)))
}

/// The kernel's host name (what gethostname(2) returns). Read from procfs because the nix
/// `hostname` feature is not enabled; the agent is Linux-only anyway.
pub(crate) fn hostname() -> Result<String, WaitSignalError> {
    std::fs::read_to_string(HOSTNAME_PATH)
        .map(|name| name.trim().to_string())
        .map_err(|source| WaitSignalError::Hostname { path: HOSTNAME_PATH, source })
}

/// OS::Heat style: `{"status", "reason", "data", "id"}`, each optional key only when given.
/// `status` is always sent (Heat would default it to SUCCESS, but an explicit body is clearer).
pub(crate) fn heat_body(signal: &WaitSignal) -> String {
    let mut body = Map::new();
    body.insert("status".into(), status_value(signal.status));
    for (key, value) in [("reason", &signal.reason), ("data", &signal.data), ("id", &signal.id)] {
        if let Some(value) = value {
            body.insert(key.into(), Value::String(value.clone()));
        }
    }
    pyjson::dumps(&Value::Object(body), true)
}

/// AWS style: exactly `{"Status", "Reason", "UniqueId", "Data"}` with cfn-signal's defaults.
pub(crate) fn aws_body(signal: &WaitSignal, unique_id: String) -> String {
    let body = AwsWaitSignal {
        status: signal.status,
        reason: signal.reason.clone().unwrap_or_else(|| AWS_DEFAULT_REASON.to_string()),
        unique_id,
        data: Value::String(signal.data.clone().unwrap_or_else(|| AWS_DEFAULT_DATA.to_string())),
    };
    let value = serde_json::to_value(body).unwrap_or_else(|_| Value::Object(Map::new()));
    pyjson::dumps(&value, true)
}

fn status_value(status: WaitStatus) -> Value {
    Value::String(
        match status {
            WaitStatus::Success => "SUCCESS",
            WaitStatus::Failure => "FAILURE",
        }
        .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use anneal_protocol::waitcondition::HeatWaitSignal;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn signal(url: String) -> WaitSignal {
        WaitSignal { url, status: WaitStatus::Success, reason: None, data: None, id: None, aws: false }
    }

    async fn body_of_only_request(server: &MockServer) -> (String, String, String) {
        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests.len(), 1);
        let request = &requests[0];
        let content_type = request.headers["content-type"].to_str().unwrap().to_string();
        (request.method.to_string(), content_type, String::from_utf8(request.body.clone()).unwrap())
    }

    #[tokio::test]
    async fn heat_style_posts_lower_case_keys() {
        let server = MockServer::start().await;
        Mock::given(path("/handle")).respond_with(ResponseTemplate::new(200)).mount(&server).await;
        let mut full = signal(format!("{}/handle", server.uri()));
        full.status = WaitStatus::Failure;
        full.reason = Some("disk full \u{e9}".into());
        full.data = Some("{\"a\": 1}".into());
        full.id = Some("web-1".into());
        let status = send_wait_signal(&full, Duration::ZERO, &TrustRoots::default(), None, &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(status, 200);
        let (verb, content_type, body) = body_of_only_request(&server).await;
        assert_eq!((verb.as_str(), content_type.as_str()), ("POST", "application/json"));
        assert_eq!(body, r#"{"status": "FAILURE", "reason": "disk full \u00e9", "data": "{\"a\": 1}", "id": "web-1"}"#);
        let parsed = HeatWaitSignal::from_body(body.as_bytes()).unwrap();
        assert_eq!(parsed.status, WaitStatus::Failure);
        assert_eq!(heat_body(&signal(String::new())), r#"{"status": "SUCCESS"}"#);
    }

    #[tokio::test]
    async fn aws_style_puts_cfn_signal_defaults() {
        let server = MockServer::start().await;
        Mock::given(method("PUT")).respond_with(ResponseTemplate::new(200)).mount(&server).await;
        let mut aws = signal(format!("{}/v1/waitcondition/arn?Signature=x", server.uri()));
        aws.aws = true;
        aws.id = Some("i-1".into());
        send_wait_signal(&aws, Duration::ZERO, &TrustRoots::default(), None, &CancellationToken::new()).await.unwrap();
        let (verb, content_type, body) = body_of_only_request(&server).await;
        assert_eq!((verb.as_str(), content_type.as_str()), ("PUT", "application/json"));
        assert_eq!(
            body,
            r#"{"Status": "SUCCESS", "Reason": "Configuration Complete", "UniqueId": "i-1", "Data": "Application has completed configuration."}"#
        );
        let parsed: AwsWaitSignal = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed.unique_id, "i-1");

        aws.id = None;
        let (_, body) = request_for(&aws).unwrap();
        let parsed: AwsWaitSignal = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed.unique_id, hostname().unwrap());
        assert!(!parsed.unique_id.is_empty() && !parsed.unique_id.ends_with('\n'));
    }

    #[tokio::test]
    async fn transient_failures_are_retried_until_success() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(503))
            .up_to_n_times(1)
            .with_priority(1)
            .mount(&server)
            .await;
        Mock::given(method("POST")).respond_with(ResponseTemplate::new(202)).with_priority(2).mount(&server).await;
        let status = send_wait_signal(
            &signal(server.uri()),
            Duration::from_secs(10),
            &TrustRoots::default(),
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(status, 202);
        assert_eq!(server.received_requests().await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn gives_up_when_retry_for_runs_out_without_leaking_the_query() {
        let server = MockServer::start().await;
        Mock::given(method("POST")).respond_with(ResponseTemplate::new(429)).mount(&server).await;
        let url = format!("{}/h?Signature=secret", server.uri());
        let started = std::time::Instant::now();
        let error = send_wait_signal(
            &signal(url),
            Duration::from_millis(1_200),
            &TrustRoots::default(),
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        let WaitSignalError::GaveUp { attempts, ref last_error, .. } = error else { panic!("{error}") };
        assert!(attempts >= 2, "{attempts}");
        assert!(last_error.contains("429"));
        assert!(!error.to_string().contains("secret"), "{error}");
    }

    #[tokio::test]
    async fn refusal_fails_at_once_with_status_and_excerpt() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(400).set_body_string("Metadata format invalid"))
            .expect(1)
            .mount(&server)
            .await;
        let error = send_wait_signal(
            &signal(server.uri()),
            Duration::from_secs(30),
            &TrustRoots::default(),
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
        assert!(matches!(error, WaitSignalError::Refused { .. }));
        let text = error.to_string();
        assert!(text.contains("400") && text.contains("Metadata format invalid"), "{text}");
    }

    #[tokio::test]
    async fn connection_refused_is_retried_as_transient() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/h", listener.local_addr().unwrap());
        drop(listener);
        let error =
            send_wait_signal(&signal(url), Duration::ZERO, &TrustRoots::default(), None, &CancellationToken::new())
                .await
                .unwrap_err();
        assert!(matches!(error, WaitSignalError::GaveUp { attempts: 1, .. }), "{error}");
    }

    #[tokio::test]
    async fn a_failing_replica_is_retried_on_the_next_origin_of_the_configs_source() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let live = MockServer::start().await;
        let token = "0123456789abcdef".repeat(4);
        Mock::given(path(format!("/v1/waitconditions/{token}")))
            .respond_with(ResponseTemplate::new(200))
            .expect(1)
            .mount(&live)
            .await;
        let text = format!("[[source]]\nkind = \"http\"\nurl = [\"{dead}/m\", \"{}/m\"]\n", live.uri());
        let config = crate::config::parse(&text, std::path::Path::new("/etc/anneal/agent.toml")).unwrap();
        let handle = signal(format!("{dead}/v1/waitconditions/{token}"));
        let retry_for = Duration::from_secs(10);
        let shutdown = CancellationToken::new();
        let sent = send_wait_signal(&handle, retry_for, &TrustRoots::default(), Some(&config), &shutdown).await;
        assert_eq!(sent.unwrap(), 200);
        let without = send_wait_signal(&handle, Duration::ZERO, &TrustRoots::default(), None, &shutdown).await;
        assert!(matches!(without, Err(WaitSignalError::GaveUp { attempts: 1, .. })), "{without:?}");
    }

    #[tokio::test]
    async fn shutdown_cancels_a_pending_signal() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(10)))
            .mount(&server)
            .await;
        let shutdown = CancellationToken::new();
        let canceller = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            canceller.cancel();
        });
        let error =
            send_wait_signal(&signal(server.uri()), Duration::from_secs(60), &TrustRoots::default(), None, &shutdown)
                .await
                .unwrap_err();
        assert!(matches!(error, WaitSignalError::Cancelled { .. }), "{error}");
    }

    #[tokio::test]
    async fn unusable_urls_are_rejected_before_sending() {
        let error = send_wait_signal(
            &signal("mock://x?k=secret".into()),
            Duration::ZERO,
            &TrustRoots::default(),
            None,
            &CancellationToken::new(),
        )
        .await
        .unwrap_err();
        assert!(matches!(error, WaitSignalError::InvalidUrl { .. }));
        assert!(!error.to_string().contains("secret"), "{error}");
    }
}
