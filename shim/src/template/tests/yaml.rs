//! YAML layer tests: syntax positions, bombs, depth, non-string keys, tags, scalar typing, JSON;
//! and what Heat's loader (libyaml and PyYAML 6.0.4) accepts that YAML's letter does not: duplicate
//! keys (`yaml/duplicates.rs`) and quoted scalars' lines at any indentation (`yaml/quoted.rs`).
//! tests/tests/hostile_parsers.rs holds the differential of all of it against Heat's loader.

mod duplicates;
mod quoted;

use std::time::{Duration, Instant};

use anneal_protocol::alias_budget::{self, AliasBudget};
use serde_json::json;

use crate::template::yaml::{self, MAX_DEPTH, YamlError, resolve_plain};
use crate::template::{MAX_TEMPLATE_BYTES, TemplateError, parse_template};

fn value(text: &str) -> serde_json::Value {
    match yaml::parse(text) {
        Ok(node) => node.to_value(),
        Err(error) => panic!("{text:?} should parse: {error}"),
    }
}

fn rejection(text: &str) -> YamlError {
    match yaml::parse(text) {
        Ok(node) => panic!("{text:?} should be rejected, got {:?}", node.to_value()),
        Err(error) => error,
    }
}

#[test]
fn syntax_errors_report_line_and_column() {
    let error = rejection("a: 1\nb: [1, 2\nc: 3\n");
    let YamlError::Syntax { line, column, message } = &error else { panic!("expected a syntax error: {error:?}") };
    assert!(*line >= 2, "{error}");
    assert!(*column >= 1);
    assert!(!message.is_empty());
    assert!(error.to_string().contains(&format!("line {line} column {column}")), "{error}");

    let YamlError::Syntax { line, column, .. } = rejection("key: value\n  bad: indentation\n") else { panic!() };
    assert_eq!((line, column), (2, 6));
}

#[test]
fn yaml_bomb_is_rejected_quickly() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..10 {
        let previous = format!("*a{}", level - 1);
        let items = [previous.as_str(); 10].join(", ");
        text.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    let started = Instant::now();
    let error = rejection(&text);
    assert!(matches!(error, YamlError::AliasesTooLarge { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
}

/// The review's bomb (issue 31): one 500 KB string aliased 100,000 times, 0.8 MB of text that
/// asked for 50 GB when an alias cost 1 whatever it copied.
#[test]
fn a_long_string_aliased_100000_times_is_refused_naming_the_limit() {
    let text = format!("a: &a \"{}\"\nb: [{}]\n", "x".repeat(500_000), ["*a"; 100_000].join(","));
    assert!(text.len() < 850_000, "{}", text.len());
    let started = Instant::now();
    let error = rejection(&text);
    let elapsed = started.elapsed();
    let limit = AliasBudget::for_text(text.len()).limit();
    let YamlError::AliasesTooLarge { line: 2, column, limit: named } = error else { panic!("{error:?}") };
    assert_eq!(named, limit);
    // The copies that fit: the anchor's and as many aliases as the rest of the budget holds.
    let copies = limit / alias_budget::scalar_bytes(500_002);
    assert_eq!(column, "b: [".len() + 1 + "*a,".len() * (copies - 1), "the first alias over the budget");
    assert!(error.to_string().contains(&format!("aliases expand to more than {limit} bytes")), "{error}");
    // Before the budget counted bytes it asked for 50 GB; a debug build on a busy machine reads the
    // 0.8 MB in well under this.
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
}

#[test]
fn a_long_string_aliased_a_few_times_is_accepted() {
    let long = "y".repeat(100_000);
    let parsed = value(&format!("a: &a \"{long}\"\nb: *a\nc: [*a, *a]\n"));
    assert_eq!(parsed, json!({"a": long, "b": long, "c": [long, long]}));
}

#[test]
fn an_alias_is_charged_what_it_copies_aliases_included() {
    // `*b` copies two copies of `a`: 2,096 bytes each, not the few bytes `b` is written with.
    let text = format!("a: &a {}\nb: &b [*a, *a]\nc: [*b, *b, *b]\n", "z".repeat(1000));
    let error = rejection(&text);
    let limit = AliasBudget::for_text(text.len()).limit();
    assert_eq!(error, YamlError::AliasesTooLarge { line: 3, column: 9, limit }, "the second *b");
    let fits = format!("a: &a {}\nb: &b [*a, *a]\nc: [*b]\n", "z".repeat(1000));
    assert_eq!(value(&fits)["c"][0][1].as_str().map(str::len), Some(1000));
}

#[test]
fn anchors_nested_in_anchors_are_charged_for_the_copies_they_keep() {
    // Each anchor keeps a copy of its node for later aliases: 60 levels would copy the string 60
    // times without a single alias.
    let levels = 60;
    let opening: String = (0..levels).map(|level| format!("&l{level} [")).collect();
    let text = format!("{opening}\"{}\"{}", "w".repeat(100_000), "]".repeat(levels));
    assert!(matches!(rejection(&text), YamlError::AliasesTooLarge { line: 1, .. }));
    let few: String = (0..3).map(|level| format!("&l{level} [")).collect();
    assert!(yaml::parse(&format!("{few}\"{}\"]]]", "w".repeat(100_000))).is_ok());
}

#[test]
fn large_documents_without_aliases_are_not_limited_by_the_alias_budget() {
    let text = format!("[{}]", vec!["1"; 150_000].join(","));
    let Ok(node) = yaml::parse(&text) else { panic!("a plain large document must parse") };
    assert_eq!(node.to_value().as_array().map(Vec::len), Some(150_000));
}

#[test]
fn aliases_within_budget_expand() {
    assert_eq!(value("base: &b {x: 1}\ncopy: *b\n"), json!({"base": {"x": 1}, "copy": {"x": 1}}));
}

#[test]
fn deep_nesting_is_rejected() {
    let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
    assert!(matches!(rejection(&deep), YamlError::TooDeep { limit: 64, .. }));
    let fine = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert!(yaml::parse(&fine).is_ok());
    // Depth through an alias counts too.
    let nested = format!("{}{}", "[".repeat(40), "]".repeat(40));
    let text = format!("a: &a {nested}\nb: {}*a{}\n", "[".repeat(30), "]".repeat(30));
    assert!(matches!(rejection(&text), YamlError::TooDeep { .. }));
}

#[test]
fn keys_must_be_strings() {
    assert!(matches!(rejection("1: a\n"), YamlError::NonStringKey { line: 1, column: 1 }));
    assert!(matches!(rejection("on: a\n"), YamlError::NonStringKey { .. }));
    assert!(matches!(rejection("? [a]\n: b\n"), YamlError::NonStringKey { .. }));
    assert_eq!(value("\"1\": a\n"), json!({"1": "a"}));
}

#[test]
fn one_document_only() {
    assert!(matches!(rejection("a: 1\n---\nb: 2\n"), YamlError::MultipleDocuments { line: 2, .. }));
    assert_eq!(rejection(""), YamlError::Empty);
    assert_eq!(rejection("# only a comment\n"), YamlError::Empty);
}

#[test]
fn tags() {
    assert_eq!(value("a: !!str 123\nb: !!int '7'\nc: !!float 1\n"), json!({"a": "123", "b": 7, "c": 1}));
    assert!(matches!(rejection("a: !Ref x\n"), YamlError::UnsupportedTag { .. }));
    assert!(matches!(rejection("a: !!int abc\n"), YamlError::UnsupportedTag { .. }));
    assert!(matches!(rejection("a: !!set {x}\n"), YamlError::UnsupportedTag { .. }));
    assert_eq!(value("a: ! 12\n"), json!({"a": "12"}));
}

#[test]
fn recursive_alias_is_rejected() {
    let error = rejection("a: &x [1, *x]\n");
    assert!(matches!(error, YamlError::RecursiveAlias { .. } | YamlError::Syntax { .. }), "{error:?}");
}

#[test]
fn plain_scalars_follow_pyyaml() {
    let cases = [
        ("yes", json!(true)),
        ("No", json!(false)),
        ("on", json!(true)),
        ("OFF", json!(false)),
        ("true", json!(true)),
        ("~", json!(null)),
        ("null", json!(null)),
        ("", json!(null)),
        ("12", json!(12)),
        ("-12", json!(-12)),
        ("+12", json!(12)),
        ("1_000", json!(1000)),
        ("0755", json!(493)),
        ("0x1F", json!(31)),
        ("0b101", json!(5)),
        ("08", json!("08")),
        ("0o17", json!("0o17")),
        ("1.5", json!(1.5)),
        // PyYAML's float pattern: no sign before a leading point, an exponent needs a point
        // and a sign (checked against heat.common.template_format.yaml_loader below).
        ("-.5", json!("-.5")),
        ("1e3", json!("1e3")),
        ("1.0e+3", json!(1000.0)),
        ("18446744073709551615", json!(18_446_744_073_709_551_615_u64)),
        ("-9223372036854775808", json!(i64::MIN)),
        (".inf", json!(".inf")),
        ("2013-05-23", json!("2013-05-23")),
        ("1.2.3", json!("1.2.3")),
        ("y", json!("y")),
        ("abc", json!("abc")),
    ];
    for (text, expected) in cases {
        assert_eq!(resolve_plain(text), expected, "{text:?}");
    }
    assert_eq!(value("a: 'yes'\nb: \"12\"\nc: |\n  12\n"), json!({"a": "yes", "b": "12", "c": "12\n"}));
}

#[test]
fn json_is_accepted() {
    let text = "{\"a\":1,\"b\":[true,null,\"x\"],\n\t\"c\": {\"d\": 1.5e2, \"e\": \"\\u00e9\\/\"}}";
    assert_eq!(value(text), json!({"a": 1, "b": [true, null, "x"], "c": {"d": 150.0, "e": "é/"}}));
    // `json.loads` keeps a duplicate key's last value too.
    assert_eq!(value("{\"a\": 1, \"a\": 2}"), json!({"a": 2}));
}

#[test]
fn oversized_text_is_rejected_before_parsing() {
    let text = format!("heat_template_version: 2018-08-31\ndescription: \"{}\"\n", "x".repeat(MAX_TEMPLATE_BYTES));
    let error = parse_template(&text).err();
    assert!(matches!(error, Some(TemplateError::TooLarge { limit: MAX_TEMPLATE_BYTES, .. })), "{error:?}");
}

#[test]
fn yaml_errors_surface_through_parse_template() {
    let Err(error) =
        parse_template("heat_template_version: 2018-08-31\nresources:\n  a: {type: x}\n  [a]: {type: y}\n")
    else {
        panic!("a resource named by a list must be rejected");
    };
    assert!(matches!(error, TemplateError::Yaml(YamlError::NonStringKey { line: 4, .. })), "{error:?}");
    assert_eq!(error.problems().len(), 1);
    assert!(error.problems()[0].contains("line 4 column 3: mapping keys must be strings"), "{error}");
}

/// Expected values from PyYAML 6 (`yaml.safe_load`, which Heat's loader extends) on each text.
#[test]
fn sexagesimal_numbers_read_as_pyyaml_reads_them() {
    use serde_json::json;
    let cases = [
        ("1:30", json!(90)),
        ("-1:30", json!(-90)),
        ("+1:30", json!(90)),
        ("190:20:30", json!(685230)),
        ("1:5", json!(65)),
        ("1_0:30", json!(630)),
        ("1:30.5", json!(90.5)),
        ("1:30.", json!(90.0)),
        ("20:30.15", json!(1230.15)),
        ("0:30.5", json!(30.5)),
        ("1:60", json!("1:60")),
        ("0:30", json!("0:30")),
        ("01:30", json!("01:30")),
        ("a:1", json!("a:1")),
        ("1::30", json!("1::30")),
    ];
    for (text, expected) in cases {
        assert_eq!(super::super::yaml::resolve_plain(text), expected, "{text}");
    }
}

/// Expected values from Heat's own loader (heat.common.template_format.yaml_loader, PyYAML 6)
/// on each plain scalar: YAML 1.1 numbers, booleans and nulls.
#[test]
fn plain_scalars_resolve_as_heats_yaml_loader_resolves_them() {
    use serde_json::{Value, json};
    let cases = [
        ("1e3", json!("1e3")),
        ("1.0e3", json!("1.0e3")),
        ("1.0e+3", json!(1000.0)),
        ("1.5", json!(1.5)),
        ("-.5", json!("-.5")),
        (".5", json!(0.5)),
        ("+1", json!(1)),
        ("0o17", json!("0o17")),
        ("017", json!(15)),
        ("0x1f", json!(31)),
        ("0b101", json!(5)),
        ("1_000", json!(1000)),
        ("y", json!("y")),
        ("n", json!("n")),
        ("Y", json!("Y")),
        ("yes", json!(true)),
        ("on", json!(true)),
        ("OFF", json!(false)),
        ("~", Value::Null),
        ("null", Value::Null),
        ("NULL", Value::Null),
        ("Null", Value::Null),
        ("nULL", json!("nULL")),
        ("True", json!(true)),
        ("tRUE", json!("tRUE")),
        ("2021-04-16", json!("2021-04-16")),
        ("12:30:45", json!(45045)),
        ("1__0", json!(10)),
        ("0", json!(0)),
        ("-0", json!(0)),
        ("00", json!(0)),
        ("09", json!("09")),
        ("0.", json!(0.0)),
        ("1.2.3", json!("1.2.3")),
        ("+.5e-3", json!("+.5e-3")),
        ("1.0E-3", json!(0.001)),
    ];
    let mismatches: Vec<String> = cases
        .iter()
        .filter_map(|(text, expected)| {
            let got = super::super::yaml::resolve_plain(text);
            (got != *expected).then(|| format!("{text}: got {got}, Heat {expected}"))
        })
        .collect();
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}
