//! heat-agents' `docker-cmd` hook, with the part its os-refresh-config script
//! (`50-heat-config-docker-cmd`) did before every hook run. The config (a map, or YAML text read
//! as PyYAML reads it) names containers in docker-compose v1 style; in `start_order` (then config
//! order) each is started with `docker run --name <unique name> --label ... [options] <image>
//! [command]` or, with `action: exec`, `docker exec [options] <container> <command>`, the
//! container named by its `container_name` label looked up with `docker ps`. A container whose
//! exit code is not in its `exit_codes` (`[0]`) sets `deploy_status_code`; the others still run.
//! The answer joins every non-empty docker stdout and stderr with newlines. DELETE and an empty
//! config answer success. Setting: `HEAT_DOCKER_CMD` (`docker`).
//!
//! anneal has no os-refresh-config, so before the hook proper each run does what that script
//! did for this deployment (see [`cleanup`]): it removes the containers of the deployment's
//! earlier configs (an UPDATE or DELETE of a Heat deployment brings a new config id, and the
//! script removed the containers whose config had left the metadata) and renames containers to
//! their `container_name` label where that name is free.
//!
//! Where heat-agents differs, on purpose:
//! - heat-agents' hook also echoes each docker stdout (e.g. the id `docker run --detach` prints)
//!   before its JSON, which makes heat-config give up parsing and signal the whole text with
//!   status 0, hiding failures; the built-in answers the JSON the hook meant to print.
//! - Containers of a deployment that leaves the metadata without a DELETE action are not removed
//!   (the agent runs no hook for a deployment that is gone); with a DELETE action they are.
//!   Containers of configs without `deploy_stack_id`/`deploy_resource_name` inputs are never
//!   removed, as nothing tells whose they are.
//! - An unknown `action` fails the deployment (heat-agents crashes on the first container, and
//!   on a later one runs the previous container's command again).
//! - Docker output that is not UTF-8 is read with replacement characters (heat-agents crashes);
//!   a name still taken after 1000 random suffixes fails (heat-agents tries forever).
//! - YAML text is read as PyYAML reads it except where JSON cannot hold the result (see
//!   [`yaml`]): timestamps stay text, non-string keys become their `str()`. `start_order`s must
//!   be all numbers or all strings (Python also orders lists, which no config needs).
//!
//! heat-agents' own quirks are kept: `--volumes_from=` (which the docker CLI does not know),
//! `--env-file=None` for a null `env_file`, a string `environment` passed one character a time.

mod cleanup;

use anneal_protocol::Deployment;
use anneal_protocol::pyjson::{self, is_truthy, python_str};
use serde_json::{Map, Value};

use crate::{HookError, Invocation, Response, Run, ToolError, ToolOutput, Tools, success};

pub(crate) const SUMMARY: &str =
    "docker run (or exec) for each container of the config, by start_order ($HEAT_DOCKER_CMD)";

/// How many random suffixes a taken container name is tried with.
const MAX_NAME_ATTEMPTS: usize = 1000;

pub(crate) async fn run<T: Tools>(run: &mut Run<'_, T>) -> Result<Response, HookError> {
    let docker = Docker { program: run.env.get_or("HEAT_DOCKER_CMD", "docker").to_string() };
    cleanup::before_hook(run, &docker).await?;
    let labels = Labels::of(run.deployment)?;
    if run.deployment.input_str("deploy_action") == Some("DELETE") || !is_truthy(&run.deployment.config) {
        return Ok(Response::Printed(success()));
    }
    let containers = containers_in_start_order(&run.deployment.config)?;
    let mut outcome = Outcome::default();
    for (name, settings) in &containers {
        run_container(run, &docker, name, settings, &labels, &mut outcome).await?;
    }
    Ok(Response::Printed(outcome.response()))
}

/// The docker CLI (`$HEAT_DOCKER_CMD`), run as heat-agents' `execute`: the hook's environment,
/// its working directory.
struct Docker {
    program: String,
}

impl Docker {
    async fn run<T: Tools>(&self, run: &mut Run<'_, T>, args: Vec<String>) -> Result<ToolOutput, ToolError> {
        let invocation = Invocation {
            program: self.program.clone(),
            args,
            env: run.env.variables().to_vec(),
            cwd: run.cwd.to_path_buf(),
        };
        run.tools.run(invocation).await
    }
}

/// A container's name and settings.
type Container = (String, Map<String, Value>);

/// `(name, settings)` of each container, sorted (stably) by `start_order` as heat-agents'
/// `sorted(config, key=...)` sorts them.
fn containers_in_start_order(config: &Value) -> Result<Vec<Container>, HookError> {
    let config = match config {
        Value::Object(map) => map.clone(),
        Value::String(text) => {
            match crate::pyyaml::safe_load(text).map_err(|reason| bad(format!("config is not YAML: {reason}")))? {
                Value::Object(map) => map,
                other => {
                    return Err(bad(format!(
                        "config must be a mapping of containers, not {}",
                        pyjson::dumps(&other, false)
                    )));
                }
            }
        }
        other => {
            return Err(bad(format!("config must be a mapping or YAML text, not {}", pyjson::dumps(other, false))));
        }
    };
    let mut containers = Vec::with_capacity(config.len());
    for (name, settings) in config {
        let Value::Object(settings) = settings else {
            return Err(bad(format!(
                "container {name}: settings must be a mapping, not {}",
                pyjson::dumps(&settings, false)
            )));
        };
        containers.push((name, settings));
    }
    if containers.len() < 2 {
        return Ok(containers);
    }
    let keys: Vec<StartOrder> = containers.iter().map(|(_, settings)| StartOrder::of(settings)).collect();
    let comparable = keys.iter().all(|key| matches!(key, StartOrder::Number(_)))
        || keys.iter().all(|key| matches!(key, StartOrder::Text(_)));
    if !comparable {
        return Err(bad("start_order values must be all numbers or all strings (they cannot be compared)".into()));
    }
    let mut keyed: Vec<_> = keys.into_iter().zip(containers).collect();
    keyed.sort_by(|(left, _), (right, _)| left.compare(right));
    Ok(keyed.into_iter().map(|(_, container)| container).collect())
}

/// A container's `start_order` (default 0), as Python compares it.
enum StartOrder {
    Number(f64),
    Text(String),
    Other,
}

impl StartOrder {
    fn of(settings: &Map<String, Value>) -> StartOrder {
        match settings.get("start_order") {
            None => StartOrder::Number(0.0),
            Some(Value::Bool(flag)) => StartOrder::Number(f64::from(u8::from(*flag))),
            Some(Value::Number(number)) => number.as_f64().map_or(StartOrder::Other, StartOrder::Number),
            Some(Value::String(text)) => StartOrder::Text(text.clone()),
            Some(_) => StartOrder::Other,
        }
    }

    fn compare(&self, other: &StartOrder) -> std::cmp::Ordering {
        match (self, other) {
            (StartOrder::Number(left), StartOrder::Number(right)) => left.total_cmp(right),
            (StartOrder::Text(left), StartOrder::Text(right)) => left.cmp(right),
            _ => std::cmp::Ordering::Equal,
        }
    }
}

/// The label values heat-agents takes from the inputs (`str()` of each, `None` when absent).
struct Labels {
    stack_id: String,
    resource_name: String,
    config_id: String,
}

impl Labels {
    /// heat-agents builds `{name: value}` of every input first, and crashes on one without a
    /// value.
    fn of(deployment: &Deployment) -> Result<Labels, HookError> {
        if let Some(input) = deployment.inputs.iter().find(|input| input.value.is_none()) {
            return Err(bad(format!("input {} has no value", input.name)));
        }
        let label = |name: &str| deployment.input(name).map_or_else(|| "None".to_string(), python_str);
        Ok(Labels {
            stack_id: label("deploy_stack_id"),
            resource_name: label("deploy_resource_name"),
            config_id: deployment.id.clone(),
        })
    }

    fn arguments(&self, container: &str) -> Vec<String> {
        let mut args = Vec::with_capacity(10);
        for label in [
            format!("deploy_stack_id={}", self.stack_id),
            format!("deploy_resource_name={}", self.resource_name),
            format!("config_id={}", self.config_id),
            format!("container_name={container}"),
            "managed_by=docker-cmd".to_string(),
        ] {
            args.push("--label".to_string());
            args.push(label);
        }
        args
    }
}

/// One container: its `docker run` or `docker exec`, its output kept, its exit code judged.
async fn run_container<T: Tools>(
    run: &mut Run<'_, T>,
    docker: &Docker,
    name: &str,
    settings: &Map<String, Value>,
    labels: &Labels,
    outcome: &mut Outcome,
) -> Result<(), HookError> {
    let args = match settings.get("action") {
        None => run_arguments(run, docker, name, settings, labels).await?,
        Some(Value::String(action)) if action == "run" => run_arguments(run, docker, name, settings, labels).await?,
        Some(Value::String(action)) if action == "exec" => exec_arguments(run, docker, settings, labels).await?,
        Some(other) => {
            return Err(bad(format!("container {name}: unknown action {} (run or exec)", pyjson::dumps(other, false))));
        }
    };
    let output = docker.run(run, args).await?;
    outcome.record(&output);
    if !is_expected_exit(settings.get("exit_codes"), output.status_code)
        .map_err(|reason| bad(format!("container {name}: {reason}")))?
    {
        outcome.status_code = output.status_code;
    }
    Ok(())
}

/// `run --name <unique> <labels> <options> <image> [command]`.
async fn run_arguments<T: Tools>(
    run: &mut Run<'_, T>,
    docker: &Docker,
    name: &str,
    settings: &Map<String, Value>,
    labels: &Labels,
) -> Result<Vec<String>, HookError> {
    let unique = unique_container_name(run, docker, name).await?;
    let mut args = vec!["run".to_string(), "--name".to_string(), unique];
    args.extend(labels.arguments(name));
    args.extend(run_options(settings).map_err(|reason| bad(format!("container {name}: {reason}")))?);
    Ok(args)
}

/// heat-agents' `docker_run_args`, in its order.
fn run_options(settings: &Map<String, Value>) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    if settings.get("detach").is_none_or(is_truthy) {
        args.push("--detach=true".to_string());
    }
    match settings.get("env_file") {
        Some(Value::Array(files)) => {
            args.extend(
                files.iter().filter(|file| is_truthy(file)).map(|file| format!("--env-file={}", python_str(file))),
            );
        }
        Some(file) => args.push(format!("--env-file={}", python_str(file))),
        None => {}
    }
    args.extend(each_truthy(settings, "environment")?.map(|value| format!("--env={value}")));
    let single = |key: &str| settings.get(key).map(python_str);
    args.extend(single("net").map(|net| format!("--net={net}")));
    args.extend(single("pid").map(|pid| format!("--pid={pid}")));
    args.extend(single("privileged").map(|flag| format!("--privileged={}", flag.to_lowercase())));
    args.extend(single("restart").map(|restart| format!("--restart={restart}")));
    args.extend(single("user").map(|user| format!("--user={user}")));
    args.extend(each_truthy(settings, "volumes")?.map(|volume| format!("--volume={volume}")));
    // Sic: heat-agents passes `--volumes_from`, which the docker CLI does not know.
    args.extend(each_truthy(settings, "volumes_from")?.map(|volume| format!("--volumes_from={volume}")));
    args.push(match settings.get("image") {
        None => String::new(),
        Some(image) => argument(image, "image")?,
    });
    for item in command_argument(settings.get("command"))? {
        args.push(argument(&item, "command")?);
    }
    Ok(args)
}

/// `exec [--privileged=..] [--user=..] <container> <command...>`, the container the one of
/// this config labelled with the command's first word, when `docker ps` finds it.
async fn exec_arguments<T: Tools>(
    run: &mut Run<'_, T>,
    docker: &Docker,
    settings: &Map<String, Value>,
    labels: &Labels,
) -> Result<Vec<String>, HookError> {
    let mut args = vec!["exec".to_string()];
    if let Some(flag) = settings.get("privileged") {
        args.push(format!("--privileged={}", python_str(flag).to_lowercase()));
    }
    if let Some(user) = settings.get("user") {
        args.push(format!("--user={}", python_str(user)));
    }
    let mut command = command_argument(settings.get("command")).map_err(bad)?;
    let Some(first) = command.first_mut() else {
        return Err(bad("an exec container needs a command whose first word names the container".into()));
    };
    if let Some(found) = discover_container_name(run, docker, &python_str(first), &labels.config_id).await? {
        *first = Value::String(found);
    }
    for item in &command {
        args.push(argument(item, "command").map_err(bad)?);
    }
    Ok(args)
}

/// heat-agents' `unique_container_name`: the name, or the name with `-<8 random [a-z0-9]>`,
/// whichever `docker inspect` does not find.
async fn unique_container_name<T: Tools>(
    run: &mut Run<'_, T>,
    docker: &Docker,
    name: &str,
) -> Result<String, HookError> {
    let mut candidate = name.to_string();
    for attempt in 0..MAX_NAME_ATTEMPTS {
        let args = ["inspect", "--format", "exists", candidate.as_str()].map(String::from).to_vec();
        let output = docker.run(run, args).await?;
        if output.status_code != 0 || output.stdout.is_empty() {
            return Ok(candidate);
        }
        candidate = format!("{name}-{}", random_suffix(attempt));
    }
    Err(bad(format!("container {name}: no free name after {MAX_NAME_ATTEMPTS} random suffixes")))
}

/// Eight characters of `[a-z0-9]`, random (std's per-process random hash keys; the crate has no
/// random number generator and the suffix needs no more than heat-agents' `random.choice`).
fn random_suffix(attempt: usize) -> String {
    use std::hash::{BuildHasher, Hasher};
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_usize(attempt);
    let mut bits = hasher.finish();
    (0..8)
        .map(|_| {
            let index = (bits % ALPHABET.len() as u64) as usize;
            bits /= ALPHABET.len() as u64;
            char::from(ALPHABET[index])
        })
        .collect()
}

/// heat-agents' `discover_container_name`: the first name `docker ps` lists for the container
/// label and config id; `None` when it fails or lists none.
async fn discover_container_name<T: Tools>(
    run: &mut Run<'_, T>,
    docker: &Docker,
    container: &str,
    config_id: &str,
) -> Result<Option<String>, HookError> {
    let args = vec![
        "ps".to_string(),
        "-a".to_string(),
        "--filter".to_string(),
        format!("label=container_name={container}"),
        "--filter".to_string(),
        format!("label=config_id={config_id}"),
        "--format".to_string(),
        "{{.Names}}".to_string(),
    ];
    let output = docker.run(run, args).await?;
    if output.status_code != 0 {
        return Ok(None);
    }
    Ok(bytes_words(&output.stdout).next().map(|name| String::from_utf8_lossy(name).into_owned()))
}

/// What the containers said: every non-empty stdout and stderr, and the last unexpected exit code.
#[derive(Default)]
struct Outcome {
    stdouts: Vec<String>,
    stderrs: Vec<String>,
    status_code: i64,
}

impl Outcome {
    fn record(&mut self, output: &ToolOutput) {
        if !output.stdout.is_empty() {
            self.stdouts.push(output.stdout_text());
        }
        if !output.stderr.is_empty() {
            self.stderrs.push(output.stderr_text());
        }
    }

    fn response(self) -> Map<String, Value> {
        let mut response = Map::new();
        response.insert("deploy_stdout".into(), Value::String(self.stdouts.join("\n")));
        response.insert("deploy_stderr".into(), Value::String(self.stderrs.join("\n")));
        response.insert("deploy_status_code".into(), Value::from(self.status_code));
        response
    }
}

/// `returncode in exit_codes` (default `[0]`), with Python's `==` between numbers.
fn is_expected_exit(exit_codes: Option<&Value>, code: i64) -> Result<bool, String> {
    match exit_codes {
        None => Ok(code == 0),
        Some(Value::Array(codes)) => Ok(codes.iter().any(|candidate| match candidate {
            Value::Bool(flag) => i64::from(*flag) == code,
            Value::Number(number) => number.as_i64() == Some(code) || number.as_f64() == Some(code as f64),
            _ => false,
        })),
        // `in` a dict looks at its keys, strings here.
        Some(Value::Object(_)) => Ok(false),
        Some(other) => Err(format!("exit_codes must be a list, not {}", pyjson::dumps(other, false))),
    }
}

/// `for v in settings.get(key, []): if v: ...`, each as `'%s' % v`: a list's items, a
/// mapping's keys, a string's characters (as Python iterates them).
fn each_truthy<'a>(settings: &'a Map<String, Value>, key: &str) -> Result<impl Iterator<Item = String> + 'a, String> {
    let items: Box<dyn Iterator<Item = String> + 'a> = match settings.get(key) {
        None => Box::new(std::iter::empty()),
        Some(Value::Array(items)) => Box::new(items.iter().filter(|item| is_truthy(item)).map(python_str)),
        Some(Value::Object(map)) => Box::new(map.keys().filter(|name| !name.is_empty()).cloned()),
        Some(Value::String(text)) => Box::new(text.chars().map(String::from)),
        Some(other) => return Err(format!("{key} must be a list, not {}", pyjson::dumps(other, false))),
    };
    Ok(items)
}

/// heat-agents' `command_argument`: nothing for a falsy command, a string split on whitespace,
/// a list as is.
fn command_argument(command: Option<&Value>) -> Result<Vec<Value>, String> {
    match command {
        None => Ok(Vec::new()),
        Some(command) if !is_truthy(command) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items.clone()),
        Some(Value::String(text)) => Ok(python_split(text).map(|word| Value::String(word.to_string())).collect()),
        Some(other) => Err(format!("command must be a string or a list, not {}", pyjson::dumps(other, false))),
    }
}

/// A value passed to docker as one argument: only a string can be (heat-agents' `Popen` fails
/// on anything else).
fn argument(value: &Value, what: &str) -> Result<String, String> {
    match value {
        Value::String(text) => Ok(text.clone()),
        other => Err(format!("{what} must be text, not {}", pyjson::dumps(other, false))),
    }
}

/// Python's `str.split()`: runs of Unicode whitespace, as `str.isspace` defines it.
fn python_split(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)).filter(|word| !word.is_empty())
}

/// Python's `bytes.split()`: runs of ASCII whitespace (vertical tab included).
fn bytes_words(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|byte| matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)).filter(|word| !word.is_empty())
}

fn bad(reason: String) -> HookError {
    HookError::BadDeployment { reason }
}

#[cfg(test)]
mod tests;
