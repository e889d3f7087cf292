//! Every problem of a template in one pass, through the binary: `template validate` (no
//! server) and `stack create` (the HTTP API's error body, and the CLI printing it) list the same
//! problems, each once, with its line and resource, sorted by line: an unknown type does not
//! stop the reference, parameter and property checks, and causes nothing more by itself. A
//! duplicate key is no problem but a warning (`template validate` prints it; `stack create`
//! accepts the template).

use anneal_tests::{Shim, shim_binary};
use serde_json::{Value, json};

/// tests/fixtures/one_pass/every_kind.yaml (shared with the unit tests of `check_template`):
/// an unknown type (line 7), a get_param of an undeclared parameter (9), a property of the
/// wrong type (15), a get_attr of an unknown resource (19) and a get_resource of one (21); and
/// `message` has no value (line 3), which only `stack create` asks for. The deployment's config
/// and an output read the resource of unknown type: nothing more may be reported for them.
const TEMPLATE: &str = include_str!("../fixtures/one_pass/every_kind.yaml");

/// The problems both paths report, in order (before the line each ends with).
const EXPECTED: &[(&str, &str)] = &[
    ("resource config: unknown resource type \"OS::Heat::SoftwareConfg\" (did you mean", "(line 7)"),
    ("resource config: property \"config\": get_param names an unknown parameter \"undeclared\"", "(line 9)"),
    ("resource deploy: property \"input_values\": ", "(line 15)"),
    ("output result: get_attr names an unknown resource \"ghost\"", "(line 17)"),
    ("output result: get_resource names an unknown resource \"nowhere\"", "(line 17)"),
];

const MISSING_VALUE: &str = "parameter \"message\": no value (line 3)";

fn assert_listed(problems: &[String], expected: &[(&str, &str)]) {
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    for (problem, (start, end)) in problems.iter().zip(expected) {
        assert!(problem.starts_with(start) && problem.ends_with(end), "{problem:?} is not {start}...{end}");
    }
}

#[test]
fn template_validate_lists_every_problem_once() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("template.yaml"), TEMPLATE).expect("write the template");
    let output = std::process::Command::new(shim_binary())
        .current_dir(dir.path())
        .args(["template", "validate", "--template", "template.yaml"])
        .env_remove("ANNEAL_URL")
        .env_remove("ANNEAL_TOKEN")
        .output()
        .expect("run anneal-shim");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let problems: Vec<String> = stderr
        .lines()
        .filter(|line| line.contains("(line "))
        .map(|line| line.trim_start_matches([' ', '-']).to_owned())
        .collect();
    // Heat's validate asks for no parameter values: `message` is checked with a placeholder.
    assert_listed(&problems, EXPECTED);
    assert!(!stderr.contains("message\": no value"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn stack_create_answers_every_problem_once() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut shim = Shim::start().await;
    shim.cli_json(&["server", "add", "web1", "--format", "json"]).await;
    let response = shim.post_stack(&json!({"name": "broken", "template": TEMPLATE})).await;
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = serde_json::from_str(&response.text().await.unwrap_or_default()).expect("a JSON error");
    let problems: Vec<String> = serde_json::from_value(body["error"]["problems"].clone()).expect("problems");
    assert_eq!(problems[0], MISSING_VALUE, "{problems:#?}");
    assert_listed(&problems[1..], EXPECTED);

    let path = shim.write_template("broken.yaml", TEMPLATE);
    let cli = shim.cli(&["stack", "create", "broken", "--template", path.to_str().expect("a UTF-8 path")]).await;
    assert_eq!(cli.code, 1, "{}", cli.stderr);
    // The CLI prints the API's message, then one line per problem.
    let listed: Vec<&str> = cli.stderr.lines().filter_map(|line| line.trim_start().strip_prefix("- ")).collect();
    assert_eq!(listed, problems, "{}", cli.stderr);
    shim.stop().await;
}

/// Issue 33: a key written twice (as upstream tripleo-heat-templates shipped `NeutronL3HA`) is
/// read as Heat reads it, the last value in the first key's place, and `template validate`
/// names the key and both lines; a quoted scalar closing at its key's column is read as libyaml
/// reads it. `stack create` accepts the same template.
const DUPLICATES: &str = "heat_template_version: 2018-08-31
parameters:
  NeutronL3HA: {type: boolean, default: true}
  ControllerCount: {type: number, default: 3}
  NeutronL3HA: {type: boolean, default: false}
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: \"{
        first
      }\"
      config: \"{
        second
      }\"
outputs:
  l3ha: {value: {get_param: NeutronL3HA}}
  config: {value: {get_attr: [config, config]}}
";

#[tokio::test(flavor = "multi_thread")]
async fn duplicate_keys_are_a_warning_of_template_validate_and_stack_create_accepts_them() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("template.yaml"), DUPLICATES).expect("write the template");
    let validate = |json: bool| {
        let mut command = std::process::Command::new(shim_binary());
        command.current_dir(dir.path()).args(["template", "validate", "--template", "template.yaml"]);
        command.args(json.then_some("--json")).env_remove("ANNEAL_URL").env_remove("ANNEAL_TOKEN");
        command.output().expect("run anneal-shim")
    };
    let text = validate(false);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert_eq!(text.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&text.stderr));
    let warnings: Vec<&str> = stdout.lines().skip_while(|line| *line != "warnings:").skip(1).collect();
    assert_eq!(
        warnings,
        [
            "  line 5 column 3: duplicate key \"NeutronL3HA\" (also at line 3): its last value is used, as in Heat",
            "  line 14 column 7: duplicate key \"config\" (also at line 11): its last value is used, as in Heat",
        ],
        "{stdout}"
    );
    assert!(stdout.contains("  NeutronL3HA (boolean): false\n"), "{stdout}");
    let json: Value = serde_json::from_slice(&validate(true).stdout).expect("JSON");
    assert_eq!(json["warnings"].as_array().map(Vec::len), Some(2), "{json}");
    assert_eq!(json["parameters"][0]["name"], "NeutronL3HA", "the first key's place: {json}");

    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut shim = Shim::start().await;
    let path = shim.write_template("duplicates.yaml", DUPLICATES);
    shim.cli_ok(&["stack", "create", "duplicates", "--template", path.to_str().expect("a UTF-8 path")]).await;
    let show = shim.settled("duplicates", std::time::Duration::from_secs(30)).await;
    assert_eq!(show["status"], "CREATE_COMPLETE", "{show}");
    let outputs = shim.stack_outputs("duplicates").await;
    assert_eq!((&outputs["l3ha"], &outputs["config"]), (&json!(false), &json!("{ second }")), "{outputs:?}");
    shim.stop().await;
}
