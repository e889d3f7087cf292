//! The fleet's load generator: one process standing in for thousands of agents. It registers
//! the servers through the shim's admin API, fetches each server's document once (as an agent's
//! first poll does: bearer token, no validators; the answer carries the `ETag` and the
//! `X-Anneal-Long-Poll` maximum), then holds one long-poll per server, exactly as
//! `agent/src/source/http.rs` sends it: `GET <metadata_url>?wait=N` with `If-None-Match` and the
//! bearer token, re-sent on 304, with the agent's timeout of the wait plus 30 s. Each long-poll
//! task ends when its server's document changes and returns when that answer was read. The
//! agents' connections come from `SOURCE_ADDRESSES` loopback addresses in turn (`clients`), as
//! a fleet's come from many: from one, the shim's cap of active connections per address (1024)
//! refused some of the 10,000 first long-polls on PostgreSQL, whose token look-ups are slower,
//! so that more connections are still being authenticated at once while they ramp up.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, ETAG, HeaderValue, IF_NONE_MATCH};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::error::{BenchError, BenchResult};

/// The header by which the shim announces its longest long-poll (seconds).
const LONG_POLL_HEADER: &str = "x-anneal-long-poll";
/// The agent's default `long_poll_secs`.
const AGENT_LONG_POLL_SECS: u64 = 60;
/// The agent's default `read_timeout_secs`, added to the wait.
const AGENT_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Loopback addresses the agents connect from (127.0.0.1 to 127.0.0.16): 10,050 agents are
/// then about 630 per address, under the shim's per-address cap whatever is still active.
pub const SOURCE_ADDRESSES: u8 = 16;

/// The shim's admin API.
pub struct Admin {
    pub base: String,
    pub token: String,
    pub http: reqwest::Client,
}

/// A registered server as its agent knows it after the first poll.
#[derive(Debug, Clone)]
pub struct Member {
    pub name: String,
    metadata_url: String,
    authorization: HeaderValue,
    etag: String,
}

/// One server's long-poll answer with the changed document.
#[derive(Debug)]
pub struct Wakeup {
    /// When the answer (headers and body) had been read.
    pub at: Instant,
    pub body: Vec<u8>,
}

/// The running long-polls, in the order of the members given to [`park`].
pub struct Parked {
    /// `None` once taken by [`Parked::wait_for`].
    tasks: Vec<Option<JoinHandle<Result<Wakeup, String>>>>,
    sent: Arc<AtomicUsize>,
}

/// The outcome of every long-poll.
#[derive(Debug, Default)]
pub struct Outcome {
    pub wakeups: Vec<Wakeup>,
    pub failures: Vec<String>,
    /// Long-polls still held when the limit passed.
    pub not_woken: usize,
}

impl Admin {
    /// `POST /v1/servers` for every name, `concurrency` at a time; each name with its
    /// credentials (token, metadata_url), in the order of `names`.
    pub async fn register(&self, names: Vec<String>, concurrency: usize) -> BenchResult<Vec<(String, Value)>> {
        let base = self.base.clone();
        let token = self.token.clone();
        // Its own client: its connections close when registering is done, so they are not
        // counted among the parked long-polls' connections.
        let http = reqwest::Client::new();
        in_parallel(names, concurrency, move |name| {
            let (base, token, http) = (base.clone(), token.clone(), http.clone());
            async move {
                let response = http
                    .post(format!("{base}/v1/servers"))
                    .bearer_auth(&token)
                    .json(&json!({"name": name}))
                    .send()
                    .await
                    .map_err(|error| failed(&format!("POST /v1/servers {name}"), &error))?;
                let credentials = expect_json(response, &format!("POST /v1/servers {name}")).await?;
                Ok((name, credentials))
            }
        })
        .await
    }

    /// `POST /v1/stacks` with `body`; the reply's JSON.
    pub async fn create_stack(&self, body: &Value) -> BenchResult<Value> {
        let response = self
            .http
            .post(format!("{}/v1/stacks", self.base))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .map_err(|error| failed("POST /v1/stacks", &error))?;
        expect_json(response, "POST /v1/stacks").await
    }

    /// `GET /v1/servers`.
    pub async fn servers(&self) -> BenchResult<Vec<anneal_shim::model::ServerSummary>> {
        let response = self
            .http
            .get(format!("{}/v1/servers", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|error| failed("GET /v1/servers", &error))?;
        let listing = expect_json(response, "GET /v1/servers").await?;
        serde_json::from_value(listing).map_err(|error| BenchError::Failed(format!("GET /v1/servers: {error}")))
    }
}

/// The agents' HTTP clients, one per source address: agent `k` uses client `k mod len`.
pub fn clients() -> BenchResult<Vec<reqwest::Client>> {
    (1..=SOURCE_ADDRESSES)
        .map(|last| {
            reqwest::Client::builder()
                .tcp_nodelay(true)
                .pool_max_idle_per_host(usize::MAX)
                .local_address(std::net::IpAddr::from([127, 0, 0, last]))
                .build()
                .map_err(|error| BenchError::Failed(format!("cannot build the load generator's client: {error}")))
        })
        .collect()
}

/// Each server's first poll (`concurrency` at a time): its ETag and the long-poll wait the
/// agent would ask for, min(its default 60 s, the shim's announced maximum).
pub async fn first_polls(
    clients: &[reqwest::Client],
    registered: Vec<(String, Value)>,
    concurrency: usize,
) -> BenchResult<(Vec<Member>, u64)> {
    let clients = clients.to_vec();
    let answers =
        in_parallel(registered.into_iter().enumerate().collect(), concurrency, move |(index, (name, credentials))| {
            let http = clients[index % clients.len()].clone();
            async move { first_poll(&http, &name, &credentials).await }
        })
        .await?;
    let wait = answers.iter().map(|(_, wait)| *wait).min().unwrap_or(0);
    if wait == 0 {
        return Err(BenchError::Failed("the shim announced no long-poll (X-Anneal-Long-Poll)".into()));
    }
    Ok((answers.into_iter().map(|(member, _)| member).collect(), wait))
}

async fn first_poll(http: &reqwest::Client, name: &str, credentials: &Value) -> BenchResult<(Member, u64)> {
    let field = |key: &str| {
        credentials[key].as_str().map(str::to_string).ok_or_else(|| {
            BenchError::Failed(format!("POST /v1/servers {name}: no {key} in the credentials: {credentials}"))
        })
    };
    let (token, metadata_url) = (field("token")?, field("metadata_url")?);
    let authorization = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| BenchError::Failed(format!("server {name}: the token is not a header value")))?;
    let what = format!("GET metadata of {name}");
    let response = http
        .get(&metadata_url)
        .header(AUTHORIZATION, authorization.clone())
        .send()
        .await
        .map_err(|error| failed(&what, &error))?;
    if response.status() != StatusCode::OK {
        return Err(BenchError::Failed(format!("{what}: {}", response.status())));
    }
    let header = |key: &str| response.headers().get(key).and_then(|value| value.to_str().ok()).map(str::to_string);
    let etag = header(ETAG.as_str()).ok_or_else(|| BenchError::Failed(format!("{what}: no ETag")))?;
    let announced = header(LONG_POLL_HEADER).and_then(|text| text.trim().parse::<u64>().ok()).unwrap_or(0);
    response.bytes().await.map_err(|error| failed(&what, &error))?;
    let member = Member { name: name.to_string(), metadata_url, authorization, etag };
    Ok((member, announced.min(AGENT_LONG_POLL_SECS)))
}

/// Starts one long-poll per member; member `i` sends its first request `i * stagger` from now
/// so that the shim is not asked to accept every connection in the same millisecond.
pub fn park(clients: &[reqwest::Client], members: Vec<Member>, wait_secs: u64, stagger: Duration) -> Parked {
    let sent = Arc::new(AtomicUsize::new(0));
    let start = tokio::time::Instant::now();
    let tasks = members
        .into_iter()
        .enumerate()
        .map(|(index, member)| {
            let start_at = start + stagger * u32::try_from(index).unwrap_or(u32::MAX);
            let http = clients[index % clients.len()].clone();
            Some(tokio::spawn(long_poll(http, member, wait_secs, start_at, Arc::clone(&sent))))
        })
        .collect();
    Parked { tasks, sent }
}

impl Parked {
    /// How many long-polls have sent their first request.
    pub fn sent(&self) -> usize {
        self.sent.load(Ordering::SeqCst)
    }

    /// Waits for the answer of long-poll `index` alone (which is then no longer collected).
    pub async fn wait_for(&mut self, index: usize, limit: Duration) -> Result<Wakeup, String> {
        let mut task = self.tasks.get_mut(index).and_then(Option::take).ok_or("no such long-poll")?;
        match tokio::time::timeout(limit, &mut task).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(join_error)) => Err(format!("long-poll task: {join_error}")),
            Err(_) => {
                task.abort();
                Err(format!("long-poll {index} not answered within {limit:?}"))
            }
        }
    }

    /// Waits until every long-poll answered with a new document or `limit` passed (the ones
    /// still held then are stopped and counted as not woken).
    pub async fn collect(self, limit: Duration) -> Outcome {
        let deadline = tokio::time::Instant::now() + limit;
        let mut outcome = Outcome::default();
        for mut task in self.tasks.into_iter().flatten() {
            match tokio::time::timeout_at(deadline, &mut task).await {
                Ok(Ok(Ok(wakeup))) => outcome.wakeups.push(wakeup),
                Ok(Ok(Err(failure))) => outcome.failures.push(failure),
                Ok(Err(join_error)) => outcome.failures.push(format!("long-poll task: {join_error}")),
                Err(_) => {
                    task.abort();
                    outcome.not_woken += 1;
                }
            }
        }
        outcome
    }
}

async fn long_poll(
    http: reqwest::Client,
    member: Member,
    wait_secs: u64,
    start_at: tokio::time::Instant,
    sent: Arc<AtomicUsize>,
) -> Result<Wakeup, String> {
    tokio::time::sleep_until(start_at).await;
    let url = format!("{}?wait={wait_secs}", member.metadata_url);
    let mut counted = false;
    loop {
        let request = http
            .get(&url)
            .header(AUTHORIZATION, member.authorization.clone())
            .header(IF_NONE_MATCH, &member.etag)
            .timeout(Duration::from_secs(wait_secs) + AGENT_READ_TIMEOUT);
        if !counted {
            sent.fetch_add(1, Ordering::SeqCst);
            counted = true;
        }
        let response = request.send().await.map_err(|error| describe(&member.name, &error))?;
        match response.status() {
            // The wait ended without a change: an agent asks again at once.
            StatusCode::NOT_MODIFIED => continue,
            StatusCode::OK => {
                let etag = response.headers().get(ETAG).and_then(|value| value.to_str().ok()).map(str::to_string);
                let body = response.bytes().await.map_err(|error| describe(&member.name, &error))?;
                let at = Instant::now();
                if etag.as_deref() == Some(member.etag.as_str()) {
                    return Err(format!("{}: 200 with the ETag it already had", member.name));
                }
                return Ok(Wakeup { at, body: body.to_vec() });
            }
            status => return Err(format!("{}: long-poll answered {status}", member.name)),
        }
    }
}

/// What an `in_parallel` worker did: its results, each with its item's index.
type WorkerResult<R> = BenchResult<Vec<(usize, R)>>;

/// Runs `work` over `items` with `concurrency` workers; results in the order of `items`, or the
/// first error.
async fn in_parallel<T, R, F, Fut>(items: Vec<T>, concurrency: usize, work: F) -> BenchResult<Vec<R>>
where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(T) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = BenchResult<R>> + Send,
{
    let total = items.len();
    let queue = Arc::new(Mutex::new(items.into_iter().enumerate().collect::<VecDeque<_>>()));
    let workers: Vec<JoinHandle<WorkerResult<R>>> = (0..concurrency.clamp(1, total.max(1)))
        .map(|_| {
            let queue = Arc::clone(&queue);
            let work = work.clone();
            tokio::spawn(async move {
                let mut done = Vec::new();
                loop {
                    let next = queue.lock().map_err(|_| BenchError::Failed("work queue poisoned".into()))?.pop_front();
                    let Some((index, item)) = next else { return Ok(done) };
                    done.push((index, work(item).await?));
                }
            })
        })
        .collect();
    let mut results = Vec::with_capacity(total);
    for worker in workers {
        let done = worker.await.map_err(|error| BenchError::Failed(format!("worker task: {error}")))??;
        results.extend(done);
    }
    results.sort_by_key(|(index, _)| *index);
    Ok(results.into_iter().map(|(_, result)| result).collect())
}

async fn expect_json(response: reqwest::Response, what: &str) -> BenchResult<Value> {
    let status = response.status();
    let text = response.text().await.map_err(|error| failed(what, &error))?;
    if !status.is_success() {
        return Err(BenchError::Failed(format!("{what}: {status}: {text}")));
    }
    serde_json::from_str(&text).map_err(|error| BenchError::Failed(format!("{what}: not JSON ({error}): {text}")))
}

fn describe(what: &str, error: &reqwest::Error) -> String {
    format!("{what}: {}", anneal_shim::error_chain(error))
}

fn failed(what: &str, error: &reqwest::Error) -> BenchError {
    BenchError::Failed(describe(what, error))
}
