//! StructuredDeployment input substitution and the Template helpers.

use serde_json::{Map, Value, json};

use super::template;
use crate::template::{Expr, substitute_inputs};

fn inputs() -> Map<String, Value> {
    let Value::Object(map) = json!({"port": 8080, "hosts": ["a", "b"], "deploy_action": "CREATE"}) else {
        unreachable!()
    };
    map
}

#[test]
fn inputs_are_substituted_recursively() {
    let config = json!({
        "listen": {"get_input": "port"},
        "nested": [{"get_input": "hosts"}, {"x": {"get_input": "deploy_action"}}],
        "not_a_call": {"get_input": "port", "other": 1},
        "number_arg": {"get_input": 5},
        "missing": {"get_input": "nope"},
        "text": "get_input"
    });
    let Ok(result) = substitute_inputs(&config, "get_input", &inputs(), false) else { panic!("LAX never fails") };
    assert_eq!(
        result,
        json!({
            "listen": 8080,
            "nested": [["a", "b"], {"x": "CREATE"}],
            "not_a_call": {"get_input": "port", "other": 1},
            "number_arg": {"get_input": 5},
            "missing": null,
            "text": "get_input"
        })
    );
}

#[test]
fn strict_mode_and_custom_keys() {
    let config = json!({"a": {"get_input": "nope"}});
    assert_eq!(
        substitute_inputs(&config, "get_input", &inputs(), true),
        Err("input \"nope\" has no value (input_values_validate: STRICT)".into())
    );
    let config = json!({"a": {"my_input": "port"}, "b": {"get_input": "port"}});
    assert_eq!(
        substitute_inputs(&config, "my_input", &inputs(), true),
        Ok(json!({"a": 8080, "b": {"get_input": "port"}}))
    );
}

#[test]
fn evaluated_get_input_feeds_substitution() {
    let parsed = template(
        "heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::StructuredConfig
    properties: {config: {port: {get_input: port}}}
",
    );
    let Some(Expr::Map(_)) = parsed.resources[0].1.property("config") else { panic!("config keeps get_input") };
    let Some(config) = parsed.resource("config").and_then(|resource| resource.property("config")) else { panic!() };
    let parameters = Default::default();
    let Ok(value) = config.evaluate(&crate::template::ParameterScope::new(&parameters)) else { panic!() };
    assert_eq!(substitute_inputs(&value, "get_input", &inputs(), true), Ok(json!({"port": 8080})));
}

#[test]
fn template_helpers() {
    let parsed = template(
        "heat_template_version: 2018-08-31
parameters:
  a: {type: string, hidden: true}
  b: {type: string}
  c: {type: number, hidden: true}
",
    );
    assert_eq!(parsed.hidden_parameters(), ["a", "c"]);
    assert!(parsed.parameter("b").is_some_and(|parameter| !parameter.hidden));
    assert!(parsed.parameter("z").is_none() && parsed.resource("z").is_none());
}
