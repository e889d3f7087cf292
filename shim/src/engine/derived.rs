//! Derived configs: what a deployment publishes into its server's document, built as Heat's
//! `_build_derived_config_params` does (declared inputs with values or defaults, undeclared
//! `input_values`, then the `deploy_*` inputs; StructuredDeployment substitutes `get_input`), and
//! the fingerprint that tells an update whether a deployment must run again.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::secrets::{BASE_URL, Purpose, placeholder};
use crate::model::Action;
use crate::template::ResourceType;

/// How a deployment's agent reports back (its `signal_transport` property). Every transport
/// but `NO_SIGNAL` gets this shim's signal URL; the name is passed to the hook as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalTransport {
    Cfn,
    TempUrl,
    Heat,
    Zaqar,
    NoSignal,
}

impl SignalTransport {
    pub const ALL: [SignalTransport; 5] = [
        SignalTransport::Cfn,
        SignalTransport::TempUrl,
        SignalTransport::Heat,
        SignalTransport::Zaqar,
        SignalTransport::NoSignal,
    ];

    /// Heat's spelling, e.g. `CFN_SIGNAL`.
    pub fn as_str(self) -> &'static str {
        match self {
            SignalTransport::Cfn => "CFN_SIGNAL",
            SignalTransport::TempUrl => "TEMP_URL_SIGNAL",
            SignalTransport::Heat => "HEAT_SIGNAL",
            SignalTransport::Zaqar => "ZAQAR_SIGNAL",
            SignalTransport::NoSignal => "NO_SIGNAL",
        }
    }

    pub fn parse(text: &str) -> Option<SignalTransport> {
        SignalTransport::ALL.into_iter().find(|transport| transport.as_str() == text)
    }
}

/// The config a deployment refers to, as its config node stores it.
#[derive(Debug, Clone)]
pub struct ConfigDefinition {
    pub group: String,
    pub config: Value,
    pub options: Value,
    pub inputs: Vec<Value>,
    pub outputs: Vec<Value>,
}

impl ConfigDefinition {
    /// From a config node's evaluated properties.
    pub fn from_properties(kind: ResourceType, properties: &Map<String, Value>) -> ConfigDefinition {
        let list = |key: &str| properties.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
        let (group, config) = if kind == ResourceType::CloudConfig {
            // As heat.engine.resources.openstack.heat.cloud_config.CloudConfig.handle_create.
            let cloud_config = properties.get("cloud_config").cloned().unwrap_or(Value::Null);
            ("Heat::Ungrouped".to_string(), json!(format!("#cloud-config\n{}", super::yaml_dump::dump(&cloud_config))))
        } else if kind == ResourceType::SoftwareComponent {
            ("component".to_string(), json!({"configs": properties.get("configs").cloned().unwrap_or(json!([]))}))
        } else {
            let group = properties.get("group").and_then(Value::as_str).unwrap_or("Heat::Ungrouped").to_string();
            let default = if kind == ResourceType::StructuredConfig { json!({}) } else { json!("") };
            (group, properties.get("config").cloned().filter(|value| !value.is_null()).unwrap_or(default))
        };
        let options = properties.get("options").cloned().filter(|value| !value.is_null()).unwrap_or(json!({}));
        ConfigDefinition { group, config, options, inputs: list("inputs"), outputs: list("outputs") }
    }

    pub fn to_json(&self) -> Value {
        json!({"group": self.group, "config": self.config, "options": self.options, "inputs": self.inputs, "outputs": self.outputs})
    }

    pub fn from_json(value: &Value) -> ConfigDefinition {
        let list = |key: &str| value.get(key).and_then(Value::as_array).cloned().unwrap_or_default();
        ConfigDefinition {
            group: value.get("group").and_then(Value::as_str).unwrap_or("Heat::Ungrouped").to_string(),
            config: value.get("config").cloned().unwrap_or(json!("")),
            options: value.get("options").cloned().unwrap_or(json!({})),
            inputs: list("inputs"),
            outputs: list("outputs"),
        }
    }

    /// Declared outputs in the deployment document's shape (`error_output` always present).
    pub fn output_declarations(&self) -> Vec<Value> {
        self.outputs
            .iter()
            .filter_map(|output| {
                let name = output.get("name")?.as_str()?;
                let mut declaration = json!({"name": name, "type": output.get("type").cloned().unwrap_or(json!("String")),
                    "error_output": output.get("error_output").and_then(Value::as_bool).unwrap_or(false)});
                if let Some(description) = output.get("description") {
                    declaration["description"] = description.clone();
                }
                Some(declaration)
            })
            .collect()
    }
}

/// Everything about one publication of a deployment.
pub struct Publication<'a> {
    pub derived_id: &'a str,
    pub name: &'a str,
    pub action: Action,
    pub server: &'a str,
    pub stack_path: &'a str,
    pub resource_name: &'a str,
    pub signal_transport: SignalTransport,
    pub creation_time: &'a str,
    pub input_values: &'a Map<String, Value>,
    /// StructuredDeployment: the key that marks an input reference (`get_input`), and STRICT checking.
    pub structured: Option<(&'a str, bool)>,
}

/// The deployment entry as Heat's `format_software_config` renders it; the signal URL carries a
/// token placeholder. Errors name an unknown input under STRICT.
pub fn build_entry(config: &ConfigDefinition, publication: &Publication<'_>) -> Result<Value, String> {
    let inputs = derived_inputs(config, publication);
    let body = match publication.structured {
        Some((input_key, strict)) => {
            let values: Map<String, Value> = inputs
                .iter()
                .filter_map(|input| Some((input.get("name")?.as_str()?.to_string(), input.get("value")?.clone())))
                .collect();
            crate::template::substitute_inputs(&config.config, input_key, &values, strict)?
        }
        None => config.config.clone(),
    };
    Ok(json!({
        "id": publication.derived_id,
        "name": publication.name,
        "group": config.group,
        "creation_time": publication.creation_time,
        "config": body,
        "options": config.options,
        "inputs": inputs,
        "outputs": config.output_declarations(),
    }))
}

fn derived_inputs(config: &ConfigDefinition, publication: &Publication<'_>) -> Vec<Value> {
    let mut inputs = Vec::new();
    let mut declared = std::collections::BTreeSet::new();
    for input in &config.inputs {
        let Some(name) = input.get("name").and_then(Value::as_str) else { continue };
        declared.insert(name.to_string());
        let value = publication.input_values.get(name).or_else(|| input.get("default")).cloned().unwrap_or(Value::Null);
        let mut derived =
            json!({"name": name, "type": input.get("type").cloned().unwrap_or(json!("String")), "value": value});
        for key in ["description", "default"] {
            if let Some(extra) = input.get(key) {
                derived[key] = extra.clone();
            }
        }
        if input.get("replace_on_change") == Some(&Value::Bool(true)) {
            derived["replace_on_change"] = Value::Bool(true);
        }
        inputs.push(derived);
    }
    for (name, value) in publication.input_values {
        if !declared.contains(name) {
            inputs.push(json!({"name": name, "type": "String", "value": value}));
        }
    }
    let described = |name: &str, description: &str, value: &str| json!({"name": name, "type": "String", "description": description, "value": value});
    inputs.push(described("deploy_server_id", "ID of the server being deployed to", publication.server));
    inputs.push(described("deploy_action", "Name of the current action being deployed", publication.action.as_str()));
    inputs.push(described("deploy_stack_id", "ID of the stack this deployment belongs to", publication.stack_path));
    inputs.push(described(
        "deploy_resource_name",
        "Name of this deployment resource in the stack",
        publication.resource_name,
    ));
    inputs.push(described(
        "deploy_signal_transport",
        "How the server should signal to heat with the deployment output values.",
        publication.signal_transport.as_str(),
    ));
    if publication.signal_transport != SignalTransport::NoSignal {
        let url = format!("{BASE_URL}/v1/signals/{}", placeholder(Purpose::Signal, publication.derived_id));
        inputs.push(described("deploy_signal_id", "ID of signal to use for signaling output values", &url));
        inputs.push(described("deploy_signal_verb", "HTTP verb to use for signaling output values", "POST"));
    }
    inputs
}

/// What decides whether an update must rerun a deployment: everything the hook would see except
/// the ids, times, the action, `deploy_resource_name` and `deploy_stack_id`. The resource name
/// and stack follow from the node's identity (its resource, or its member key in a group, and
/// the stack that holds it), so they cannot change for the same node; leaving them out means a
/// change in how they are spelled (group members were once `<group>/<member>`, now the member
/// key, as in Heat; a nested stack's deployments once had the root's stack id, now their nested
/// stack's) does not rerun finished deployments.
pub fn fingerprint(entry: &Value, server: &str) -> String {
    fingerprint_leaving_out(entry, server, CURRENT_UNFINGERPRINTED)
}

/// The inputs the current fingerprint leaves out.
const CURRENT_UNFINGERPRINTED: &[&str] =
    &["deploy_action", "deploy_signal_id", "deploy_signal_verb", "deploy_resource_name", "deploy_stack_id"];

/// The inputs earlier versions' fingerprints left out, newest first: `deploy_resource_name` was
/// added to them in 2192cc9 and `deploy_stack_id` in ab6dd01. A deployment published by such a
/// version holds a fingerprint made so, and the first update after an upgrade compares the new
/// entry against it the same way (issue 32: every deployment re-ran once otherwise).
const EARLIER_UNFINGERPRINTED: &[&[&str]] = &[
    &["deploy_action", "deploy_signal_id", "deploy_signal_verb", "deploy_resource_name"],
    &["deploy_action", "deploy_signal_id", "deploy_signal_verb"],
];

/// Whether `stored`, a fingerprint this or an earlier version made, is `entry`'s: the current
/// way first, then each earlier one. An entry of a deployment published before an upgrade,
/// unchanged by the update, matches; a changed one matches none.
pub fn fingerprint_matches(stored: &str, entry: &Value, server: &str) -> bool {
    stored == fingerprint(entry, server)
        || EARLIER_UNFINGERPRINTED.iter().any(|left_out| stored == fingerprint_leaving_out(entry, server, left_out))
}

fn fingerprint_leaving_out(entry: &Value, server: &str, left_out: &[&str]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(server.as_bytes());
    hasher.update(b"\n");
    // Written into the hash as it is serialised: no copy of the entry, no text of it.
    let mut sink = HashSink(&mut hasher);
    if serde_json::to_writer(&mut sink, &Essential { entry, left_out }).is_err() {
        // A Value always serialises; should it not, the fingerprint still differs from any
        // other entry's (an update reruns the deployment, which is the safe side).
        hasher.update(b"\0unserialisable");
    }
    crate::token::hex(&hasher.finalize())
}

/// The fingerprinted part of an entry: the entry without `id` and `creation_time`, its inputs
/// without the ones named in `fingerprint`. The key order is the one the stored fingerprints
/// were computed with: that of `Map::remove` under serde_json's `preserve_order`, which swaps
/// the last key into the removed one's place.
struct Essential<'a> {
    entry: &'a Value,
    /// The inputs left out.
    left_out: &'a [&'a str],
}

impl Serialize for Essential<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Value::Object(map) = self.entry else { return self.entry.serialize(serializer) };
        let mut keys: Vec<&String> = map.keys().collect();
        for removed in ["id", "creation_time"] {
            if let Some(index) = keys.iter().position(|key| key.as_str() == removed) {
                keys.swap_remove(index);
            }
        }
        let mut out = serializer.serialize_map(Some(keys.len()))?;
        for key in keys {
            match &map[key.as_str()] {
                Value::Array(inputs) if key == "inputs" => {
                    out.serialize_entry(key, &FingerprintedInputs { inputs, left_out: self.left_out })?
                }
                value => out.serialize_entry(key, value)?,
            }
        }
        out.end()
    }
}

struct FingerprintedInputs<'a> {
    inputs: &'a [Value],
    left_out: &'a [&'a str],
}

impl Serialize for FingerprintedInputs<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let kept = self.inputs.iter().filter(|input| {
            let name = input.get("name").and_then(Value::as_str).unwrap_or_default();
            !self.left_out.contains(&name)
        });
        serializer.collect_seq(kept)
    }
}

/// An `io::Write` into a running hash.
struct HashSink<'a>(&'a mut Sha256);

impl std::io::Write for HashSink<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use anneal_protocol::deployment::DERIVED_INPUTS;

    use super::*;

    fn publication<'a>(values: &'a Map<String, Value>, structured: Option<(&'a str, bool)>) -> Publication<'a> {
        Publication {
            derived_id: "d1",
            name: "10_app",
            action: Action::Create,
            server: "web1",
            stack_path: "s/1234",
            resource_name: "app",
            signal_transport: SignalTransport::Cfn,
            creation_time: "2026-01-01T00:00:00Z",
            input_values: values,
            structured,
        }
    }

    #[test]
    fn entry_has_heat_shape_and_inputs_in_heat_order() {
        let config = ConfigDefinition {
            group: "script".into(),
            config: json!("#!/bin/sh\n"),
            options: json!({}),
            inputs: vec![json!({"name": "foo", "default": "d"}), json!({"name": "bar", "type": "Number"})],
            outputs: vec![json!({"name": "result"})],
        };
        let values = Map::from_iter([("bar".to_string(), json!(5)), ("extra".to_string(), json!("x"))]);
        let entry = build_entry(&config, &publication(&values, None)).unwrap();
        let names: Vec<&str> =
            entry["inputs"].as_array().unwrap().iter().map(|input| input["name"].as_str().unwrap()).collect();
        assert_eq!(names[..3], ["foo", "bar", "extra"]);
        assert_eq!(names[3..], DERIVED_INPUTS);
        assert_eq!(entry["inputs"][0]["value"], "d");
        assert_eq!(entry["inputs"][1]["value"], 5);
        assert_eq!(entry["outputs"], json!([{"name": "result", "type": "String", "error_output": false}]));
        let url = entry["inputs"][8]["value"].as_str().unwrap();
        // The replica that serves the document puts its own URL in place of the base.
        assert_eq!(url, "@@anneal-token:base@@/v1/signals/@@anneal-token:signal:d1@@");
        let parsed: anneal_protocol::Deployment = serde_json::from_value(entry.clone()).unwrap();
        assert_eq!(parsed.id, "d1");
    }

    #[test]
    fn structured_config_substitutes_inputs() {
        let config = ConfigDefinition {
            group: "os-apply-config".into(),
            config: json!({"db": {"host": {"get_input": "host"}, "list": [{"get_input": "deploy_action"}]}}),
            options: json!({}),
            inputs: vec![],
            outputs: vec![],
        };
        let values = Map::from_iter([("host".to_string(), json!("10.0.0.5"))]);
        let entry = build_entry(&config, &publication(&values, Some(("get_input", false)))).unwrap();
        assert_eq!(entry["config"], json!({"db": {"host": "10.0.0.5", "list": ["CREATE"]}}));
        let strict = ConfigDefinition { config: json!({"x": {"get_input": "missing"}}), ..config };
        assert!(build_entry(&strict, &publication(&values, Some(("get_input", true)))).is_err());
    }

    /// The fingerprint as it was first computed (a clone, `Map::remove`, the text), which every
    /// stored fingerprint came from: the streamed one must give the same for any entry.
    fn fingerprint_by_text(entry: &Value, server: &str) -> String {
        fingerprint_by_text_leaving_out(entry, server, CURRENT_UNFINGERPRINTED)
    }

    /// As the first release (2a65642) computed fingerprints, leaving out `left_out` inputs.
    pub(crate) fn fingerprint_by_text_leaving_out(entry: &Value, server: &str, left_out: &[&str]) -> String {
        let mut essential = entry.clone();
        if let Some(map) = essential.as_object_mut() {
            map.remove("id");
            map.remove("creation_time");
        }
        if let Some(inputs) = essential.get_mut("inputs").and_then(Value::as_array_mut) {
            inputs.retain(|input| {
                let name = input.get("name").and_then(Value::as_str).unwrap_or_default();
                !left_out.contains(&name)
            });
        }
        crate::token::hex(&Sha256::digest(format!("{server}\n{essential}").as_bytes()))
    }

    /// A script config of `text`, without inputs or outputs.
    fn script_config(text: &str) -> ConfigDefinition {
        ConfigDefinition {
            group: "script".into(),
            config: json!(text),
            options: json!({}),
            inputs: vec![],
            outputs: vec![],
        }
    }

    /// Issue 32: a deployment published before an upgrade holds a fingerprint made the earlier
    /// way (the first release left `deploy_resource_name` and `deploy_stack_id` in); an update
    /// that changes nothing must recognise it, one that changes the config must not.
    #[test]
    fn fingerprints_made_by_earlier_versions_match_the_unchanged_entry_only() {
        let config = script_config("a");
        let values = Map::new();
        let entry = build_entry(&config, &publication(&values, None)).unwrap();
        let mut later = publication(&values, None);
        later.derived_id = "d2";
        later.action = Action::Update;
        let updated = build_entry(&config, &later).unwrap();
        let changed = build_entry(&script_config("b"), &later).unwrap();
        for left_out in EARLIER_UNFINGERPRINTED {
            let stored = fingerprint_by_text_leaving_out(&entry, "web1", left_out);
            assert_ne!(stored, fingerprint(&entry, "web1"), "the earlier way differs from this one");
            assert!(fingerprint_matches(&stored, &updated, "web1"), "{left_out:?}");
            assert!(!fingerprint_matches(&stored, &changed, "web1"), "{left_out:?}");
            assert!(!fingerprint_matches(&stored, &updated, "web2"), "{left_out:?}");
        }
        // The first release's exact list, as 2a65642 wrote it.
        let first_release = ["deploy_action", "deploy_signal_id", "deploy_signal_verb"];
        assert!(EARLIER_UNFINGERPRINTED.contains(&first_release.as_slice()));
    }

    #[test]
    fn the_streamed_fingerprint_is_the_one_stored_fingerprints_were_made_with() {
        let values = Map::from_iter([("port".to_string(), json!(8080)), ("big".to_string(), json!(1e300))]);
        let config = ConfigDefinition {
            group: "script".into(),
            config: json!("#!/bin/sh\necho $port\n"),
            options: json!({"retries": 2}),
            inputs: vec![json!({"name": "port", "type": "Number"})],
            outputs: vec![json!({"name": "result"})],
        };
        let built = build_entry(&config, &publication(&values, None)).unwrap();
        let mut samples = vec![
            built.clone(),
            json!("not an object"),
            json!([1, 2]),
            json!({}),
            json!({"inputs": "not an array", "id": 1}),
            json!({"a": 1, "id": 2, "b": 3, "creation_time": 4, "c": [5], "inputs": [{"name": "deploy_action"}, {"value": 1}, {"name": 7}]}),
            json!({"creation_time": 1, "z": {"nested": [1.50, "text \u{e9}\n"]}, "id": "x"}),
        ];
        // The same keys in every rotation, so `id` and `creation_time` sit everywhere once.
        if let Value::Object(map) = &built {
            let pairs: Vec<(String, Value)> = map.clone().into_iter().collect();
            for start in 0..pairs.len() {
                let rotated: Map<String, Value> = pairs[start..].iter().chain(&pairs[..start]).cloned().collect();
                samples.push(Value::Object(rotated));
            }
        }
        for sample in &samples {
            assert_eq!(fingerprint(sample, "web1"), fingerprint_by_text(sample, "web1"), "{sample}");
        }
    }

    #[test]
    fn fingerprint_ignores_ids_action_resource_name_and_stack_only() {
        let config = script_config("a");
        let values = Map::new();
        let first = build_entry(&config, &publication(&values, None)).unwrap();
        let mut second_publication = publication(&values, None);
        second_publication.derived_id = "d2";
        second_publication.action = Action::Update;
        second_publication.resource_name = "group/app";
        second_publication.stack_path = "s-outer-abcdefghijkl/1234-outer";
        let second = build_entry(&config, &second_publication).unwrap();
        assert_eq!(fingerprint(&first, "web1"), fingerprint(&second, "web1"));
        assert_ne!(fingerprint(&first, "web1"), fingerprint(&first, "web2"));
        let changed = ConfigDefinition { config: json!("b"), ..config };
        assert_ne!(
            fingerprint(&first, "web1"),
            fingerprint(&build_entry(&changed, &publication(&values, None)).unwrap(), "web1")
        );
    }
}
