//! Heat's server-side merge of `environment_files` against Heat's own code: for each request
//! body, Heat's API builds the environment (InstantiationData.environment) and its engine merges
//! the files (environment_util.merge_environments, in-process in the peers' heat venv through
//! tests/peers/real-heat/heat_merge_env.py); the shim's `merge_environment_files` must give the
//! same environment, or both refuse. Then the API end to end: a stack created with
//! `environment_files` gets the merged parameters, and a bad name is a 400 naming it.

use anneal_shim::template::{merge_environment_files, parameter_types};
use anneal_tests::{Shim, peers};
use serde_json::{Map, Value, json};

const TEMPLATE: &str = "heat_template_version: 2018-08-31
parameters:
  name: {type: string, default: x}
  items: {type: comma_delimited_list, default: []}
  settings: {type: json, default: {}}
  count: {type: number, default: 1}
  flag: {type: boolean, default: false}
resources: {}
";

/// Heat's environment for each body, or its error text (one Python process for all: importing
/// Heat takes seconds).
fn heat(bodies: &[Value]) -> Vec<Result<Value, String>> {
    let answers = match peers::heat_python("heat_merge_env.py", &Value::Array(bodies.to_vec())) {
        Value::Array(answers) if answers.len() == bodies.len() => answers,
        other => panic!("heat_merge_env.py answered {other}"),
    };
    answers
        .into_iter()
        .map(|answer| match answer.get("error") {
            Some(error) => Err(error.as_str().unwrap_or_default().to_owned()),
            None => Ok(answer["environment"].clone()),
        })
        .collect()
}

/// The shim's environment for the same body.
fn shim(body: &Value) -> Result<Value, String> {
    let files: Map<String, Value> = body["files"].as_object().cloned().unwrap_or_default();
    let names: Vec<String> = serde_json::from_value(body["environment_files"].clone()).unwrap_or_default();
    let given = serde_json::from_value(body.get("parameters").cloned().unwrap_or(json!({}))).expect("string values");
    let types = parameter_types(body["template"].as_str().expect("a template"), &files);
    merge_environment_files(&names, &files, &given, &types).map(Value::Object)
}

fn body(parameters: Value, files: &[(&str, &str)]) -> Value {
    let names: Vec<&str> = files.iter().map(|(name, _)| *name).filter(|name| name.starts_with("env")).collect();
    let files: Map<String, Value> = files.iter().map(|(name, text)| ((*name).to_owned(), json!(text))).collect();
    json!({
        "template": TEMPLATE,
        "parameters": parameters,
        "environment": {"parameters": {"name": "ignored when environment_files is given"}},
        "environment_files": names,
        "files": files,
    })
}

/// A body, what the case shows, and for a refusal a text the shim's message must contain.
type Case<'a> = (&'a str, Value, Option<&'a str>);

/// For each case both give the same environment, or both refuse.
fn assert_same(cases: &[Case]) {
    let bodies: Vec<Value> = cases.iter().map(|(_, body, _)| body.clone()).collect();
    for ((case, body, refusal), heat) in cases.iter().zip(heat(&bodies)) {
        match (heat, shim(body)) {
            (Ok(heat), Ok(shim)) => assert_eq!(shim, heat, "{case}: the shim's environment differs from Heat's"),
            (Err(_), Err(message)) => {
                let wanted = refusal.unwrap_or_default();
                assert!(message.contains(wanted), "{case}: the shim's refusal {message:?} lacks {wanted:?}");
            }
            (heat, shim) => panic!("{case}: Heat gave {heat:?}, the shim {shim:?}"),
        }
    }
}

#[test]
fn files_merge_onto_the_request_parameters_as_heat_merges_them() {
    let mut cases: Vec<Case> = Vec::new();
    let overwrite = [
        ("env1.yaml", "parameters: {name: one, items: a}\nparameter_defaults: {count: 2}\n"),
        ("env2.yaml", "parameters: {name: two}\nparameter_defaults: {flag: true}\n"),
    ];
    cases.push(("later files win, over --param too", body(json!({"name": "cli", "count": "5"}), &overwrite), None));
    cases.push(("no --param: the first file's map is kept whole", body(json!({}), &overwrite), None));
    let registry = [
        ("env1.yaml", "resource_registry: {\"My::A\": OS::Heat::None, resources: {r1: {\"My::B\": OS::Heat::None}}}\n"),
        ("env2.yaml", "resource_registry: {resources: {r2: {\"My::B\": OS::Heat::Value}}}\n"),
    ];
    cases.push(("resource_registry merges one level deep only", body(json!({}), &registry), None));
    let undeclared = [("env1.yaml", "parameters: {name: one}\n"), ("env2.yaml", "parameters: {other: 1, name: two}\n")];
    cases.push(("undeclared names after the first file are dropped", body(json!({}), &undeclared), None));
    cases.push(("an undeclared --param is kept", body(json!({"stray": "s"}), &undeclared), None));
    let empty_and_null = [("env1.yaml", ""), ("env2.yaml", "parameters: {}\nparameter_defaults: {name: null}\n")];
    cases.push(("empty files and sections change nothing", body(json!({"name": "cli"}), &empty_and_null), None));
    assert_same(&cases);
}

#[test]
fn merge_strategies_follow_heat() {
    let mut cases: Vec<Case> = Vec::new();
    let merge = [
        ("env1.yaml", "parameters: {name: ab, items: [a], settings: {x: {y: 1}, l: [1]}}\n"),
        (
            "env2.yaml",
            "parameter_merge_strategies: {default: merge, settings: deep_merge}\n\
             parameters: {name: cd, items: [b, c], settings: {x: {z: 2}, l: [2], s: t}}\n",
        ),
    ];
    cases.push(("the first file's overwrite holds for the names it set", body(json!({}), &merge), None));
    let merged_later = [
        ("env1.yaml", "parameter_merge_strategies: {default: merge, settings: deep_merge}\nparameters: {name: ab}\n"),
        (
            "env2.yaml",
            "parameter_merge_strategies: {default: merge, settings: deep_merge}\n\
             parameters: {name: cd, items: b, settings: {x: {z: 2}, l: [2]}}\n",
        ),
        (
            "env3.yaml",
            "parameter_merge_strategies: {default: merge, settings: deep_merge}\nparameters: {items: c, settings: '{\"x\": {\"w\": 3}, \"l\": [3]}'}\n",
        ),
    ];
    cases.push(("merge and deep_merge", body(json!({"name": "cli-"}), &merged_later), None));
    let shallow = [
        ("env1.yaml", "parameter_merge_strategies: {settings: merge}\nparameters: {settings: {x: {y: 1}}}\n"),
        ("env2.yaml", "parameter_merge_strategies: {settings: merge}\nparameters: {settings: {x: {z: 2}}}\n"),
    ];
    cases.push(("merge of a json parameter is one level deep", body(json!({"name": "n"}), &shallow), None));
    let unknown = [
        ("env1.yaml", "parameter_merge_strategies: {default: append}\nparameters: {name: a}\n"),
        ("env2.yaml", "parameter_merge_strategies: {default: append}\nparameters: {name: b}\n"),
    ];
    cases.push(("an unknown strategy overwrites", body(json!({"name": "cli"}), &unknown), None));
    let conflict = [
        ("env1.yaml", "parameter_merge_strategies: {name: merge}\nparameters: {name: a}\n"),
        ("env2.yaml", "parameter_merge_strategies: {name: overwrite}\nparameters: {name: b}\n"),
    ];
    cases.push(("a conflicting strategy is refused", body(json!({}), &conflict), Some("Conflicting merge strategy")));
    let number = [("env1.yaml", "parameter_merge_strategies: {count: merge}\nparameters: {count: 2}\n")];
    cases.push(("a number cannot be merged", body(json!({"count": "1"}), &number), Some("count")));
    assert_same(&cases);
}

#[test]
fn nested_templates_in_files_give_their_parameter_types() {
    let mut cases: Vec<Case> = Vec::new();
    let files = [
        ("nested.yaml", "heat_template_version: 2018-08-31\nparameters:\n  roles: {type: comma_delimited_list}\n"),
        ("env1.yaml", "parameter_merge_strategies: {roles: merge}\nparameter_defaults: {roles: a}\n"),
        ("env2.yaml", "parameter_merge_strategies: {roles: merge}\nparameter_defaults: {roles: b, name: n}\n"),
    ];
    cases.push(("a nested template's parameter merges", body(json!({}), &files), None));
    assert_same(&cases);
}

#[test]
fn bad_requests_are_refused_naming_the_file() {
    let mut cases: Vec<Case> = Vec::new();
    let mut missing = body(json!({}), &[("env1.yaml", "parameters: {name: a}\n")]);
    missing["environment_files"] = json!(["env1.yaml", "absent.yaml"]);
    cases.push(("a name not in files", missing, Some("\"absent.yaml\" is not in the request's files")));
    let wrong_section = [("env1.yaml", "paramters: {name: a}\n")];
    cases.push(("an unknown section", body(json!({}), &wrong_section), Some("environment file \"env1.yaml\"")));
    let null_section = [("env1.yaml", "parameters:\n")];
    cases.push(("an empty section", body(json!({}), &null_section), Some("empty section \"parameters\"")));
    let not_mapping = [("env1.yaml", "- a\n- b\n")];
    cases.push(("not a mapping", body(json!({}), &not_mapping), Some("env1.yaml")));
    assert_same(&cases);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_merges_environment_files() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut shim = Shim::start().await;
    let token = std::fs::read_to_string(shim.token_file()).expect("the admin token");
    let client = reqwest::Client::new();
    let post = |body: Value| {
        client
            .post(format!("{}/v1/stacks", shim.url()))
            .bearer_auth(token.trim())
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let mut request = body(
        json!({"name": "cli", "count": "3"}),
        &[
            ("env1.yaml", "parameter_merge_strategies: {items: merge}\nparameters: {name: from-file, items: [a]}\n"),
            ("env2.yaml", "parameter_merge_strategies: {items: merge}\nparameters: {items: [b]}\n"),
        ],
    );
    request["name"] = json!("merged");
    let response = post(request.clone()).await.expect("POST /v1/stacks");
    assert!(response.status().is_success(), "{}", response.text().await.unwrap_or_default());
    let shown = shim.stack_show("merged").await;
    assert_eq!(shown["parameters"]["name"], json!("from-file"), "{shown}");
    assert_eq!(shown["parameters"]["items"], json!(["a", "b"]), "{shown}");
    assert_eq!(shown["parameters"]["count"], json!(3), "{shown}");

    request["name"] = json!("broken");
    request["environment_files"] = json!(["env1.yaml", "../etc/passwd"]);
    let response = post(request).await.expect("POST /v1/stacks");
    assert_eq!(response.status().as_u16(), 400);
    let error: Value = serde_json::from_str(&response.text().await.unwrap_or_default()).expect("a JSON error");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("\"../etc/passwd\" is not in the request's files"), "{error}");
    let listed = shim.cli_json(&["stack", "list", "--json"]).await;
    assert!(!listed.to_string().contains("broken"), "a refused stack is not stored: {listed}");
    shim.stop().await;
}
