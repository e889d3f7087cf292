//! The HTTP side of scenario 7: creating the stacks through the admin API, reading the signal
//! URLs from the server's document (as its agent would), and the senders that post each once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::error::{BenchError, BenchResult, http_error};

/// `POST <base>/v1/stacks` of `template` as stack `name`.
pub async fn create_stack(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
    name: &str,
    template: String,
) -> BenchResult<()> {
    let response = http
        .post(format!("{base}/v1/stacks"))
        .bearer_auth(admin)
        .json(&serde_json::json!({"name": name, "template": template}))
        .timeout(Duration::from_secs(300))
        .send()
        .await
        .map_err(http_error("POST /v1/stacks"))?;
    if !response.status().is_success() {
        let status = response.status();
        return Err(BenchError::Failed(format!(
            "stack create: {status}: {}",
            response.text().await.unwrap_or_default()
        )));
    }
    Ok(())
}

/// The `deploy_signal_id` of every deployment in the server's document.
pub async fn signal_urls(http: &reqwest::Client, metadata_url: &str, token: &str) -> BenchResult<Vec<String>> {
    let response =
        http.get(metadata_url).bearer_auth(token).send().await.map_err(http_error("GET the server's metadata"))?;
    let document: Value = response.json().await.map_err(http_error("the server's metadata"))?;
    Ok(super::signal_ids(&document))
}

/// Posts every URL once from `senders` tasks; fails on any non-2xx.
pub async fn send_all(http: &reqwest::Client, urls: Vec<String>, senders: usize) -> BenchResult<Duration> {
    let queue = Arc::new(Mutex::new(urls));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..senders {
        let (queue, http) = (Arc::clone(&queue), http.clone());
        tasks.spawn(async move {
            loop {
                let next = queue.lock().ok().and_then(|mut urls| urls.pop());
                let Some(url) = next else { return Ok(()) };
                let response = http
                    .post(url)
                    .header("Content-Type", "application/json")
                    .body("{\"deploy_status_code\": 0}")
                    .send()
                    .await
                    .map_err(http_error("POST a signal"))?;
                if !response.status().is_success() {
                    return Err(BenchError::Failed(format!("a signal was answered {}", response.status())));
                }
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.map_err(|error| BenchError::Failed(format!("a sender task failed: {error}")))??;
    }
    Ok(started.elapsed())
}

/// `GET <base>/v1/stacks/<name>`'s status.
pub async fn stack_status(http: &reqwest::Client, base: &str, admin: &str, name: &str) -> BenchResult<String> {
    let response = http
        .get(format!("{base}/v1/stacks/{name}"))
        .bearer_auth(admin)
        .send()
        .await
        .map_err(http_error("GET /v1/stacks/<name>"))?;
    let detail: Value = response.json().await.map_err(http_error("stack detail"))?;
    Ok(detail["status"].as_str().unwrap_or_default().to_string())
}
