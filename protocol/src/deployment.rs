//! The Heat software-deployment document: one entry of a server's `deployments` list, exactly as
//! Heat's `format_software_config` publishes it (heat's `heat/engine/resources/openstack/heat/software_deployment.py`; see docs/metadata.md "A deployment entry"), plus the
//! rules for reading it tolerantly (null `options`, missing `outputs`, malformed siblings) and for
//! deciding which signal transport its inputs select.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// The group Heat gives a config that names none.
pub const UNGROUPED: &str = "Heat::Ungrouped";

/// The inputs Heat adds to every deployment after its declared and given ones, in that order
/// (`_build_derived_config_params`; the last two only when it signals).
pub const DERIVED_INPUTS: [&str; 7] = [
    "deploy_server_id",
    "deploy_action",
    "deploy_stack_id",
    "deploy_resource_name",
    "deploy_signal_transport",
    "deploy_signal_id",
    "deploy_signal_verb",
];

/// One deployment as published in server metadata.
///
/// Unknown keys are kept in `extra` so that a hook sees the document it would have seen under
/// heat-config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    /// The derived config id: new for every action, run at most once to completion.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default = "default_group", deserialize_with = "null_as_group")]
    pub group: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<String>,
    #[serde(default = "empty_config")]
    pub config: Value,
    /// `null` in Heat's document unless the template sets it; read as `{}` (several heat-agents
    /// hooks crash on a null `options`, so hooks are handed `{}` too).
    #[serde(default, deserialize_with = "null_as_default")]
    pub options: Options,
    #[serde(default, deserialize_with = "null_as_default")]
    pub inputs: Vec<Input>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub outputs: Vec<OutputDecl>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `options` of a deployment: the keys anneal reads, the rest kept for hooks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// Names of deployments on the same server that must finish first.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_as_default")]
    pub depends_on: Vec<String>,
    /// Per-deployment hook deadline in seconds; overrides the agent's `hook_timeout_secs`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "timeout_secs")]
    pub timeout: Option<u64>,
    /// What a restarted agent does with a run it finds interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_interrupt: Option<OnInterrupt>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Policy for a deployment whose hook was running when the agent stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnInterrupt {
    /// Signal a failure whose reason says the run was interrupted.
    #[default]
    Fail,
    /// Run the hook again.
    Rerun,
}

/// One input: a name, Heat's declared type and the value (not coerced by Heat).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Input {
    pub name: String,
    /// Heat always sends it (`String` by default); kept absent when absent so hooks see the
    /// document as published. See [`Input::input_type`].
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub declared_type: Option<String>,
    /// `None` when the key is absent (heat-agents reads that as `""`).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub value: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One declared output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputDecl {
    pub name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub error_output: bool,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// How a deployment's result travels back, chosen from its inputs as heat-config-notify does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignalTransport {
    /// `deploy_signal_id`: an HTTP request to this URL (CFN_SIGNAL, TEMP_URL_SIGNAL, the shim).
    Http { url: String, verb: HttpVerb },
    /// `deploy_queue_id` (ZAQAR_SIGNAL): a message posted to that Zaqar queue, authenticated with
    /// the `deploy_*` Keystone inputs.
    Zaqar { keystone: KeystoneInputs, queue_id: String },
    /// `deploy_auth_url` without a queue (HEAT_SIGNAL): Keystone v3, then Heat's resource-signal
    /// API on `deploy_stack_id` / `deploy_resource_name`.
    HeatApi { keystone: KeystoneInputs, stack_id: String, resource_name: String },
    /// None of the signal inputs: the engine is not waiting for a result.
    None,
}

/// The Keystone v3 credentials of a HEAT_SIGNAL or ZAQAR_SIGNAL deployment, from its
/// `deploy_auth_url`, `deploy_user_id`, `deploy_password`, `deploy_project_id` and
/// `deploy_region_name` inputs. An input that is missing or not a string is empty here (the
/// sender refuses it); an empty region is none. `Debug` never prints the password.
#[derive(Clone, PartialEq, Eq)]
pub struct KeystoneInputs {
    pub auth_url: String,
    pub user_id: String,
    pub password: String,
    pub project_id: String,
    pub region_name: Option<String>,
}

impl std::fmt::Debug for KeystoneInputs {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("KeystoneInputs")
            .field("auth_url", &self.auth_url)
            .field("user_id", &self.user_id)
            .field("password", &"***")
            .field("project_id", &self.project_id)
            .field("region_name", &self.region_name)
            .finish()
    }
}

/// The verb of an HTTP signal: POST unless `deploy_signal_verb` is `PUT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HttpVerb {
    #[serde(rename = "POST")]
    Post,
    #[serde(rename = "PUT")]
    Put,
}

/// Why one entry of a `deployments` list was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub index: usize,
    pub id: Option<String>,
    pub reason: String,
}

/// What went wrong turning a `component` deployment into the config for its action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ComponentError {
    #[error("component deployment has no deploy_action input")]
    NoAction,
    #[error("component config is not an object with a \"configs\" list")]
    NotComponent,
    #[error("component config entry {index} is malformed: {reason}")]
    BadEntry { index: usize, reason: String },
}

impl Deployment {
    /// The value of the input `name` (the last one wins, as in heat-config's dict).
    pub fn input(&self, name: &str) -> Option<&Value> {
        self.inputs.iter().rev().find(|input| input.name == name).and_then(|input| input.value.as_ref())
    }

    /// The input `name` as a string, when it is one.
    pub fn input_str(&self, name: &str) -> Option<&str> {
        self.input(name).and_then(Value::as_str)
    }

    /// The deployment's name, or its id when it has none (for logs and `depends_on`).
    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }

    /// The transport its inputs select; the precedence is heat-config-notify's.
    pub fn signal_transport(&self) -> SignalTransport {
        if let Some(url) = self.input("deploy_signal_id") {
            let url = match url {
                Value::String(url) => url.clone(),
                other => other.to_string(),
            };
            let verb = match self.input_str("deploy_signal_verb") {
                Some("PUT") => HttpVerb::Put,
                _ => HttpVerb::Post,
            };
            return SignalTransport::Http { url, verb };
        }
        if self.input("deploy_queue_id").is_some() {
            let queue_id = self.input_text("deploy_queue_id");
            return SignalTransport::Zaqar { keystone: self.keystone_inputs(), queue_id };
        }
        if self.input("deploy_auth_url").is_some() {
            return SignalTransport::HeatApi {
                keystone: self.keystone_inputs(),
                stack_id: self.input_text("deploy_stack_id"),
                resource_name: self.input_text("deploy_resource_name"),
            };
        }
        SignalTransport::None
    }

    /// The `deploy_*` Keystone inputs, as heat-config-notify reads them.
    fn keystone_inputs(&self) -> KeystoneInputs {
        let region = self.input_text("deploy_region_name");
        KeystoneInputs {
            auth_url: self.input_text("deploy_auth_url"),
            user_id: self.input_text("deploy_user_id"),
            password: self.input_text("deploy_password"),
            project_id: self.input_text("deploy_project_id"),
            region_name: (!region.is_empty()).then_some(region),
        }
    }

    /// The input `name` as a string; empty when it is missing or not a string.
    fn input_text(&self, name: &str) -> String {
        self.input_str(name).unwrap_or_default().to_string()
    }

    /// For `group: component`, the deployment as the hook for the current action sees it
    /// (`config` and `group` taken from the first `configs[]` entry whose `actions` contain
    /// `deploy_action`); `Ok(None)` when no entry lists the action. Other groups return a copy.
    pub fn resolve_component(&self) -> Result<Option<Deployment>, ComponentError> {
        if self.group != "component" {
            return Ok(Some(self.clone()));
        }
        let action = self.input_str("deploy_action").ok_or(ComponentError::NoAction)?;
        let configs = self.config.get("configs").and_then(Value::as_array).ok_or(ComponentError::NotComponent)?;
        for (index, entry) in configs.iter().enumerate() {
            let bad = |reason: &str| ComponentError::BadEntry { index, reason: reason.to_string() };
            let actions =
                entry.get("actions").and_then(Value::as_array).ok_or_else(|| bad("\"actions\" is not a list"))?;
            if !actions.iter().any(|candidate| candidate.as_str() == Some(action)) {
                continue;
            }
            let tool = match entry.get("tool") {
                None | Some(Value::Null) => "script",
                Some(Value::String(tool)) => tool.as_str(),
                Some(_) => return Err(bad("\"tool\" is not a string")),
            };
            let mut resolved = self.clone();
            resolved.group = tool.to_string();
            resolved.config = entry.get("config").cloned().unwrap_or_else(empty_config);
            return Ok(Some(resolved));
        }
        Ok(None)
    }
}

impl Input {
    /// Heat's type of the input: `String` unless declared otherwise.
    pub fn input_type(&self) -> &str {
        self.declared_type.as_deref().unwrap_or("String")
    }

    /// Whether the value must never be logged: the name looks secret or the input is `hidden`.
    pub fn is_secret(&self) -> bool {
        is_secret_name(&self.name) || self.extra.get("hidden") == Some(&Value::Bool(true))
    }
}

/// Whether an input or parameter name looks like it holds a credential.
pub fn is_secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ["password", "secret", "token", "key"].iter().any(|word| lower.contains(word))
}

/// Whether `id` is safe to use as a file name (journal, script, outputs path).
pub fn is_safe_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id != "."
        && id != ".."
        && id.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
        && !id.starts_with('.')
}

/// Reads the `deployments` list of a metadata document.
///
/// A missing list (or a document that is not an object) gives no deployments; a `deployments`
/// value that is not a list gives none and one rejection, as os-collect-config warns and skips.
/// Each malformed entry is rejected on its own, so one bad entry never hides the good ones.
pub fn deployments_from_document(document: &Value) -> (Vec<Deployment>, Vec<Rejected>) {
    match document.get("deployments") {
        None | Some(Value::Null) => (Vec::new(), Vec::new()),
        Some(Value::Array(entries)) => parse_entries(entries),
        Some(_) => {
            let reason = "\"deployments\" is not a list".to_string();
            (Vec::new(), vec![Rejected { index: 0, id: None, reason }])
        }
    }
}

fn parse_entries(entries: &[Value]) -> (Vec<Deployment>, Vec<Rejected>) {
    let mut accepted = Vec::new();
    let mut rejected = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let id = entry.get("id").and_then(Value::as_str).map(str::to_string);
        match serde_json::from_value::<Deployment>(entry.clone()) {
            Ok(deployment) if is_safe_id(&deployment.id) => accepted.push(deployment),
            Ok(deployment) => rejected.push(Rejected {
                index,
                id: Some(deployment.id),
                reason: "id must be 1-128 characters of [A-Za-z0-9._-] not starting with '.'".into(),
            }),
            Err(error) => rejected.push(Rejected { index, id, reason: error.to_string() }),
        }
    }
    (accepted, rejected)
}

fn default_group() -> String {
    UNGROUPED.to_string()
}

fn empty_config() -> Value {
    Value::String(String::new())
}

fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

fn null_as_group<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_else(default_group))
}

/// Keeps `"value": null` distinct from an absent key.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// `options.timeout` as whole seconds: a non-negative number or a numeric string.
fn timeout_secs<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    let value = Option::<Value>::deserialize(deserializer)?;
    let secs = match &value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(number)) => number
            .as_u64()
            .or_else(|| number.as_f64().filter(|secs| secs.is_finite() && *secs >= 0.0).map(|secs| secs.ceil() as u64)),
        Some(Value::String(text)) => text.trim().parse::<u64>().ok(),
        Some(_) => None,
    };
    match secs {
        Some(0) | None => Err(D::Error::custom(format!(
            "options.timeout must be a positive number of seconds, got {}",
            value.unwrap_or(Value::Null)
        ))),
        Some(secs) => Ok(Some(secs)),
    }
}

#[cfg(test)]
mod tests;
