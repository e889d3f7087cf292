//! The `yaql` function's edge cases: the grammar's precedence, the subset's refusals at
//! validation, the limits on hostile expressions (length, nesting, steps, sizes), and how a
//! template reports a bad expression. Agreement with Heat is tests/tests/heat_yaql.rs.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::parse_problems;
use crate::template::evaluate_snippet;
use crate::template::expr::functions::yaql::{MAX_DEPTH, MAX_EXPRESSION_BYTES, YaqlError, check, evaluate};

fn run(expression: &str, data: Value) -> Result<Value, YaqlError> {
    evaluate(&check(expression)?, data)
}

fn value(expression: &str, data: Value) -> Value {
    match run(expression, data) {
        Ok(value) => value,
        Err(error) => panic!("{expression}: {error}"),
    }
}

fn error(expression: &str, data: Value) -> String {
    match run(expression, data) {
        Ok(value) => panic!("{expression} should fail, gave {value}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn precedence_follows_yaql_operator_table() {
    assert_eq!(value("1 + 2 * 3", json!({})), json!(7));
    assert_eq!(value("-2 * 3", json!({})), json!(-6));
    assert_eq!(value("not 1 = 2 and false", json!({})), json!(false));
    assert_eq!(value("true or false and false", json!({})), json!(true));
    assert_eq!(value("[1, 2][1] + 1", json!({})), json!(3));
    assert_eq!(value("$.data.l[0].k", json!({"l": [{"k": "v"}]})), json!("v"));
    assert_eq!(value("let(a => 1) -> let(b => 2) -> $a + $b", json!({})), json!(3));
    assert_eq!(value("2 > 1 = true", json!({})), json!(true));
}

#[test]
fn python_arithmetic() {
    assert_eq!(value("-7 / 2", json!({})), json!(-4));
    assert_eq!(value("7 / -2", json!({})), json!(-4));
    assert_eq!(value("-7 mod 3", json!({})), json!(2));
    assert_eq!(value("7 mod -3", json!({})), json!(-2));
    assert_eq!(value("7.0 / 2", json!({})), json!(3.5));
    assert!(error("9223372036854775807 + 1", json!({})).contains("overflow"));
}

#[test]
fn lambdas_see_their_item_and_the_enclosing_variables() {
    let data = json!({"l": [1, 2, 3], "limit": 1});
    assert_eq!(value("let(limit => $.data.limit) -> $.data.l.where($ > $limit)", data.clone()), json!([2, 3]));
    assert_eq!(value("$.data.l.reduce($1 * $2, 1)", data.clone()), json!(6));
    assert_eq!(value("$.data.l.select([$, $1])", data), json!([[1, 1], [2, 2], [3, 3]]));
    assert_eq!(value("$unknown", json!({})), json!(null));
}

#[test]
fn strings_split_as_python_does() {
    assert_eq!(value("'  a b  c '.split(null, 1)", json!({})), json!(["a", "b  c "]));
    assert_eq!(value("'  a b  c '.rightSplit(null, 1)", json!({})), json!(["  a b", "c"]));
    assert_eq!(value("'a::b'.split(':')", json!({})), json!(["a", "", "b"]));
    assert_eq!(value("regex('(-)').split('a-b')", json!({})), json!(["a", "-", "b"]));
    assert_eq!(value("regex('(a)|b').split('xbx')", json!({})), json!(["x", null, "x"]));
    assert_eq!(value("regex('(?P<w>o)').replace('foo', '[\\g<w>]')", json!({})), json!("f[o][o]"));
    assert!(error("regex('o').replace('foo', '\\q')", json!({})).contains("bad escape"));
    assert!(error("regex('(a').matches('a')", json!({})).contains("unsupported regular expression"));
}

#[test]
fn unsupported_functions_are_named_before_evaluation() {
    for (expression, part) in [
        ("$.data.orderBy($)", "method .orderBy()"),
        ("now()", "function now()"),
        ("'{0}'.format(1)", "method .format()"),
        ("select($.data, $)", "function select()"),
        ("$.data.coalesce(1)", "method .coalesce()"),
        ("$.data.$x", "only a name or a method call may follow"),
    ] {
        let message = check(expression).map(drop).expect_err(expression).to_string();
        assert!(message.contains(part), "{expression}: {message}");
        assert!(message.contains("not in the supported yaql subset"), "{expression}: {message}");
    }
}

#[test]
fn syntax_errors_give_the_position() {
    assert_eq!(
        check("1 +").map(drop),
        Err(YaqlError::Syntax { position: 3, message: "unexpected end of expression".into() })
    );
    assert_eq!(check("(1 2)").map(drop), Err(YaqlError::Syntax { position: 3, message: "unexpected 2".into() }));
    assert!(matches!(check("'open").map(drop), Err(YaqlError::Syntax { position: 0, .. })));
    assert!(matches!(check("a ; b").map(drop), Err(YaqlError::Syntax { position: 2, .. })));
    assert!(matches!(check("{1}").map(drop), Err(YaqlError::Syntax { .. })));
}

#[test]
fn hostile_expressions_are_bounded() {
    let deep = format!("{}1{}", "(".repeat(MAX_DEPTH + 1), ")".repeat(MAX_DEPTH + 1));
    assert!(matches!(check(&deep).map(drop), Err(YaqlError::TooDeep { .. })));
    let negations = format!("{}1", "-".repeat(5_000));
    assert!(matches!(check(&negations).map(drop), Err(YaqlError::TooDeep { .. })));
    let long = format!("'{}'", "a".repeat(MAX_EXPRESSION_BYTES));
    assert_eq!(check(&long).map(drop), Err(YaqlError::TooLong));
    assert_eq!(run("range(1000000)", json!({})), Err(YaqlError::CollectionTooLarge));
    assert_eq!(run("'ab' * 100000000", json!({})), Err(YaqlError::MemoryQuotaExceeded));
    assert_eq!(run("'a'.repeat()", json!({})), Err(YaqlError::CollectionTooLarge));
    // Doubling a string until it is large: the quota stops it.
    let doubling = (0..30).fold("let(s0 => 'ab') -> ".to_owned(), |text, step| {
        format!("{text}let(s{} => $s{step} + $s{step}) -> ", step + 1)
    }) + "$s30";
    assert_eq!(run(&doubling, json!({})), Err(YaqlError::MemoryQuotaExceeded));
    // Doubling a nested list (each list stays small): the value size stops it.
    let nesting = (0..40).fold("let(l0 => [1, 2]) -> ".to_owned(), |text, step| {
        format!("{text}let(l{} => [$l{step}, $l{step}]) -> ", step + 1)
    }) + "len($l40)";
    assert_eq!(run(&nesting, json!({})), Err(YaqlError::ValueTooLarge));
    // Loops inside loops over large data: the step budget stops them.
    let rows: Vec<Value> = (0..200).map(|index| json!({"i": index, "pad": vec![index; 150]})).collect();
    let result = run("let(root => $.data) -> $root.select($root.select($root.len()).len())", json!(rows));
    assert_eq!(result, Err(YaqlError::TooManySteps));
}

#[test]
fn output_collections_are_limited_as_heat_limits_iterators() {
    let many: Vec<i64> = (0..201).collect();
    assert_eq!(run("$.data", json!(many)), Err(YaqlError::CollectionTooLarge));
    assert_eq!(run("$.data.len()", json!(many)), Ok(json!(201)));
    assert_eq!(run("$.data.where(true)", json!(many)), Err(YaqlError::CollectionTooLarge));
    assert_eq!(run("[$.data.len()]", json!(many)), Ok(json!([201])));
}

fn snippet(version: &str, snippet: Value, parameters: &[(&str, Value)]) -> Result<Value, String> {
    let parameters: BTreeMap<String, Value> =
        parameters.iter().map(|(name, value)| ((*name).to_owned(), value.clone())).collect();
    evaluate_snippet(version, &serde_json::Map::new(), &parameters, &snippet)
}

#[test]
fn computed_expressions_are_checked_when_evaluated() {
    let call = json!({"yaql": {"expression": {"get_param": "e"}, "data": {"get_param": "d"}}});
    let parameters = [("e", json!("$.data.max()")), ("d", json!([1, 5, 2]))];
    assert_eq!(snippet("2016-10-14", call.clone(), &parameters), Ok(json!(5)));
    let parameters = [("e", json!("$.data.orderBy($)")), ("d", json!([1]))];
    let message = snippet("2016-10-14", call, &parameters).expect_err("orderBy is outside the subset");
    assert!(message.contains("method .orderBy()"), "{message}");
}

#[test]
fn the_version_gate_and_argument_checks_are_heats() {
    let call = json!({"yaql": {"expression": "1"}});
    assert_eq!(snippet("2016-10-14", call.clone(), &[]), Ok(json!(1)));
    let message = snippet("2016-04-08", call, &[]).expect_err("yaql is newer than 2016-04-08");
    assert!(message.contains("is not available in heat_template_version 2016-04-08"), "{message}");
    let message = snippet("2021-04-16", json!({"yaql": {"expression": 1}}), &[]).expect_err("not a string");
    assert_eq!(message, "The \"expression\" argument to yaql must contain a string.");
    let message = snippet("2021-04-16", json!({"yaql": "x"}), &[]).expect_err("not a map");
    assert_eq!(message, "Arguments to \"yaql\" must be a map.");
}

#[test]
fn a_template_reports_every_bad_expression_with_its_resource() {
    let text = "heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::Value
    properties:
      value: {yaql: {expression: '$.data.sortBy($)', data: [1]}}
  b:
    type: OS::Heat::Value
    properties:
      value: {yaql: {expression: '$.data +', data: [1]}}
  c:
    type: OS::Heat::Value
    properties:
      value: {yaql: {expression: '$.data.max()', data: [1]}}
";
    let problems = parse_problems(text);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].starts_with("resource a: property \"value\": Bad expression \"$.data.sortBy($)\""),
        "{problems:#?}"
    );
    assert!(problems[0].contains("method .sortBy()"), "{problems:#?}");
    assert!(
        problems[1].starts_with("resource b: property \"value\": Bad expression \"$.data +\": Parse error"),
        "{problems:#?}"
    );
}
