//! Differential: the value resource types (`OS::Heat::None`, `OS::Heat::Value` with each `type`,
//! `OS::Heat::RandomString`) in a real Heat engine (tests/peers/real-heat, openstack-heat from
//! PyPI) and in the real shim binary: the same template gives the same outputs (a random value:
//! the same length and character rules), and the same bad properties are refused by both.

use std::time::Duration;

use anneal_tests::{RealHeat, Shim, real_heat::unique_stack_name};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const TEMPLATE: &str = r#"
heat_template_version: 2018-08-31
parameters:
  word: {type: string, default: hello}
resources:
  stub:
    type: OS::Heat::None
    properties: {anything: [1, {nested: true}], more: {get_param: word}}
  text: {type: OS::Heat::Value, properties: {value: {get_param: word}}}
  number: {type: OS::Heat::Value, properties: {value: "42", type: number}}
  decimal: {type: OS::Heat::Value, properties: {value: 2.5, type: number}}
  listed: {type: OS::Heat::Value, properties: {value: "a,b,,c", type: comma_delimited_list}}
  listed_already: {type: OS::Heat::Value, properties: {value: [x, 1], type: comma_delimited_list}}
  data: {type: OS::Heat::Value, properties: {value: {k: [1, 2], s: t}, type: json}}
  data_text: {type: OS::Heat::Value, properties: {value: '{"j": null}', type: json}}
  flag: {type: OS::Heat::Value, properties: {value: "yes", type: boolean}}
  flag_false: {type: OS::Heat::Value, properties: {value: "0", type: boolean}}
  untyped: {type: OS::Heat::Value, properties: {value: {m: [1]}}}
  chained: {type: OS::Heat::Value, properties: {value: {get_attr: [data, value, k, 1]}}}
  secret:
    type: OS::Heat::RandomString
    properties:
      length: 24
      character_classes: [{class: digits, min: 4}, {class: lowercase, min: 4}]
      character_sequences: [{sequence: "!@", min: 2}]
  plain: {type: OS::Heat::RandomString}
outputs:
  stub_attribute: {value: {get_attr: [stub, whatever]}}
  text: {value: {get_attr: [text, value]}}
  number: {value: {get_attr: [number, value]}}
  decimal: {value: {get_attr: [decimal, value]}}
  listed: {value: {get_attr: [listed, value]}}
  listed_already: {value: {get_attr: [listed_already, value]}}
  data: {value: {get_attr: [data, value]}}
  data_text: {value: {get_attr: [data_text, value]}}
  flag: {value: {get_attr: [flag, value]}}
  flag_false: {value: {get_attr: [flag_false, value]}}
  untyped: {value: {get_attr: [untyped, value]}}
  chained: {value: {get_attr: [chained, value]}}
  secret: {value: {get_attr: [secret, value]}}
  secret_reference: {value: {get_resource: secret}}
  plain: {value: {get_attr: [plain, value]}}
"#;

/// The outputs that are not random, by name.
const FIXED_OUTPUTS: &[&str] = &[
    "stub_attribute",
    "text",
    "number",
    "decimal",
    "listed",
    "listed_already",
    "data",
    "data_text",
    "flag",
    "flag_false",
    "untyped",
    "chained",
];

/// Templates both must refuse: (what the case shows, resource definitions).
const REFUSED: &[(&str, &str)] = &[
    (
        "class minimums above the length",
        "r: {type: OS::Heat::RandomString, properties: {length: 3, character_classes: [{class: digits, min: 4}]}}",
    ),
    ("a length of 0", "r: {type: OS::Heat::RandomString, properties: {length: 0}}"),
    ("an unknown class", "r: {type: OS::Heat::RandomString, properties: {character_classes: [{class: emoji}]}}"),
    ("an empty sequence", "r: {type: OS::Heat::RandomString, properties: {character_sequences: [{sequence: ''}]}}"),
    ("an unknown Value type", "r: {type: OS::Heat::Value, properties: {value: 1, type: float}}"),
    ("a number that is not one", "r: {type: OS::Heat::Value, properties: {value: abc, type: number}}"),
    ("a Value without value", "r: {type: OS::Heat::Value, properties: {type: string}}"),
    ("an unknown Value property", "r: {type: OS::Heat::Value, properties: {value: 1, colour: red}}"),
];

fn refused_template(resources: &str) -> String {
    format!("heat_template_version: 2018-08-31\nresources:\n  {resources}\n")
}

fn assert_secret(name: &str, value: &Value) {
    let text = value.as_str().unwrap_or_else(|| panic!("{name}: a string, not {value}"));
    let count = |test: fn(&char) -> bool| text.chars().filter(test).count();
    if name == "plain" {
        assert!(text.len() == 32 && text.chars().all(|c| c.is_ascii_alphanumeric()), "{name}: {text}");
        return;
    }
    assert_eq!(text.chars().count(), 24, "{name}: {text}");
    assert!(count(char::is_ascii_digit) >= 4, "{name}: four digits at least: {text}");
    assert!(count(char::is_ascii_lowercase) >= 4, "{name}: four lowercase at least: {text}");
    assert!(count(|c| *c == '!' || *c == '@') >= 2, "{name}: two of the sequence at least: {text}");
    let allowed = |c: char| c.is_ascii_digit() || c.is_ascii_lowercase() || c == '!' || c == '@';
    assert!(text.chars().all(allowed), "{name}: only the classes' characters: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn value_types_give_heats_outputs() {
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let stack = api.create_stack(&unique_stack_name("values"), TEMPLATE, &[]).await;
    let settled = api.wait_stack_settled(&stack, None, Duration::from_secs(120)).await;
    assert_eq!(settled["stack_status"], "CREATE_COMPLETE", "Heat created the stack: {settled}");
    let heat_outputs = api.outputs(&stack).await;

    let shim = Shim::start().await;
    let path = shim.write_template("values.yaml", TEMPLATE);
    let created = shim.cli(&["stack", "create", "values", "--template", path.to_str().expect("utf-8")]).await;
    assert_eq!(created.code, 0, "{created:?}");
    let shown = shim.settled("values", Duration::from_secs(30)).await;
    assert_eq!(shown["status"], "CREATE_COMPLETE", "{shown}");
    let shim_outputs = shim.stack_outputs("values").await;

    for name in FIXED_OUTPUTS {
        assert_eq!(shim_outputs.get(*name), heat_outputs.get(*name), "output {name}: the shim's differs from Heat's");
    }
    for name in ["secret", "plain"] {
        assert_secret(&format!("Heat's {name}"), &heat_outputs[name]);
        assert_secret(name, &shim_outputs[name]);
    }
    assert_eq!(heat_outputs["secret_reference"], heat_outputs["secret"], "Heat: get_resource is the value");
    assert_eq!(shim_outputs["secret_reference"], shim_outputs["secret"], "the shim: get_resource is the value");
    api.delete_stack(&stack).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_properties_are_refused_by_both() {
    let heat = RealHeat::shared().await;
    let api = heat.admin().await;
    let shim = Shim::start().await;
    let mut mismatches = Vec::new();
    for (index, (case, resources)) in REFUSED.iter().enumerate() {
        let template = refused_template(resources);
        let body = json!({"stack_name": unique_stack_name("refused"), "template": template, "parameters": {}});
        let (status, answer) = api.call(Method::POST, "stacks", Some(&body)).await;
        let heat_refused = status == StatusCode::BAD_REQUEST;
        let path = shim.write_template(&format!("refused-{index}.yaml"), &template);
        let name = format!("refused-{index}");
        let created = shim.cli(&["stack", "create", &name, "--template", path.to_str().expect("utf-8")]).await;
        let shim_refused = created.code != 0;
        if heat_refused != shim_refused {
            mismatches.push(format!("{case}: Heat {status} {answer}; the shim {created:?}"));
        }
        assert!(heat_refused, "{case}: Heat is expected to refuse it, answered {status} {answer}");
    }
    assert!(mismatches.is_empty(), "the shim and Heat disagree:\n{}", mismatches.join("\n"));
}
