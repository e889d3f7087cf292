//! Evaluation tests: str_replace, list_join, get_param and get_attr paths, readiness, nesting.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::template::{EvalError, Expr, ParameterScope, Scope, render};

/// Parameters, created resources and their attributes, as the engine would answer.
#[derive(Default)]
struct TestScope {
    parameters: BTreeMap<String, Value>,
    resources: BTreeMap<String, Value>,
    attributes: BTreeMap<(String, String), Value>,
}

impl Scope for TestScope {
    fn parameter(&self, name: &str) -> Option<Value> {
        self.parameters.get(name).cloned()
    }

    fn resource_id(&self, resource: &str) -> Option<Value> {
        self.resources.get(resource).cloned()
    }

    fn attribute(&self, resource: &str, attribute: &str) -> Option<Value> {
        self.attributes.get(&(resource.to_owned(), attribute.to_owned())).cloned()
    }
}

fn scope() -> TestScope {
    let mut scope = TestScope::default();
    for (name, value) in [
        ("name", json!("web")),
        ("port", json!(8080)),
        ("ratio", json!(0.5)),
        ("flag", json!(true)),
        ("zones", json!(["a", "b", "c"])),
        ("settings", json!({"db": {"hosts": ["h1", "h2"]}, "z": 1, "a": [2]})),
    ] {
        scope.parameters.insert(name.into(), value);
    }
    scope.resources.insert("config".into(), json!("5d2f-id"));
    scope.attributes.insert(("db".into(), "url".into()), json!("postgres://db"));
    scope.attributes.insert(("db".into(), "hosts".into()), json!({"primary": ["10.0.0.1", "10.0.0.2"]}));
    scope.attributes.insert(("db".into(), "empty".into()), json!(null));
    scope
}

fn evaluate(value: Value) -> Result<Value, EvalError> {
    let expr = match Expr::from_json(&value) {
        Ok(expr) => expr,
        Err(error) => panic!("{value}: {error}"),
    };
    expr.evaluate(&scope())
}

fn ok(value: Value) -> Value {
    match evaluate(value.clone()) {
        Ok(result) => result,
        Err(error) => panic!("{value} should evaluate: {error}"),
    }
}

fn invalid(value: Value) -> String {
    match evaluate(value.clone()) {
        Err(EvalError::Invalid { message }) => message,
        other => panic!("{value} should be invalid, got {other:?}"),
    }
}

#[test]
fn str_replace_with_several_params() {
    let value = json!({"str_replace": {
        "template": "http://$host:$port/$path?$flag&$ratio&$none",
        "params": {"$host": {"get_param": "name"}, "$port": {"get_param": "port"}, "$path": "x",
                   "$flag": {"get_param": "flag"}, "$ratio": {"get_param": "ratio"}, "$none": null}
    }});
    assert_eq!(ok(value), json!("http://web:8080/x?True&0.5&"));
}

#[test]
fn str_replace_renders_maps_and_lists_as_sorted_python_json() {
    let value =
        json!({"str_replace": {"template": "m=M l=L", "params": {"M": {"get_param": "settings"}, "L": ["é", 1]}}});
    assert_eq!(ok(value), json!(r#"m={"a": [2], "db": {"hosts": ["h1", "h2"]}, "z": 1} l=["\u00e9", 1]"#));
}

#[test]
fn str_replace_prefers_longer_placeholders_and_never_rescans() {
    let value = json!({"str_replace": {"template": "$var $var_long", "params": {"$var": "A", "$var_long": "B"}}});
    assert_eq!(ok(value), json!("A B"));
    // A replacement containing another placeholder is not replaced again.
    let value = json!({"str_replace": {"template": "$a $b", "params": {"$a": "$b", "$b": "x"}}});
    assert_eq!(ok(value), json!("$b x"));
    let value = json!({"str_replace": {"template": "aaa", "params": {"a": "aa"}}});
    assert_eq!(ok(value), json!("aaaaaa"));
}

#[test]
fn str_replace_errors() {
    let message = invalid(json!({"str_replace": {"template": {"get_param": "zones"}, "params": {}}}));
    assert_eq!(message, "str_replace: template must be a string, not a list");
    let message = invalid(json!({"str_replace": {"template": "x", "params": {"get_param": "zones"}}}));
    assert_eq!(message, "str_replace: params must be a map, not a list");
    assert!(invalid(json!({"str_replace": {"template": "x", "params": {"": "y"}}})).contains("must not be empty"));
    let huge = "x".repeat(1 << 20);
    let message = invalid(json!({"str_replace": {"template": "$$$$$$$$$$$$$$$$$$$$", "params": {"$": huge}}}));
    assert!(message.contains("larger than"), "{message}");
}

#[test]
fn list_join_joins_every_list() {
    let value = json!({"list_join": [", ", ["a", 1], {"get_param": "zones"}, null, [{"k": "v", "a": null}]]});
    assert_eq!(ok(value), json!(r#"a, 1, a, b, c, {"a": null, "k": "v"}"#));
    assert_eq!(ok(json!({"list_join": ["-", []]})), json!(""));
    assert_eq!(invalid(json!({"list_join": [",", {"get_param": "name"}]})), "list_join: expected lists, got a string");
}

#[test]
fn get_param_with_a_path() {
    assert_eq!(ok(json!({"get_param": ["settings", "db", "hosts", 1]})), json!("h2"));
    assert_eq!(ok(json!({"get_param": ["settings", "db", "hosts", "0"]})), json!("h1"));
    assert_eq!(ok(json!({"get_param": ["zones", -1]})), json!("c"));
    assert_eq!(ok(json!({"get_param": ["settings", {"get_param": "name"}]})), json!(""));
    assert_eq!(ok(json!({"get_param": ["zones", 9]})), json!(""));
    assert_eq!(ok(json!({"get_param": ["name", "x"]})), json!(""));
    assert_eq!(ok(json!({"get_param": "zones"})), json!(["a", "b", "c"]));
    assert_eq!(
        invalid(json!({"get_param": ["settings", ["a"]]})),
        "get_param: path components must be strings or integers"
    );
    assert_eq!(invalid(json!({"get_param": "nope"})), "get_param: unknown parameter \"nope\"");
}

#[test]
fn get_attr_with_a_path_and_readiness() {
    assert_eq!(ok(json!({"get_attr": ["db", "url"]})), json!("postgres://db"));
    assert_eq!(ok(json!({"get_attr": ["db", "hosts", "primary", 0]})), json!("10.0.0.1"));
    assert_eq!(ok(json!({"get_attr": ["db", "hosts", "secondary", 0]})), json!(null));
    assert_eq!(ok(json!({"get_attr": ["db", "empty", "x"]})), json!(null));
    assert_eq!(
        evaluate(json!({"get_attr": ["db", "later"]})),
        Err(EvalError::NotReady { resource: "db".into(), attribute: Some("later".into()) })
    );
    assert_eq!(ok(json!({"get_resource": "config"})), json!("5d2f-id"));
    let not_ready = evaluate(json!({"get_resource": "other"}));
    assert_eq!(not_ready, Err(EvalError::NotReady { resource: "other".into(), attribute: None }));
    assert_eq!(not_ready.err().map(|error| error.to_string()), Some("resource \"other\" is not available yet".into()));
}

#[test]
fn nested_functions() {
    let value = json!({
        "url": {"str_replace": {
            "template": "$scheme://$hosts/$name",
            "params": {
                "$scheme": "https",
                "$hosts": {"list_join": [",", {"get_attr": ["db", "hosts", "primary"]}, [{"get_param": "name"}]]},
                "$name": {"get_param": ["settings", "db", "hosts", 0]}
            }
        }},
        "config": {"get_resource": "config"},
        "input": {"get_input": "x"},
        "list": [{"get_param": "port"}, "literal"]
    });
    assert_eq!(
        ok(value),
        json!({
            "url": "https://10.0.0.1,10.0.0.2,web/h1",
            "config": "5d2f-id",
            "input": {"get_input": "x"},
            "list": [8080, "literal"]
        })
    );
    let waiting = json!({"str_replace": {"template": "$x", "params": {"$x": {"get_attr": ["cache", "url"]}}}});
    assert!(matches!(evaluate(waiting), Err(EvalError::NotReady { .. })));
}

#[test]
fn parameter_scope_knows_no_resources() {
    let parameters: BTreeMap<String, Value> = [("p".to_owned(), json!(1))].into();
    let scope = ParameterScope::new(&parameters);
    assert_eq!(Expr::GetParam { name: "p".into(), path: vec![] }.evaluate(&scope), Ok(json!(1)));
    assert!(matches!(Expr::GetResource("r".into()).evaluate(&scope), Err(EvalError::NotReady { .. })));
}

#[test]
fn render_matches_heat() {
    assert_eq!(render(&json!(null)), "");
    assert_eq!(render(&json!(false)), "False");
    assert_eq!(render(&json!(1.0)), "1.0");
    assert_eq!(render(&json!({"b": 1, "a": {"d": 1, "c": 2}})), r#"{"a": {"c": 2, "d": 1}, "b": 1}"#);
}
