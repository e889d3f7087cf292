//! Expr tests: recognising functions in JSON, rejecting unsupported ones, to_json round trips, references.

use serde_json::{Value, json};

use crate::template::{Expr, Reference, UNSUPPORTED_FUNCTIONS};

fn parse(value: Value) -> Expr {
    match Expr::from_json(&value) {
        Ok(expr) => expr,
        Err(error) => panic!("{value} should parse: {error}"),
    }
}

fn rejection(value: Value) -> String {
    match Expr::from_json(&value) {
        Ok(expr) => panic!("{value} should be rejected, got {expr:?}"),
        Err(error) => error,
    }
}

#[test]
fn functions_are_recognised() {
    assert_eq!(parse(json!({"get_param": "p"})), Expr::GetParam { name: "p".into(), path: vec![] });
    assert_eq!(
        parse(json!({"get_param": ["p", "k", 0]})),
        Expr::GetParam { name: "p".into(), path: vec![Expr::Literal(json!("k")), Expr::Literal(json!(0))] }
    );
    assert_eq!(parse(json!({"get_resource": "r"})), Expr::GetResource("r".into()));
    assert_eq!(
        parse(json!({"get_attr": ["r", "a", {"get_param": "i"}]})),
        Expr::GetAttr {
            resource: "r".into(),
            attribute: "a".into(),
            path: vec![Expr::GetParam { name: "i".into(), path: vec![] }],
        }
    );
    assert_eq!(parse(json!({"get_input": "i"})), Expr::GetInput("i".into()));
    assert_eq!(
        parse(json!({"str_replace": {"template": "x $a", "params": {"$a": {"get_param": "a"}}}})),
        Expr::StrReplace {
            template: Box::new(Expr::Literal(json!("x $a"))),
            params: Box::new(Expr::Map(vec![("$a".into(), Expr::GetParam { name: "a".into(), path: vec![] })])),
        }
    );
    assert_eq!(
        parse(json!({"list_join": [",", ["a"], {"get_param": "l"}]})),
        Expr::ListJoin {
            delimiter: ",".into(),
            lists: vec![Expr::Literal(json!(["a"])), Expr::GetParam { name: "l".into(), path: vec![] }],
        }
    );
}

#[test]
fn data_without_functions_stays_literal() {
    let data = json!({"a": [1, {"b": null}], "get_param": "x", "c": "d"});
    assert_eq!(parse(data.clone()), Expr::Literal(data));
    assert_eq!(parse(json!({"custom_key": "x"})), Expr::Literal(json!({"custom_key": "x"})));
    assert_eq!(
        parse(json!([1, {"get_resource": "r"}])),
        Expr::List(vec![Expr::Literal(json!(1)), Expr::GetResource("r".into())])
    );
    assert_eq!(
        parse(json!({"k": {"get_resource": "r"}, "l": 2})),
        Expr::Map(vec![("k".into(), Expr::GetResource("r".into())), ("l".into(), Expr::Literal(json!(2)))])
    );
}

#[test]
fn unsupported_functions_are_rejected() {
    for name in UNSUPPORTED_FUNCTIONS.iter().copied().chain(["Fn::Anything"]) {
        let mut map = serde_json::Map::new();
        map.insert(name.to_owned(), json!("x"));
        let message = rejection(Value::Object(map));
        assert!(
            message.contains(name) && message.contains("not supported")
                || message == format!("unsupported function {name}"),
            "{message}"
        );
    }
    assert_eq!(rejection(json!({"a": [{"get_server_attr": "f"}]})), "unsupported function get_server_attr");
}

#[test]
fn bad_arguments_are_rejected() {
    for (value, expected) in [
        (json!({"get_param": 1}), "get_param: expected"),
        (json!({"get_param": []}), "get_param: expected"),
        (json!({"get_resource": ["r"]}), "get_resource: expected a resource name"),
        (json!({"get_attr": "r"}), "Argument to \"get_attr\" must be a list"),
        (json!({"get_attr": []}), "Arguments to \"get_attr\" can be of the next forms"),
        (json!({"get_attr": ["r", 1]}), "get_attr: expected"),
        (json!({"get_input": ""}), "get_input: expected an input name"),
        (json!({"str_replace": {"template": "x"}}), "str_replace: expected a map"),
        (json!({"str_replace": {"template": "x", "params": {}, "extra": 1}}), "str_replace: expected a map"),
        (json!({"str_replace": {"template": 1, "params": {}}}), "str_replace: template must be a string"),
        (json!({"str_replace": {"template": "x", "params": [1]}}), "str_replace: params must be a map"),
        (json!({"list_join": [","]}), "list_join: expected"),
        (json!({"list_join": [1, []]}), "list_join: expected"),
        (json!({"list_join": [",", "a"]}), "list_join: each argument after the delimiter must be a list"),
    ] {
        let error = rejection(value.clone());
        assert!(error.starts_with(expected), "{value}: {error}");
    }
}

#[test]
fn to_json_round_trips() {
    let values = [
        json!({"get_param": "p"}),
        json!({"get_param": ["p", "k", 0, {"get_param": "i"}]}),
        json!({"get_resource": "r"}),
        json!({"get_attr": ["r", "a"]}),
        json!({"get_attr": ["r", "a", "k", 1]}),
        json!({"get_input": "i"}),
        json!({"str_replace": {"template": {"get_param": "t"}, "params": {"$x": {"get_attr": ["r", "a"]}, "$y": 1}}}),
        json!({"list_join": [", ", ["a", "b"], {"get_attr": ["r", "list"]}, null]}),
        json!({"a": [1, {"get_resource": "r"}, {"k": {"get_input": "i"}}], "b": {"c": null}}),
        json!("plain"),
        json!([1, 2.5, true, null]),
    ];
    for value in values {
        let expr = parse(value.clone());
        assert_eq!(expr.to_json(), value);
        assert_eq!(parse(expr.to_json()), expr);
    }
}

#[test]
fn references_and_names_are_listed_once() {
    let expr = parse(json!({
        "a": {"get_resource": "one"},
        "b": [{"get_attr": ["two", "x", {"get_param": "p"}]}, {"get_resource": "one"}],
        "c": {"str_replace": {"template": {"get_param": "t"}, "params": {"$": {"get_attr": ["two", "x"]}}}},
        "d": {"list_join": ["", [{"get_attr": ["two", "y"]}, {"get_input": "i"}, {"get_param": "p"}]]}
    }));
    assert_eq!(
        expr.references(),
        [
            Reference { resource: "one".into(), attribute: None },
            Reference { resource: "two".into(), attribute: Some("x".into()) },
            Reference { resource: "two".into(), attribute: Some("y".into()) },
        ]
    );
    assert_eq!(expr.parameter_names(), ["p", "t"]);
    assert_eq!(expr.input_names(), ["i"]);
    assert!(parse(json!({"x": 1})).references().is_empty());
}

#[test]
fn a_value_reads_hidden_through_any_function_and_the_expansion_marks() {
    let is_hidden = |name: &str| name == "secret";
    let reads = |value: Value| parse(value).reads_hidden(&is_hidden);
    for value in [
        json!({"get_param": "secret"}),
        json!({"get_param": ["secret", "key"]}),
        json!({"str_replace": {"template": "pw=$p", "params": {"$p": {"get_param": "secret"}}}}),
        json!({"list_join": ["-", [{"get_param": "secret"}]]}),
        json!({"digest": ["sha256", {"get_param": "secret"}]}),
        json!({"yaql": {"expression": "$.data.toUpper()", "data": {"get_param": "secret"}}}),
        json!({"if": [{"equals": [{"get_param": "secret"}, "x"]}, "a", "b"]}),
        json!({"repeat": {"for_each": {"%x%": [1]}, "template": {"get_param": "secret"}}}),
        json!({"get_attr": ["r", "a", {"get_param": "secret"}]}),
        // What the expansion inlined from a hidden parameter, and a nested hidden parameter
        // converted at run time.
        json!({"anneal::hidden": "inlined"}),
        json!({"anneal::nested_parameter": ["string", "app", "pw", true, [], {"get_attr": ["d", "o"]}]}),
    ] {
        assert!(reads(value.clone()), "{value}");
    }
    for value in [
        json!({"get_param": "visible"}),
        json!({"str_replace": {"template": "secret", "params": {"secret": {"get_attr": ["r", "a"]}}}}),
        json!({"anneal::nested_parameter": ["string", "app", "pw", false, [], {"get_attr": ["d", "o"]}]}),
    ] {
        assert!(!reads(value.clone()), "{value}");
    }
    // The mark is the value itself when evaluated, and is kept by the stored form.
    let marked = json!({"anneal::hidden": {"user": "x"}});
    assert_eq!(parse(marked.clone()).to_json(), marked);
    let scope = crate::template::ParameterScope { parameters: &Default::default(), budget: None };
    assert_eq!(parse(marked).evaluate(&scope).unwrap(), json!({"user": "x"}));
}
