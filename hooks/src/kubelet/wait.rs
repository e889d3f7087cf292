//! The kubelet hook's waiting: what the pod needs (`required_images`, the container name
//! patterns), polling `docker images` / `docker ps` until it is there or the option's timeout
//! passes, and the log heat-agents' hook reports as its output.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anneal_protocol::dates::civil_from_days;
use anneal_protocol::pyjson::{self, is_truthy};
use serde_json::Value;

use crate::{HookError, Invocation, Run, ToolError, Tools};

const DEFAULT_IMAGES_TIMEOUT: u64 = 600;
const DEFAULT_CONTAINERS_TIMEOUT: u64 = 120;
const DEFAULT_POLL_PERIOD: u64 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Level {
    Debug,
    Info,
    Warning,
    Error,
}

/// heat-agents' log records: every one goes to `deploy_stdout`, warnings and errors also to
/// `deploy_stderr`.
#[derive(Default)]
pub(super) struct Log {
    records: Vec<(Level, String, String)>,
}

impl Log {
    fn record(&mut self, level: Level, message: String) {
        self.records.push((level, asctime(SystemTime::now()), message));
    }

    fn debug(&mut self, message: String) {
        self.record(Level::Debug, message);
    }

    fn info(&mut self, message: String) {
        self.record(Level::Info, message);
    }

    pub(super) fn error(&mut self, message: String) {
        self.record(Level::Error, message);
    }

    /// The records at `threshold` or above, as `'[%(asctime)s] (%(name)s) [%(levelname)s]
    /// %(message)s'` lines.
    pub(super) fn render(&self, threshold: Level) -> String {
        let name = |level| match level {
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warning => "WARNING",
            Level::Error => "ERROR",
        };
        let lines = self.records.iter().filter(|(level, _, _)| *level >= threshold);
        lines.map(|(level, time, message)| format!("[{time}] (heat-config) [{}] {message}\n", name(*level))).collect()
    }
}

/// Python logging's `asctime` (`2024-05-01 10:00:00,123`), in UTC.
fn asctime(now: SystemTime) -> String {
    let millis = now.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64);
    let seconds = millis / 1000;
    let (year, month, day) = civil_from_days(seconds / 86_400);
    let time = seconds % 86_400;
    let (hour, minute, second) = (time / 3600, time / 60 % 60, time % 60);
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02},{:03}", millis % 1000)
}

/// Why waiting stopped: the pod did not come up (status 1), or the hook cannot go on.
pub(super) enum Failure {
    Pod(String),
    Hook(HookError),
}

impl From<HookError> for Failure {
    fn from(error: HookError) -> Failure {
        Failure::Hook(error)
    }
}

/// A tool error inside the wait is the pod's failure (heat-agents catches every exception
/// there), except the agent's deadline or shutdown, which end the hook.
fn tool_failure(error: ToolError) -> Failure {
    match error {
        ToolError::Spawn { .. } | ToolError::Wait { .. } => Failure::Pod(anneal_protocol::error_chain(&error)),
        other => Failure::Hook(other.into()),
    }
}

pub(super) struct Docker {
    program: String,
}

impl Docker {
    /// heat-agents' `get_client`: outside its `try`, so a docker that cannot be reached is the
    /// hook's error, not the pod's.
    pub(super) async fn connect<T: Tools>(run: &mut Run<'_, T>, log: &mut Log) -> Result<Docker, HookError> {
        let docker = Docker { program: run.env.get_or("HEAT_DOCKER_CMD", "docker").to_string() };
        let url = run.env.get_or("DOCKER_HOST", "unix:///var/run/docker.sock").to_string();
        log.debug(format!("Connecting to {url}"));
        let output = run.tools.run(docker.invocation(run, &["version", "--format", "{{.Server.APIVersion}}"])).await?;
        if output.status_code != 0 {
            let reason = format!("cannot connect to docker at {url}: {}", output.stderr_text().trim_end());
            return Err(HookError::BadDeployment { reason });
        }
        log.debug(format!("Connected to version {}", output.stdout_text().trim()));
        Ok(docker)
    }

    fn invocation<T>(&self, run: &Run<'_, T>, args: &[&str]) -> Invocation {
        Invocation {
            program: self.program.clone(),
            args: args.iter().map(|arg| arg.to_string()).collect(),
            env: run.env.variables().to_vec(),
            cwd: run.cwd.to_path_buf(),
        }
    }

    /// The lines a docker listing prints; its failure is the pod's.
    async fn lines<T: Tools>(&self, run: &mut Run<'_, T>, args: &[&str]) -> Result<Vec<String>, Failure> {
        let output = run.tools.run(self.invocation(run, args)).await.map_err(tool_failure)?;
        if output.status_code != 0 {
            let stderr = output.stderr_text();
            return Err(Failure::Pod(format!("docker {} failed: {}", args[0], stderr.trim_end())));
        }
        Ok(output.stdout_text().lines().filter(|line| !line.is_empty()).map(str::to_string).collect())
    }

    /// heat-agents' `try:` block: the images, then the containers.
    pub(super) async fn wait_for_pod<T: Tools>(&mut self, run: &mut Run<'_, T>, log: &mut Log) -> Result<(), Failure> {
        let images = required_images(&run.deployment.config)?;
        self.wait_for_images(run, log, images).await?;
        let patterns = required_patterns(&run.deployment.id, &run.deployment.config)?;
        self.wait_for_containers(run, log, patterns).await
    }

    async fn wait_for_images<T: Tools>(
        &mut self,
        run: &mut Run<'_, T>,
        log: &mut Log,
        images: Vec<String>,
    ) -> Result<(), Failure> {
        log.info(format!("Waiting for images: {}", images.join(", ")));
        let (deadline, timeout) = deadline(run, "images_timeout", DEFAULT_IMAGES_TIMEOUT)?;
        // An image named without a tag matches any of its tags.
        let mut prefixes: Vec<String> =
            images.into_iter().map(|image| if image.contains(':') { image } else { format!("{image}:") }).collect();
        while !prefixes.is_empty() {
            let names = self.lines(run, &["images", "--format", "{{.Repository}}:{{.Tag}}"]).await?;
            prefixes.retain(|prefix| match names.iter().find(|name| name.starts_with(prefix.as_str())) {
                Some(name) => {
                    log.info(format!("Found image: {name}"));
                    false
                }
                None => true,
            });
            if prefixes.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                let waiting = prefixes.join(", ");
                return Err(Failure::Pod(format!(
                    "Timed out after {timeout} seconds waiting for matching images: {waiting}"
                )));
            }
            sleep(run, self).await?;
        }
        Ok(())
    }

    async fn wait_for_containers<T: Tools>(
        &mut self,
        run: &mut Run<'_, T>,
        log: &mut Log,
        mut waiting: Vec<Pattern>,
    ) -> Result<(), Failure> {
        let texts: Vec<String> = waiting.iter().map(Pattern::text).collect();
        log.info(format!("Waiting for containers matching: {}", texts.join(", ")));
        let (deadline, timeout) = deadline(run, "containers_timeout", DEFAULT_CONTAINERS_TIMEOUT)?;
        while !waiting.is_empty() {
            // `--no-trunc` lists every name of a container, as docker-py's `Names`, which keep
            // the leading slash the CLI strips.
            let lines = self.lines(run, &["ps", "--no-trunc", "--format", "{{.Names}}"]).await?;
            for name in lines.iter().flat_map(|line| line.split(',')).map(|name| format!("/{name}")) {
                if let Some(index) = waiting.iter().position(|pattern| pattern.matches(&name)) {
                    log.info(format!("Pattern {} matches: {name}", waiting.remove(index).text()));
                }
            }
            if waiting.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                let texts: Vec<String> = waiting.iter().map(Pattern::text).collect();
                return Err(Failure::Pod(format!(
                    "Timed out after {timeout} seconds waiting for matching containers: {}",
                    texts.join(", ")
                )));
            }
            sleep(run, self).await?;
        }
        Ok(())
    }
}

/// `time.time() + option`, and the option as `%s` prints it.
fn deadline<T>(run: &Run<'_, T>, name: &str, default: u64) -> Result<(Instant, String), Failure> {
    let Some(value) = run.option(name) else {
        return Ok((Instant::now() + Duration::from_secs(default), default.to_string()));
    };
    let seconds = seconds(name, value)?;
    let after = Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(Duration::MAX);
    let deadline = Instant::now().checked_add(after).unwrap_or_else(|| Instant::now() + Duration::from_secs(1 << 40));
    Ok((deadline, pyjson::python_str(value)))
}

/// A number option (a bool counts, as in Python arithmetic).
fn seconds(name: &str, value: &Value) -> Result<f64, Failure> {
    match value {
        Value::Number(number) => Ok(number.as_f64().unwrap_or(f64::INFINITY)),
        Value::Bool(flag) => Ok(f64::from(u8::from(*flag))),
        other => Err(Failure::Pod(format!("option {name} must be a number, not {}", pyjson::dumps(other, false)))),
    }
}

/// `if poll_period: time.sleep(poll_period)`, as a `sleep` tool run.
async fn sleep<T: Tools>(run: &mut Run<'_, T>, docker: &Docker) -> Result<(), Failure> {
    let period = match run.option("poll_period") {
        None => DEFAULT_POLL_PERIOD as f64,
        Some(value) if !is_truthy(value) => return Ok(()),
        Some(value) => seconds("poll_period", value)?,
    };
    if period < 0.0 || !period.is_finite() {
        return Err(Failure::Pod(format!("sleep length must be non-negative and finite, not {period}")));
    }
    let mut invocation = docker.invocation(run, &[]);
    invocation.program = "sleep".into();
    invocation.args = vec![format!("{period}")];
    let output = run.tools.run(invocation).await.map_err(tool_failure)?;
    if output.status_code != 0 {
        return Err(Failure::Pod(format!("sleep {period} failed: {}", output.stderr_text().trim_end())));
    }
    Ok(())
}

/// The pod's `containers` (absent: none), as heat-agents reads `c['config'].get('containers', [])`.
fn containers(config: &Value) -> Result<&[Value], Failure> {
    let Value::Object(config) = config else {
        return Err(Failure::Pod("the config is not a pod manifest (a map)".into()));
    };
    match config.get("containers") {
        None => Ok(&[]),
        Some(Value::Array(containers)) => Ok(containers),
        Some(other) => Err(Failure::Pod(format!("containers must be a list, not {}", pyjson::dumps(other, false)))),
    }
}

/// A string field of a container (heat-agents' `container['image']`, a `KeyError` when absent).
fn field<'a>(container: &'a Value, name: &str) -> Result<&'a str, Failure> {
    match container.get(name) {
        Some(Value::String(text)) => Ok(text),
        _ => Err(Failure::Pod(format!("container {} has no {name}", pyjson::dumps(container, false)))),
    }
}

/// `required_images`: each image once, in the pod's order.
pub(super) fn required_images(config: &Value) -> Result<Vec<String>, Failure> {
    let mut images: Vec<String> = Vec::new();
    for container in containers(config)? {
        let image = field(container, "image")?;
        if !images.iter().any(|known| known == image) {
            images.push(image.to_string());
        }
    }
    Ok(images)
}

/// `required_container_patterns`: one per container name, in the pod's order.
pub(super) fn required_patterns(id: &str, config: &Value) -> Result<Vec<Pattern>, Failure> {
    let mut patterns: Vec<Pattern> = Vec::new();
    for container in containers(config)? {
        let name = field(container, "name")?;
        if !patterns.iter().any(|known| known.container == name) {
            patterns.push(Pattern { container: name.to_string(), pod: id_to_pod_name_part(id) });
        }
    }
    Ok(patterns)
}

/// `id_to_pod_name_part`: the id without dashes, its first 15 characters.
pub(super) fn id_to_pod_name_part(id: &str) -> String {
    id.chars().filter(|ch| *ch != '-').take(15).collect()
}

/// `container_pattern`: `^/k8s_<container>\.[0-9a-z]{8}_<pod>`, matched literally.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Pattern {
    container: String,
    pod: String,
}

impl Pattern {
    pub(super) fn text(&self) -> String {
        format!("^/k8s_{}\\.[0-9a-z]{{8}}_{}", self.container, self.pod)
    }

    pub(super) fn matches(&self, name: &str) -> bool {
        let Some(rest) = name.strip_prefix("/k8s_").and_then(|rest| rest.strip_prefix(self.container.as_str())) else {
            return false;
        };
        let Some(rest) = rest.strip_prefix('.') else { return false };
        let hash: Vec<char> = rest.chars().take(8).collect();
        let hashed = hash.len() == 8 && hash.iter().all(|ch| ch.is_ascii_digit() || ch.is_ascii_lowercase());
        hashed && rest[8..].strip_prefix('_').is_some_and(|rest| rest.starts_with(self.pod.as_str()))
    }
}
