//! Tests of the HTTP layer: an in-memory fake `Service` behind the real router, served over
//! real HTTP on 127.0.0.1:0 and driven with reqwest.

mod admin;
mod metadata;
mod signals;
mod ui;
mod units;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{ApiConfig, format_http_date, serve};
use crate::model::*;
use crate::token::hash_token;

pub(super) const ADMIN_TOKEN: &str = "adminadminadminadminadminadminadminadminadminadminadminadmin0000";
pub(super) const WEB_TOKEN: &str = "1111111111111111111111111111111111111111111111111111111111111111";
pub(super) const DB_TOKEN: &str = "2222222222222222222222222222222222222222222222222222222222222222";
/// Well formed, but nobody's.
pub(super) const UNKNOWN_TOKEN: &str = "9999999999999999999999999999999999999999999999999999999999999999";
/// Signal tokens the fake answers with each acknowledgement.
pub(super) const APPLIED_TOKEN: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
pub(super) const DUPLICATE_TOKEN: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
pub(super) const STALE_TOKEN: &str = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
/// First publication time of every fake document (2026-11-21T05:00:00Z).
pub(super) const PUBLISHED_AT: u64 = 1_795_237_200;

struct FakeServer {
    token: String,
    versions: watch::Sender<u64>,
    body: String,
    published_at: u64,
}

/// What the fake was asked, for assertions.
#[derive(Default)]
pub(super) struct Calls {
    pub touches: Vec<String>,
    pub metadata_reads: usize,
    pub deployment_signals: Vec<(String, Value, Option<String>)>,
    pub wait_signals: Vec<(String, WaitConditionSignal)>,
    pub stack_requests: Vec<(String, StackRequest)>,
}

/// In-memory `Service`: servers `web` and `db` (`db` is in use: removing it is refused); stack
/// names choose the outcome (`missing` 404, `taken` 409, `invalid` Template, `bad` Invalid,
/// `broken` Store).
pub(super) struct FakeService {
    servers: Mutex<BTreeMap<String, FakeServer>>,
    pub calls: Mutex<Calls>,
    metrics: crate::metrics::Metrics,
    /// Web view sessions: key and expiry (unix seconds).
    sessions: Mutex<BTreeMap<String, u64>>,
    /// One change count for every stack (`change_stacks` bumps it).
    stack_changes: watch::Sender<u64>,
    /// The status every stack's graph reports (`set_graph_status`), and how often a graph was read.
    graph_status: Mutex<String>,
    pub graph_reads: std::sync::atomic::AtomicUsize,
}

impl FakeService {
    pub fn new() -> Arc<FakeService> {
        let servers = [("web", WEB_TOKEN), ("db", DB_TOKEN)]
            .into_iter()
            .map(|(name, token)| {
                let server = FakeServer {
                    token: token.to_string(),
                    versions: watch::channel(1).0,
                    body: document_body(name, 1),
                    published_at: PUBLISHED_AT,
                };
                (name.to_string(), server)
            })
            .collect();
        Arc::new(FakeService {
            servers: Mutex::new(servers),
            calls: Mutex::default(),
            metrics: Default::default(),
            sessions: Mutex::default(),
            stack_changes: watch::channel(0).0,
            graph_status: Mutex::new("CREATE_COMPLETE".to_string()),
            graph_reads: Default::default(),
        })
    }

    /// Every stack's graph now reports `status`, and its followers are told.
    pub fn set_graph_status(&self, status: &str) {
        *self.graph_status.lock().unwrap() = status.to_string();
        self.stack_changes.send_modify(|count| *count += 1);
    }

    /// The sessions stored now.
    pub fn session_count(&self) -> usize {
        self.sessions.lock().unwrap().len()
    }

    /// A new version of `server`'s document, published `seconds_later` after the first one.
    pub fn publish(&self, server: &str, seconds_later: u64) -> u64 {
        let mut servers = self.servers.lock().unwrap();
        let entry = servers.get_mut(server).unwrap();
        let version = *entry.versions.borrow() + 1;
        entry.body = document_body(server, version);
        entry.published_at = PUBLISHED_AT + seconds_later;
        entry.versions.send_replace(version);
        version
    }

    /// Waits (10 s at most) until `count` held long-polls subscribe to `server`'s document.
    pub async fn wait_for_watchers(&self, server: &str, count: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let watching = self.servers.lock().unwrap().get(server).map_or(0, |entry| entry.versions.receiver_count());
            if watching >= count {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{count} long-poll(s) of {server} never got held");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn calls<T>(&self, read: impl FnOnce(&Calls) -> T) -> T {
        read(&self.calls.lock().unwrap())
    }
}

pub(super) fn document_body(server: &str, version: u64) -> String {
    format!(r#"{{"deployments":[],"anneal":{{"server":"{server}","version":{version}}}}}"#)
}

fn summary(name: &str, status: &str) -> StackSummary {
    StackSummary {
        name: name.to_string(),
        id: format!("id-{name}"),
        status: status.to_string(),
        status_reason: String::new(),
        created_at: "2026-11-21T05:00:00Z".to_string(),
        updated_at: "2026-11-21T05:00:00Z".to_string(),
        disable_rollback: true,
        rollback_due: false,
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot commit")]
struct CommitFailed(#[source] std::io::Error);

/// The outcome a stack name asks for.
fn scripted(name: &str) -> Result<(), ServiceError> {
    match name {
        "missing" => Err(ServiceError::NotFound { what: format!("stack {name}") }),
        "taken" => Err(ServiceError::Conflict { what: format!("stack {name}") }),
        "invalid" => Err(ServiceError::Template {
            problems: vec!["resource a: unknown type".to_string(), "dependency cycle: a -> a".to_string()],
        }),
        "bad" => Err(ServiceError::Invalid { message: "stack name must be short".to_string() }),
        "broken" => Err(ServiceError::Store(Box::new(CommitFailed(std::io::Error::other("disk on fire"))))),
        _ => Ok(()),
    }
}

impl Service for FakeService {
    async fn add_server(&self, request: AddServer) -> Result<ServerCredentials, ServiceError> {
        if self.servers.lock().unwrap().contains_key(&request.name) {
            return Err(ServiceError::Conflict { what: format!("server {}", request.name) });
        }
        let base = "http://127.0.0.1:8080/v1";
        Ok(ServerCredentials {
            metadata_url: format!("{base}/servers/{}/metadata", request.name),
            request_url: format!("{base}/metadata/{UNKNOWN_TOKEN}"),
            name: request.name,
            token: UNKNOWN_TOKEN.to_string(),
            metadata_urls: Vec::new(),
        })
    }

    async fn list_servers(&self) -> Result<Vec<ServerSummary>, ServiceError> {
        let servers = self.servers.lock().unwrap();
        let list = servers.iter().map(|(name, server)| ServerSummary {
            name: name.clone(),
            created_at: "2026-11-21T05:00:00Z".to_string(),
            metadata_version: *server.versions.borrow(),
            last_seen: None,
        });
        Ok(list.collect())
    }

    async fn remove_server(&self, name: &str) -> Result<(), ServiceError> {
        if name == "db" {
            return Err(ServiceError::InUse { message: "server db is used by stack(s) app".to_string() });
        }
        // Dropping the server drops its watch sender, as the engine does.
        let removed = self.servers.lock().unwrap().remove(name);
        removed.map(drop).ok_or_else(|| ServiceError::NotFound { what: format!("server {name}") })
    }

    async fn server_for_token(&self, token: &str) -> Result<Option<String>, ServiceError> {
        let servers = self.servers.lock().unwrap();
        Ok(servers.iter().find(|(_, server)| server.token == token).map(|(name, _)| name.clone()))
    }

    async fn rotate_server_token(&self, name: &str, _grace_secs: u64) -> Result<RotatedCredentials, ServiceError> {
        if !self.servers.lock().unwrap().contains_key(name) {
            return Err(ServiceError::NotFound { what: format!("server {name}") });
        }
        let base = "http://127.0.0.1:8080/v1";
        let credentials = ServerCredentials {
            metadata_url: format!("{base}/servers/{name}/metadata"),
            request_url: format!("{base}/metadata/{UNKNOWN_TOKEN}"),
            name: name.to_string(),
            token: UNKNOWN_TOKEN.to_string(),
            metadata_urls: Vec::new(),
        };
        Ok(RotatedCredentials { credentials, previous_token_expires_at: "2026-11-21T06:00:00Z".to_string() })
    }

    async fn token_owner(&self, token: &str) -> Result<Option<TokenOwner>, ServiceError> {
        let server = self.server_for_token(token).await?;
        Ok(server.map(|server| TokenOwner { server, expired: false, grace_ends_at: None }))
    }

    fn touch_server(&self, name: &str) {
        self.calls.lock().unwrap().touches.push(name.to_string());
    }

    async fn metadata(&self, server: &str) -> Result<MetadataDocument, ServiceError> {
        self.calls.lock().unwrap().metadata_reads += 1;
        let servers = self.servers.lock().unwrap();
        let entry = servers.get(server).ok_or_else(|| ServiceError::NotFound { what: format!("server {server}") })?;
        Ok(MetadataDocument {
            version: *entry.versions.borrow(),
            body: Arc::from(entry.body.as_str()),
            last_modified: format_http_date(entry.published_at),
            announced_at: None,
            server_token_hash: Arc::from(hash_token(&entry.token)),
        })
    }

    async fn watch_metadata(&self, server: &str) -> Result<watch::Receiver<u64>, ServiceError> {
        let servers = self.servers.lock().unwrap();
        let entry = servers.get(server).ok_or_else(|| ServiceError::NotFound { what: format!("server {server}") })?;
        Ok(entry.versions.subscribe())
    }

    async fn create_stack(&self, request: StackRequest) -> Result<StackSummary, ServiceError> {
        let name = request.name.clone().unwrap_or_default();
        scripted(&name)?;
        self.calls.lock().unwrap().stack_requests.push((name.clone(), request));
        Ok(summary(&name, "CREATE_IN_PROGRESS"))
    }

    async fn update_stack(&self, name: &str, request: StackRequest) -> Result<StackSummary, ServiceError> {
        scripted(name)?;
        self.calls.lock().unwrap().stack_requests.push((name.to_string(), request));
        Ok(summary(name, "UPDATE_IN_PROGRESS"))
    }

    async fn delete_stack(&self, name: &str) -> Result<StackSummary, ServiceError> {
        scripted(name)?;
        Ok(summary(name, "DELETE_IN_PROGRESS"))
    }

    async fn preview_stack(
        &self,
        name: Option<&str>,
        request: StackRequest,
    ) -> Result<crate::model::StackPlan, ServiceError> {
        scripted(name.or(request.name.as_deref()).unwrap_or_default())?;
        Err(ServiceError::Invalid { message: "no plans here".into() })
    }

    async fn stack_failures(&self, name: &str) -> Result<Vec<crate::model::Failure>, ServiceError> {
        scripted(name)?;
        Ok(Vec::new())
    }

    async fn mark_unhealthy(
        &self,
        stack: &str,
        _resource: &str,
        _reason: Option<String>,
        _reset: bool,
    ) -> Result<(), ServiceError> {
        scripted(stack)
    }

    async fn cancel_stack(&self, name: &str, rollback: bool) -> Result<StackSummary, ServiceError> {
        scripted(name)?;
        Ok(summary(name, if rollback { "UPDATE_FAILED" } else { "CREATE_FAILED" }))
    }

    async fn list_stacks(&self) -> Result<Vec<StackSummary>, ServiceError> {
        Ok(vec![summary("one", "CREATE_COMPLETE"), summary("two", "UPDATE_FAILED")])
    }

    fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    async fn metrics_snapshot(&self) -> Result<crate::metrics::Snapshot, ServiceError> {
        let servers = self.servers.lock().unwrap().keys().map(|name| (name.clone(), None)).collect();
        Ok(crate::metrics::Snapshot { servers, ..Default::default() })
    }

    async fn node_detail(&self, stack: &str, _node: &str) -> Result<crate::graph::NodeDetail, ServiceError> {
        scripted(stack)?;
        Err(ServiceError::NotFound { what: "resource".into() })
    }

    async fn stack_graph(&self, name: &str) -> Result<crate::graph::StackGraph, ServiceError> {
        scripted(name)?;
        self.graph_reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(crate::graph::StackGraph {
            stack: name.to_string(),
            status: self.graph_status.lock().unwrap().clone(),
            status_reason: String::new(),
            disable_rollback: true,
            rollback_due: false,
            nodes: Vec::new(),
            edges: Vec::new(),
        })
    }

    fn watch_stack(&self, _name: &str) -> watch::Receiver<u64> {
        self.stack_changes.subscribe()
    }

    async fn open_ui_session(&self, key: &str, lifetime_secs: u64) -> Result<(), ServiceError> {
        let expires_at = crate::engine::now_millis() / 1000 + lifetime_secs;
        self.sessions.lock().unwrap().insert(key.to_string(), expires_at);
        Ok(())
    }

    async fn ui_session_valid(&self, key: &str) -> Result<bool, ServiceError> {
        let now = crate::engine::now_millis() / 1000;
        Ok(self.sessions.lock().unwrap().get(key).is_some_and(|expires_at| *expires_at > now))
    }

    async fn close_ui_session(&self, key: &str) -> Result<bool, ServiceError> {
        Ok(self.sessions.lock().unwrap().remove(key).is_some())
    }

    async fn show_stack(&self, name: &str) -> Result<StackDetail, ServiceError> {
        scripted(name)?;
        Ok(StackDetail {
            summary: summary(name, "CREATE_COMPLETE"),
            parameters: BTreeMap::from([("password".to_string(), Value::from("******"))]),
            resources: vec![],
            outputs: vec![StackOutput {
                name: "out".to_string(),
                description: None,
                value: Value::from("resolved"),
                error: None,
            }],
        })
    }

    async fn show_stack_unresolved(&self, name: &str) -> Result<StackDetail, ServiceError> {
        Ok(StackDetail { outputs: Vec::new(), ..self.show_stack(name).await? })
    }

    /// One event; stack `many` has seven, ids 1 to 7, for paging.
    async fn stack_template(&self, name: &str) -> Result<StackTemplate, ServiceError> {
        scripted(name)?;
        Ok(StackTemplate { template: "heat_template_version: 2018-08-31\n".to_string() })
    }

    async fn stack_environment(&self, name: &str) -> Result<StackEnvironment, ServiceError> {
        scripted(name)?;
        Ok(StackEnvironment { parameters: BTreeMap::from([("password".to_string(), Value::from("******"))]) })
    }

    async fn stack_events(&self, name: &str) -> Result<Vec<Event>, ServiceError> {
        scripted(name)?;
        let count = if name == "many" { 7 } else { 1 };
        Ok((1..=count)
            .map(|id| Event {
                id,
                time: "2026-11-21T05:00:00Z".to_string(),
                resource: name.to_string(),
                status: "CREATE_IN_PROGRESS".to_string(),
                reason: "Stack CREATE started".to_string(),
            })
            .collect())
    }

    async fn signal_token_known(&self, token: &str) -> Result<bool, ServiceError> {
        Ok(signal_ack(token).is_some())
    }

    async fn deployment_signal(
        &self,
        token: &str,
        body: Value,
        signal_id: Option<String>,
    ) -> Result<Option<SignalAck>, ServiceError> {
        let ack = signal_ack(token);
        if ack.is_some() {
            self.calls.lock().unwrap().deployment_signals.push((token.to_string(), body, signal_id));
        }
        Ok(ack)
    }

    async fn wait_condition_signal(
        &self,
        token: &str,
        signal: WaitConditionSignal,
    ) -> Result<Option<SignalAck>, ServiceError> {
        let ack = signal_ack(token);
        if ack.is_some() {
            self.calls.lock().unwrap().wait_signals.push((token.to_string(), signal));
        }
        Ok(ack)
    }
}

fn signal_ack(token: &str) -> Option<SignalAck> {
    match token {
        APPLIED_TOKEN => Some(SignalAck::Applied),
        DUPLICATE_TOKEN => Some(SignalAck::Duplicate),
        STALE_TOKEN => Some(SignalAck::Stale),
        _ => None,
    }
}

/// A running API over a fake service.
pub(super) struct TestServer {
    pub url: String,
    pub client: reqwest::Client,
    pub service: Arc<FakeService>,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl TestServer {
    pub async fn start() -> TestServer {
        TestServer::start_with(|_| {}).await
    }

    pub async fn start_with(adjust: impl FnOnce(&mut ApiConfig)) -> TestServer {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = ApiConfig::new(hash_token(ADMIN_TOKEN));
        config.long_poll_max = Duration::from_secs(5);
        adjust(&mut config);
        let service = FakeService::new();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(serve(listener, Arc::clone(&service), config, shutdown.clone()));
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        TestServer { url, client, service, shutdown, task }
    }

    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.get(format!("{}{path}", self.url))
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, format!("{}{path}", self.url))
    }

    pub fn admin(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.request(method, path).bearer_auth(ADMIN_TOKEN)
    }
}

/// Status, headers and body of a response, parsed as JSON when it is JSON.
pub(super) async fn json_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap() };
    (status, body)
}

/// Asserts the error shape and returns its message.
pub(super) async fn error_of(response: reqwest::Response, status: u16) -> String {
    let content_type = response.headers().get("content-type").map(|value| value.to_str().unwrap().to_string());
    let (actual, body) = json_of(response).await;
    assert_eq!(actual, status, "body: {body}");
    assert_eq!(content_type.as_deref(), Some("application/json"));
    assert_eq!(body["error"]["code"], status, "body: {body}");
    body["error"]["message"].as_str().unwrap().to_string()
}
