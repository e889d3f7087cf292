//! A real headless Chromium for the web view's tests, driven through chromedriver with the W3C
//! WebDriver protocol (JSON over HTTP on a loopback port the test picks): navigate, find, click,
//! type, run a script to read the DOM, take a screenshot. Both come from Debian's `chromium` and
//! `chromium-driver` packages (scripts/test installs them). Chromium runs with the flags that
//! keep it off the network (no background networking, sync, component updates or QUIC) and a
//! fresh profile in the test's temp dir; chromedriver runs in its own process group, stopped
//! (with the browser it started) when the `Browser` drops.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::process::Command;

use crate::process::Daemon;

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Why the browser tests cannot run here, if they cannot: `None` when both binaries are
/// installed. scripts/test sets `ANNEAL_BROWSER_UNAVAILABLE` when it could not install them.
pub fn unavailable() -> Option<String> {
    if Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists() {
        return None;
    }
    Some(std::env::var("ANNEAL_BROWSER_UNAVAILABLE").unwrap_or_else(|_| {
        panic!(
            "{CHROMIUM} and {CHROMEDRIVER} are needed: install Debian's chromium and chromium-driver \
             (apt-get install chromium chromium-driver; scripts/test does it as root)"
        )
    }))
}

pub struct Browser {
    client: reqwest::Client,
    base: String,
    session: String,
    _driver: Daemon,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session (profile and logs in `dir`).
    pub async fn start(dir: &Path) -> Browser {
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("address").port();
        let mut command = Command::new(CHROMEDRIVER);
        command.arg(format!("--port={port}")).arg("--allowed-ips=127.0.0.1");
        let driver = Daemon::spawn(command, &dir.join("chromedriver.out"), &dir.join("chromedriver.log"));
        let client = crate::http_client();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while client.get(format!("{base}/status")).send().await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start on port {port}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = dir.join("chromium-profile");
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--disable-crash-reporter",
            "--disable-breakpad",
            "--window-size=1400,900",
        ];
        let mut args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let mut browser = Browser { client, base, session: String::new(), _driver: driver };
        let created = browser.call(reqwest::Method::POST, "/session", Some(capabilities)).await;
        browser.session = created["sessionId"].as_str().expect("a session id").to_string();
        browser
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{}", self.base, path);
        let mut request = self.client.request(method, &url).timeout(Duration::from_secs(60));
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_string());
        }
        let response = request.send().await.unwrap_or_else(|error| panic!("WebDriver {path}: {error}"));
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        assert!(status.is_success(), "WebDriver {path} answered {status}: {answer}");
        answer["value"].clone()
    }

    fn path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    pub async fn navigate(&self, url: &str) {
        self.call(reqwest::Method::POST, &self.path("/url"), Some(json!({"url": url}))).await;
    }

    /// Runs `script` (a function body; `arguments[i]` are `args`) in the page; its return value.
    pub async fn execute(&self, script: &str, args: Value) -> Value {
        self.call(reqwest::Method::POST, &self.path("/execute/sync"), Some(json!({"script": script, "args": args})))
            .await
    }

    /// The first element matching `css` (its WebDriver id).
    pub async fn find(&self, css: &str) -> String {
        let found = self
            .call(reqwest::Method::POST, &self.path("/element"), Some(json!({"using": "css selector", "value": css})))
            .await;
        found
            .as_object()
            .and_then(|element| element.values().next())
            .and_then(Value::as_str)
            .expect("an element id")
            .to_string()
    }

    pub async fn click(&self, css: &str) {
        let element = self.find(css).await;
        self.call(reqwest::Method::POST, &self.path(&format!("/element/{element}/click")), Some(json!({}))).await;
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        self.call(reqwest::Method::POST, &self.path(&format!("/element/{element}/value")), Some(json!({"text": text})))
            .await;
    }

    /// The value of the browser's cookie `name` for the current page (HttpOnly ones included:
    /// WebDriver sees what a page's script cannot).
    pub async fn cookie(&self, name: &str) -> Option<String> {
        let cookies = self.call(reqwest::Method::GET, &self.path("/cookie"), None).await;
        let found = cookies.as_array()?.iter().find(|cookie| cookie["name"] == name)?;
        found["value"].as_str().map(str::to_string)
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        use base64::Engine as _;
        let encoded = self.call(reqwest::Method::GET, &self.path("/screenshot"), None).await;
        base64::engine::general_purpose::STANDARD.decode(encoded.as_str().expect("base64 text")).expect("a PNG")
    }

    /// Polls `script` until it returns `true` (panics with `what` after `limit`).
    pub async fn wait_for(&self, script: &str, what: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            if self.execute(script, json!([])).await == Value::Bool(true) {
                return;
            }
            let body = self.execute("return document.body ? document.body.innerText : ''", json!([])).await;
            assert!(Instant::now() < deadline, "{what}: not within {limit:?}; the page says: {body}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session lets chromedriver close Chromium; the driver's group is then
        // stopped by its `Daemon`.
        let url = format!("{}{}", self.base, self.path(""));
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            if let Ok(runtime) = runtime {
                runtime.block_on(async {
                    let _ = crate::http_client().delete(url).timeout(Duration::from_secs(10)).send().await;
                });
            }
        })
        .join();
    }
}
