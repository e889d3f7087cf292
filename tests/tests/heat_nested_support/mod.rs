//! What the nested-stack differential tests (heat_nested.rs, heat_nested_groups.rs) share: a
//! case's template, files and environment given to a real Heat engine (tests/peers/real-heat,
//! openstack-heat from PyPI) as its `files` map and to the real shim binary's CLI as files on
//! disk next to the template, as a Heat user's `openstack stack create` reads them; creating,
//! updating and comparing the outputs of both.

#![allow(dead_code)] // each test binary uses its own part

use std::collections::BTreeMap;
use std::time::Duration;

use anneal_tests::{RealHeat, Shim, real_heat::HeatApi, real_heat::StackRef, real_heat::unique_stack_name};
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};

/// A small provider template, used through a `resource_registry` type and as group members.
pub const MEMBER: &str = r#"
heat_template_version: 2018-08-31
parameters:
  label: {type: string, default: unlabelled}
resources:
  inner: {type: OS::Heat::Value, properties: {value: {list_join: ["-", [member, {get_param: label}]]}}}
  stub: {type: OS::Heat::None}
outputs:
  out: {value: {get_attr: [inner, value]}}
"#;

/// Outputs whose values are the members' ids (Heat's are generated physical names such as
/// `<stack>-group-<random>-0-<random>`, the shim's its own): compared by shape only.
const ID_OUTPUTS: &[&str] = &["refs", "refs_map"];

/// One stack's inputs: the parent, the files beside it and an optional environment.
pub struct Case<'a> {
    pub name: &'a str,
    pub template: String,
    pub files: &'a [(&'a str, &'a str)],
    pub environment: Option<&'a str>,
    pub parameters: &'a [(&'a str, &'a str)],
}

impl Case<'_> {
    pub fn heat_body(&self) -> Value {
        let files: Map<String, Value> =
            self.files.iter().map(|(name, text)| (name.to_string(), Value::String(text.to_string()))).collect();
        let environment: Value = match self.environment {
            Some(text) => serde_json::from_str(text).expect("the environment is JSON"),
            None => json!({}),
        };
        let parameters: Map<String, Value> =
            self.parameters.iter().map(|(key, value)| (key.to_string(), Value::String(value.to_string()))).collect();
        json!({
            "stack_name": unique_stack_name(self.name),
            "template": self.template,
            "files": files,
            "environment": environment,
            "parameters": parameters,
        })
    }

    /// Writes the template, files and environment into the shim's dir; returns the CLI's
    /// `--template F [-e ENV] [--param K=V]...` arguments.
    pub fn shim_arguments(&self, shim: &Shim) -> Vec<String> {
        for (name, text) in self.files {
            shim.write_template(name, text);
        }
        let template = shim.write_template(&format!("{}.yaml", self.name), &self.template);
        let mut arguments = vec!["--template".to_string(), template.to_str().expect("utf-8").to_string()];
        if let Some(text) = self.environment {
            let environment = shim.write_template(&format!("{}-env.yaml", self.name), text);
            arguments.extend(["-e".to_string(), environment.to_str().expect("utf-8").to_string()]);
        }
        for (key, value) in self.parameters {
            arguments.extend(["--param".to_string(), format!("{key}={value}")]);
        }
        arguments
    }
}

/// Creates the case in Heat and waits; asserts CREATE_COMPLETE.
pub async fn heat_create(api: &HeatApi, case: &Case<'_>) -> StackRef {
    let (stack, settled) = heat_settled(api, case).await;
    assert_eq!(settled["stack_status"], "CREATE_COMPLETE", "Heat created {}: {settled}", case.name);
    stack
}

/// Creates the case in the shim and waits; asserts CREATE_COMPLETE.
pub async fn shim_create(shim: &Shim, case: &Case<'_>) {
    let shown = shim_settled(shim, case).await;
    assert_eq!(shown["status"], "CREATE_COMPLETE", "the shim created {}: {shown}", case.name);
}

/// Ids are compared by shape: a list of as many strings, a map with the same keys.
pub fn id_shape(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(|item| json!(item.is_string())).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(key, item)| (key.clone(), json!(item.is_string()))).collect())
        }
        other => other.clone(),
    }
}

/// Every output of either side that differs, each named.
pub fn differences(heat: &BTreeMap<String, Value>, shim: &Map<String, Value>) -> Vec<String> {
    let mut names: Vec<&String> = heat.keys().chain(shim.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let (heat_value, shim_value) = (heat.get(name).cloned(), shim.get(name).cloned());
            let (heat_value, shim_value) = if ID_OUTPUTS.contains(&name.as_str()) {
                (heat_value.as_ref().map(id_shape), shim_value.as_ref().map(id_shape))
            } else {
                (heat_value, shim_value)
            };
            (heat_value != shim_value).then(|| format!("output {name}: Heat {heat_value:?}, the shim {shim_value:?}"))
        })
        .collect()
}

/// Creates the case in both, compares every output, deletes Heat's stack.
pub async fn assert_same_outputs(case: &Case<'_>) {
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let stack = heat_create(&api, case).await;
    let heat_outputs = api.outputs(&stack).await;
    let unresolved: Vec<&String> =
        heat_outputs.iter().filter(|(_, value)| value.get("error").is_some()).map(|(name, _)| name).collect();
    assert!(unresolved.is_empty(), "{}: Heat could not resolve {unresolved:?}: {heat_outputs:?}", case.name);
    let shim = Shim::start().await;
    shim_create(&shim, case).await;
    let shim_outputs = shim.stack_outputs(case.name).await;
    api.delete_stack(&stack).await;
    let differing = differences(&heat_outputs, &shim_outputs);
    assert!(differing.is_empty(), "{}: the shim's outputs differ from Heat's:\n{}", case.name, differing.join("\n"));
}

/// PUTs the update (with its files) and waits until Heat has finished it: its `updated_time`
/// changed and its status is no longer in progress.
pub async fn heat_update(api: &HeatApi, stack: &StackRef, update: &Case<'_>, what: &str) {
    let before = api.stack(stack).await["updated_time"].clone();
    let mut body = update.heat_body();
    body.as_object_mut().expect("a map").remove("stack_name");
    let path = format!("stacks/{}/{}", stack.name, stack.id);
    let (status, answer) = api.call(Method::PUT, &path, Some(&body)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{what}: Heat refused the update: {answer}");
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let shown = api.stack(stack).await;
        let status = shown["stack_status"].as_str().unwrap_or_default().to_string();
        if shown["updated_time"] != before && !status.ends_with("_IN_PROGRESS") {
            assert_eq!(status, "UPDATE_COMPLETE", "{what}: Heat updated: {shown}");
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{what}: Heat's update did not finish: {shown}");
    }
}

/// The shim's outputs by name as Heat's API shows them: the value, or `{"error": reason}` for
/// an output that cannot be resolved.
pub async fn shim_outputs_with_errors(shim: &Shim, stack: &str) -> BTreeMap<String, Value> {
    let outputs = shim.cli_json(&["stack", "outputs", stack, "--json"]).await;
    let outputs = outputs.as_array().expect("outputs is a list").clone();
    outputs
        .into_iter()
        .map(|output| {
            let name = output["name"].as_str().expect("a name").to_string();
            match output.get("error") {
                Some(error) => (name, json!({ "error": error })),
                None => (name, output["value"].clone()),
            }
        })
        .collect()
}

/// Creates the case in Heat and waits for it to settle; returns the stack and its status.
pub async fn heat_settled(api: &HeatApi, case: &Case<'_>) -> (StackRef, Value) {
    let body = case.heat_body();
    let (status, answer) = api.call(Method::POST, "stacks", Some(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "Heat refused {}: {answer}", case.name);
    let id = answer["stack"]["id"].as_str().unwrap_or_else(|| panic!("no stack id in {answer}"));
    let stack = StackRef { name: body["stack_name"].as_str().expect("a name").to_string(), id: id.to_string() };
    let settled = api.wait_stack_settled(&stack, None, Duration::from_secs(180)).await;
    (stack, settled)
}

/// Creates the case in the shim and waits for it to settle; returns `stack show --json`.
pub async fn shim_settled(shim: &Shim, case: &Case<'_>) -> Value {
    let mut arguments = vec!["stack".to_string(), "create".to_string(), case.name.to_string()];
    arguments.extend(case.shim_arguments(shim));
    let arguments: Vec<&str> = arguments.iter().map(String::as_str).collect();
    let created = shim.cli(&arguments).await;
    assert_eq!(created.code, 0, "the shim refused {}: {created:?}", case.name);
    shim.settled(case.name, Duration::from_secs(60)).await
}
