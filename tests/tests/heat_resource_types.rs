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
  count: {type: string, default: "12"}
resources:
  stub:
    type: OS::Heat::None
    properties: {anything: [1, {nested: true}], more: {get_param: word}}
  text: {type: OS::Heat::Value, properties: {value: {get_param: word}}}
  number: {type: OS::Heat::Value, properties: {value: "42", type: number}}
  decimal: {type: OS::Heat::Value, properties: {value: 2.5, type: number}}
  listed_already: {type: OS::Heat::Value, properties: {value: [x, 1], type: comma_delimited_list}}
  data: {type: OS::Heat::Value, properties: {value: {k: [1, 2], s: t}, type: json}}
  text_number: {type: OS::Heat::Value, properties: {value: 7, type: string}}
  from_parameter: {type: OS::Heat::Value, properties: {value: {get_param: count}, type: number}}
  flag: {type: OS::Heat::Value, properties: {value: "True", type: boolean}}
  flag_false: {type: OS::Heat::Value, properties: {value: false, type: boolean}}
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
  listed_already: {value: {get_attr: [listed_already, value]}}
  data: {value: {get_attr: [data, value]}}
  text_number: {value: {get_attr: [text_number, value]}}
  from_parameter: {value: {get_attr: [from_parameter, value]}}
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
    "listed_already",
    "data",
    "text_number",
    "from_parameter",
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
    ("yes is not a boolean to Heat", "r: {type: OS::Heat::Value, properties: {value: 'yes', type: boolean}}"),
    ("nor is 0", "r: {type: OS::Heat::Value, properties: {value: '0', type: boolean}}"),
    ("an unknown Value type", "r: {type: OS::Heat::Value, properties: {value: 1, type: float}}"),
    ("a number that is not one", "r: {type: OS::Heat::Value, properties: {value: abc, type: number}}"),
    (
        "a comma-delimited string is not a list",
        "r: {type: OS::Heat::Value, properties: {value: 'a,b', type: comma_delimited_list}}",
    ),
    ("a JSON text is not a map", "r: {type: OS::Heat::Value, properties: {value: '{\"j\": 1}', type: json}}"),
    ("a float is not a string", "r: {type: OS::Heat::Value, properties: {value: 2.5, type: string}}"),
    ("a Value without value", "r: {type: OS::Heat::Value, properties: {type: string}}"),
    ("an unknown Value property", "r: {type: OS::Heat::Value, properties: {value: 1, colour: red}}"),
];

fn refused_template(resources: &str) -> String {
    format!("heat_template_version: 2018-08-31\nresources:\n  {resources}\n")
}

fn assert_secret(name: &str, value: &Value) {
    let text = value.as_str().unwrap_or_else(|| panic!("{name}: a string, not {value}"));
    let count = |test: fn(&char) -> bool| text.chars().filter(test).count();
    if name.ends_with("plain") {
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

    let differing: Vec<String> = FIXED_OUTPUTS
        .iter()
        .filter(|name| shim_outputs.get(**name) != heat_outputs.get(**name))
        .map(|name| {
            format!("output {name}: the shim {:?}, Heat {:?}", shim_outputs.get(*name), heat_outputs.get(*name))
        })
        .collect();
    assert!(differing.is_empty(), "the shim's outputs differ from Heat's:\n{}", differing.join("\n"));
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

    // A value computed at create time is checked then: the resource fails, in both.
    let late = refused_template(
        "a: {type: OS::Heat::Value, properties: {value: abc}}\n  \
         b: {type: OS::Heat::Value, properties: {value: {get_attr: [a, value]}, type: number}}",
    );
    let stack = api.create_stack(&unique_stack_name("late"), &late, &[]).await;
    let settled = api.wait_stack_settled(&stack, None, Duration::from_secs(120)).await;
    assert_eq!(settled["stack_status"], "CREATE_FAILED", "{settled}");
    let reason = settled["stack_status_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("could not convert string to float: 'abc'"), "Heat: {reason}");
    let path = shim.write_template("late.yaml", &late);
    let created = shim.cli(&["stack", "create", "late", "--template", path.to_str().expect("utf-8")]).await;
    assert_eq!(created.code, 0, "a computed value is not known at validation: {created:?}");
    let shown = shim.settled("late", Duration::from_secs(30)).await;
    assert_eq!(shown["status"], "CREATE_FAILED", "{shown}");
    assert!(shown.to_string().contains("could not convert string to float: 'abc'"), "the shim: {shown}");
}
