//! Environments and files against python-heatclient: for the fixture template and environment
//! files (tests/fixtures/environments, our own), `anneal-shim stack create --print-request` must send
//! the environment heatclient's template_utils.process_multiple_environments_and_files merges,
//! and for every `get_file` the content heatclient puts in its `files` map (heatclient keys it
//! by absolute `file://` URL and rewrites the template; the shim keeps the template text and
//! keys by the argument as written, which Heat's GetFile looks up as written). The heatclient
//! side runs in-process in the peers' heat venv (tests/peers/real-heat/heat_env.py).
//! Then `template validate` on the same files, and the shim's refusals.

use std::path::{Path, PathBuf};
use std::process::Command;

use anneal_tests::{peers, shim_binary};
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/environments")
}

/// heatclient's answer for the template and environments (paths relative to the fixtures).
fn heatclient(environments: &[&str]) -> Value {
    let cache = peers::cache(&["heat-venv/bin/python3"]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/real-heat/heat_env.py");
    let output = Command::new(cache.join("heat-venv/bin/python3"))
        .current_dir(fixtures())
        .arg(script)
        .arg("template.yaml")
        .args(environments)
        .output()
        .expect("run heat_env.py");
    let answer: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("heat_env.py: {error}: {}", String::from_utf8_lossy(&output.stderr)));
    assert!(answer.get("error").is_none(), "heatclient refused: {answer}");
    answer
}

/// `anneal-shim ARGS` in the fixtures directory: (exit code, stdout, stderr).
fn shim(arguments: &[&str]) -> (i32, String, String) {
    let output = Command::new(shim_binary())
        .current_dir(fixtures())
        .args(arguments)
        .env_remove("ANNEAL_URL")
        .env_remove("ANNEAL_TOKEN")
        .output()
        .expect("run anneal-shim");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

fn dry_run(environments: &[&str]) -> Value {
    let mut arguments = vec!["stack", "create", "fx", "--template", "template.yaml", "--print-request"];
    for environment in environments {
        arguments.extend(["-e", environment]);
    }
    let (code, stdout, stderr) = shim(&arguments);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).expect("the dry run prints JSON")
}

fn assert_same_as_heatclient(environments: &[&str]) {
    let ours = dry_run(environments);
    let theirs = heatclient(environments);
    // No environment: the shim leaves the field out (heatclient sends an empty one).
    let environment = if ours["environment"].is_null() { serde_json::json!({}) } else { ours["environment"].clone() };
    assert_eq!(environment, theirs["environment"], "the merged environment of {environments:?}");
    let ours_files = ours["files"].as_object().expect("a files map");
    // Each environment file itself, as openstackclient sends it: the same file:// URLs in the
    // same order, each holding the same environment.
    let urls = if ours["environment_files"].is_null() { json!([]) } else { ours["environment_files"].clone() };
    assert_eq!(urls, theirs["environment_files"], "environment_files of {environments:?}");
    let parsed = |text: Option<&Value>| -> Value {
        serde_json::from_str(text.and_then(Value::as_str).expect("an environment in files")).expect("JSON")
    };
    for url in urls.as_array().expect("a list") {
        let url = url.as_str().expect("a URL");
        assert_eq!(parsed(ours_files.get(url)), parsed(theirs["env_files"].get(url)), "environment {url}");
    }
    let ours_files: serde_json::Map<String, Value> = ours_files
        .iter()
        .filter(|(key, _)| !urls.as_array().unwrap().contains(&json!(key)))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let mut written = Vec::new();
    for pair in theirs["get_file"].as_array().expect("get_file pairs") {
        let (argument, url) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
        assert_eq!(ours_files.get(argument), theirs["files"].get(url), "get_file {argument}");
        written.push(argument.to_owned());
    }
    let mut keys: Vec<String> = ours_files.keys().cloned().collect();
    keys.sort();
    written.sort();
    assert_eq!(keys, written, "one file per get_file argument");
    assert_eq!(
        ours["template"].as_str(),
        Some(std::fs::read_to_string(fixtures().join("template.yaml")).unwrap().as_str())
    );
}

#[test]
fn merged_environments_and_files_match_heatclient() {
    assert_same_as_heatclient(&["env/base.yaml", "env/override.yaml"]);
    assert_same_as_heatclient(&["env/override.yaml", "env/base.yaml"]);
    assert_same_as_heatclient(&[]);
    // A section left empty in a later file does not clear the earlier one's.
    assert_same_as_heatclient(&["env/base.yaml", "env/empty.yaml"]);
}

#[test]
fn a_byte_order_mark_and_sexagesimal_numbers_read_as_pyyaml_reads_them() {
    assert_same_as_heatclient(&["env/bom.yaml"]);
    assert_eq!(dry_run(&["env/bom.yaml"])["environment"]["parameters"]["port"], 90);
    // A JSON environment is still read as YAML 1.1 (heatclient has no JSON branch for it).
    assert_same_as_heatclient(&["env/json.json"]);
    assert_eq!(dry_run(&["env/json.json"])["environment"]["parameters"]["port"], "1e3");
}

#[test]
fn template_validate_prints_the_resolved_resources_without_a_server() {
    let (code, stdout, stderr) =
        shim(&["template", "validate", "--template", "template.yaml", "-e", "env/base.yaml", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(report["resources"][0]["name"], "hello_config");
    assert_eq!(report["resources"][0]["type"], "OS::Heat::SoftwareConfig", "My::Config through the registry");
    let port = report["parameters"].as_array().unwrap().iter().find(|p| p["name"] == "port").unwrap().clone();
    assert_eq!(port["value"], "8080", "from the environment's parameters");
    let greeting = report["parameters"].as_array().unwrap().iter().find(|p| p["name"] == "greeting").unwrap().clone();
    assert_eq!(greeting["value"], "from defaults", "from parameter_defaults");
}

#[test]
fn template_validate_reports_every_problem_and_exits_1() {
    let (code, _, stderr) = shim(&["template", "validate", "--template", "template.yaml"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("unknown resource type \"My::Config\""), "{stderr}");
}

#[test]
fn unknown_sections_and_missing_provider_templates_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "parameter_default: {a: 1}\n").unwrap();
    let (code, _, stderr) =
        shim(&["stack", "create", "fx", "--template", "template.yaml", "-e", bad.to_str().unwrap(), "--print-request"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("environment has wrong section \"parameter_default\""), "{stderr}");
    let provider = dir.path().join("provider.yaml");
    std::fs::write(&provider, "resource_registry:\n  My::Server: server.yaml\n").unwrap();
    let (code, _, stderr) = shim(&[
        "stack",
        "create",
        "fx",
        "--template",
        "template.yaml",
        "-e",
        provider.to_str().unwrap(),
        "--print-request",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("\"server.yaml\""), "the provider template is read next to the environment: {stderr}");
}

/// Heat's own registry (heat.engine.environment, in-process: tests/peers/real-heat/heat_registry.py)
/// and the shim's resolve the same (resource, type) pairs to the same type, and both refuse a
/// loop. Targets are types Heat has: Heat skips a mapping whose target it does not know, which
/// the shim cannot judge for Heat's types (documented in docs/templates.md).
#[test]
fn registry_aliases_resolve_as_heats_resource_registry() {
    use anneal_shim::template::Environment;
    let environments = [
        json!({"resource_registry": {
            "OS::Nova::Server": "OS::Heat::DeployedServer",
            "My::A": "My::B",
            "My::B": "OS::Heat::SoftwareConfig",
            "Legacy::*": "OS::Heat::*",
            "resources": {"web": {"OS::Nova::Server": "My::A"}, "db": {"My::B": "OS::Heat::StructuredConfig"}}
        }}),
        json!({"resource_registry": {"OS::*": "OS::Heat::None", "OS::Nova::Server": "OS::Heat::DeployedServer"}}),
        json!({"resource_registry": {"A::B": "C::D", "C::D": "A::B", "Net::*": "OS::Neutron::*"}}),
    ];
    let lookups = json!([
        ["x", "OS::Nova::Server"],
        ["web", "OS::Nova::Server"],
        ["web1", "OS::Nova::Server"],
        ["x", "Legacy::StructuredConfig"],
        ["x", "My::A"],
        ["db", "My::A"],
        ["x", "OS::Heat::SoftwareConfig"],
        ["x", "Net::Port"],
        ["x", "OS::Neutron::Port"]
    ]);
    let mut loop_lookups = lookups.as_array().unwrap().clone();
    loop_lookups.push(json!(["x", "A::B"]));
    for environment in environments {
        let lookups = if environment.to_string().contains("A::B") { json!(loop_lookups) } else { lookups.clone() };
        let theirs = heat_registry(&json!({"environment": environment, "lookups": lookups}));
        let ours = Environment::from_value(&environment).expect("the environment is accepted");
        for (lookup, heat) in lookups.as_array().unwrap().iter().zip(theirs.as_array().unwrap()) {
            let (name, kind) = (lookup[0].as_str().unwrap(), lookup[1].as_str().unwrap());
            match (ours.resolve_type(name, kind), heat.as_str()) {
                (Ok(resolved), Some(expected)) => assert_eq!(resolved, expected, "{lookup} under {environment}"),
                (Err(_), None) => assert!(heat["error"].as_str().unwrap().contains("Recursion"), "{heat}"),
                // A type nothing maps and Heat lacks: the shim keeps it and its parser then
                // refuses it as an unknown type.
                (Ok(resolved), None) if heat["error"].as_str().unwrap().contains("EntityNotFound") => {
                    assert_eq!(resolved, kind, "{lookup} under {environment}")
                }
                (mine, _) => panic!("{lookup} under {environment}: shim {mine:?}, Heat {heat}"),
            }
        }
    }
}

fn heat_registry(request: &Value) -> Value {
    use std::io::Write;
    let cache = peers::cache(&["heat-venv/bin/python3"]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/real-heat/heat_registry.py");
    let mut child = Command::new(cache.join("heat-venv/bin/python3"))
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run heat_registry.py");
    child.stdin.take().unwrap().write_all(request.to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("heat_registry.py: {error}: {}", String::from_utf8_lossy(&output.stderr)))
}
