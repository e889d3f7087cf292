//! resolve_parameters tests: typing, defaults, unknown and missing values, constraints, hidden values.

use serde_json::json;

use super::{assert_problem, strings, template};
use crate::template::{Template, resolve_parameters};

fn declared(parameters: &str) -> Template {
    template(&format!("heat_template_version: 2018-08-31\nparameters:\n{parameters}"))
}

fn problems(parameters: &str, given: &[(&str, &str)]) -> Vec<String> {
    match resolve_parameters(&declared(parameters), &strings(given)) {
        Ok(values) => panic!("expected problems, got {values:?}"),
        Err(problems) => problems,
    }
}

#[test]
fn values_are_typed() {
    let parsed = declared(
        "  s: {type: string}
  n: {type: number}
  f: {type: number}
  j: {type: json}
  l: {type: comma_delimited_list}
  e: {type: comma_delimited_list}
  b: {type: boolean}
  c: {type: boolean}
",
    );
    let given = strings(&[
        ("s", " as is "),
        ("n", "42"),
        ("f", "2.5"),
        ("j", r#"{"a": [1, 2]}"#),
        ("l", "a, b ,c"),
        ("e", ""),
        ("b", "yes"),
        ("c", "Off"),
    ]);
    let Ok(values) = resolve_parameters(&parsed, &given) else { panic!("values should resolve") };
    assert_eq!(values["s"], json!(" as is "));
    assert_eq!(values["n"], json!(42));
    assert_eq!(values["f"], json!(2.5));
    assert_eq!(values["j"], json!({"a": [1, 2]}));
    // Heat splits at each comma and trims nothing (param_utils.delim_string_to_list).
    assert_eq!(values["l"], json!(["a", " b ", "c"]));
    assert_eq!(values["e"], json!([]));
    assert_eq!(values["b"], json!(true));
    assert_eq!(values["c"], json!(false));
}

#[test]
fn boolean_spellings() {
    let parsed = declared("  b: {type: boolean}\n");
    for (text, expected) in
        [("true", true), ("FALSE", false), ("yes", true), ("no", false), ("1", true), ("0", false), ("on", true)]
            .into_iter()
            .chain([("t", true), ("F", false), ("y", true), ("N", false), (" Yes ", true)])
    {
        let Ok(values) = resolve_parameters(&parsed, &strings(&[("b", text)])) else { panic!("{text}") };
        assert_eq!(values["b"], json!(expected), "{text}");
    }
    assert_problem(
        &problems("  b: {type: boolean}\n", &[("b", "maybe")]),
        "parameter \"b\": \"maybe\" is not a boolean",
    );
}

#[test]
fn defaults_apply_and_are_typed() {
    let parsed = declared(
        "  s: {type: string, default: 5}
  n: {type: number, default: '7'}
  j: {type: json, default: [1, {a: b}]}
  l: {type: comma_delimited_list, default: [x, 2, null, true]}
  b: {type: boolean, default: 'no'}
  given: {type: string, default: unused}
",
    );
    let Ok(values) = resolve_parameters(&parsed, &strings(&[("given", "used")])) else { panic!("defaults resolve") };
    assert_eq!(values["s"], json!("5"));
    assert_eq!(values["n"], json!(7));
    assert_eq!(values["j"], json!([1, {"a": "b"}]));
    assert_eq!(values["l"], json!(["x", "2", "None", "True"]), "Python's str() of each item, as Heat");
    assert_eq!(values["b"], json!(false));
    assert_eq!(values["given"], json!("used"));
}

#[test]
fn json_values_are_any_json_as_heat_reads_them() {
    let parsed = declared("  j: {type: json}\n  d: {type: json, default: 5}\n");
    for (text, expected) in [("5", json!(5)), ("\"s\"", json!("s")), ("null", json!(null)), ("", json!(""))] {
        let Ok(values) = resolve_parameters(&parsed, &strings(&[("j", text)])) else { panic!("{text}") };
        assert_eq!(values["j"], expected, "{text}");
        assert_eq!(values["d"], json!(5));
    }
}

#[test]
fn unknown_and_missing_parameters() {
    let problems = problems("  needed: {type: string}\n", &[("extra", "1")]);
    assert_eq!(problems, ["unknown parameter \"extra\"", "parameter \"needed\": no value"]);
}

#[test]
fn conversion_errors_name_the_parameter() {
    let declarations = "  n: {type: number}\n  j: {type: json}\n  k: {type: json}\n  d: {type: number, default: abc}\n";
    let problems = problems(declarations, &[("n", "ten"), ("j", "{nope"), ("k", " ")]);
    assert_eq!(
        problems,
        [
            "parameter \"n\": \"ten\" is not a number",
            "parameter \"j\": \"{nope\" is not valid JSON",
            "parameter \"k\": \" \" is not valid JSON",
            "parameter \"d\": the default \"abc\" is not a number",
        ]
    );
    assert_problem(&self::problems("  n: {type: number}\n", &[("n", "inf")]), "is not a number");
}

#[test]
fn hidden_values_never_appear_in_messages() {
    let declarations = "  secret: {type: number, hidden: true}
  pin: {type: string, hidden: true, constraints: [{allowed_pattern: '[0-9]{4}'}, {length: {max: 4}}]}
  key: {type: json, hidden: true}
";
    let problems = problems(declarations, &[("secret", "hunter2"), ("pin", "hunter22"), ("key", "{\"hunter2")]);
    assert_eq!(problems.len(), 4, "{problems:#?}");
    for problem in &problems {
        assert!(!problem.contains("hunter"), "{problem}");
    }
    assert_problem(&problems, "parameter \"secret\": the value is not a number");
    assert_problem(&problems, "parameter \"pin\": the value must match the pattern \"[0-9]{4}\"");
    assert_problem(&problems, "parameter \"pin\": the length must be no greater than 4");
    assert_problem(&problems, "parameter \"key\": the value is not valid JSON");
}

#[test]
fn constraints_are_checked() {
    let declarations = "  name: {type: string, constraints: [{length: {min: 2, max: 4}}]}
  size: {type: number, constraints: [{range: {min: 1, max: 10}}]}
  low: {type: number, constraints: [{range: {min: 1}}]}
  flavor: {type: string, constraints: [{allowed_values: [small, large]}]}
  zones: {type: comma_delimited_list, constraints: [{allowed_values: [a, b]}, {length: {max: 2}}]}
  word: {type: string, constraints: [{allowed_pattern: '[a-z]+'}]}
  tags: {type: json, constraints: [{length: {min: 1}}]}
";
    let given = [
        ("name", "toolong"),
        ("size", "11"),
        ("low", "0.5"),
        ("flavor", "medium"),
        ("zones", "a,c,b"),
        ("word", "abc1"),
        ("tags", "{}"),
    ];
    assert_eq!(
        problems(declarations, &given),
        [
            "parameter \"name\": the length must be in the range 2 to 4",
            "parameter \"size\": the value must be in the range 1 to 10",
            "parameter \"low\": the value must be at least 1",
            "parameter \"flavor\": the value must be one of: small, large",
            "parameter \"zones\": the value must be one of: a, b",
            "parameter \"zones\": the length must be no greater than 2",
            "parameter \"word\": the value must match the pattern \"[a-z]+\"",
            "parameter \"tags\": the length must be at least 1",
        ]
    );
}

#[test]
fn constraint_descriptions_are_the_message() {
    let declarations =
        "  word: {type: string, constraints: [{allowed_pattern: '[a-z]+', description: lower-case letters only}]}\n";
    assert_eq!(problems(declarations, &[("word", "ABC")]), ["parameter \"word\": lower-case letters only"]);
}

#[test]
fn constraints_apply_to_defaults_and_pass_when_met() {
    let declarations = "  size: {type: number, default: 20, constraints: [{range: {max: 10}}]}\n";
    assert_eq!(problems(declarations, &[]), ["parameter \"size\": the value must be no greater than 10"]);
    let parsed = declared(
        "  size: {type: number, constraints: [{range: {min: 1, max: 10}}, {allowed_values: ['2', 3]}]}
  flag: {type: boolean, constraints: [{allowed_values: ['true']}]}
  word: {type: string, constraints: [{allowed_pattern: 'a|ab'}, {allowed_values: [1, ab]}]}
",
    );
    let given = strings(&[("size", "2.0"), ("flag", "yes"), ("word", "ab")]);
    assert!(resolve_parameters(&parsed, &given).is_ok());
    // The pattern must match the whole value, as in Heat.
    assert!(resolve_parameters(&parsed, &strings(&[("size", "3"), ("flag", "1"), ("word", "abc")])).is_err());
}
