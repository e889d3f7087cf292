//! libyaml's leniency on quoted scalars: their lines at any indentation, tabs included; only a
//! line starting with a document marker refused. The values are what Heat's loader gives.

use std::time::{Duration, Instant};

use anneal_protocol::alias_budget::AliasBudget;
use serde_json::json;

use crate::template::yaml::{self, Body, YamlError};

fn value(text: &str) -> serde_json::Value {
    match yaml::parse(text) {
        Ok(node) => node.to_value(),
        Err(error) => panic!("{text:?} should parse: {error}"),
    }
}

#[test]
fn a_quoted_scalar_closing_at_its_keys_column_is_read_as_libyaml_reads_it() {
    // The issue's case: the `}"` line at the `value:` column.
    assert_eq!(value("a:\n  value: \"{\n    x\n  }\"\n"), json!({"a": {"value": "{ x }"}}));
    let cases = [
        // Less indented than the key, down to column 1, and the mapping goes on after it.
        (
            "a:\n  b:\n    value: \"one\ntwo\n   three\"\n    next: 1\n",
            json!({"a": {"b": {"value": "one two three", "next": 1}}}),
        ),
        ("a:\n  v: 'it''s\nfine'\n", json!({"a": {"v": "it's fine"}})),
        ("a:\n  - \"x\n y\"\n", json!({"a": ["x y"]})),
        ("a:\n  - k: \"x\n y\"\n", json!({"a": [{"k": "x y"}]})),
        ("a: \"x\ny\"\n", json!({"a": "x y"})),
        // Tabs, empty lines, an escaped line break, a comment after the quote.
        ("a:\n  v: \"x\n\ty\"\n", json!({"a": {"v": "x y"}})),
        ("a:\n  v: \"x\n  \ty\"\n", json!({"a": {"v": "x y"}})),
        ("a:\n  v: \"x\n\t\n y\"\n", json!({"a": {"v": "x\ny"}})),
        ("a:\n  v: \"x\\\n\ty\"\n", json!({"a": {"v": "xy"}})),
        ("a:\n  v: \"x\n y\" # c\n  w: 1\n", json!({"a": {"v": "x y", "w": 1}})),
        // What only looks like a document marker or a comment.
        ("a:\n  v: \"x\n---y\n...z\n\t--- w\n#c\n\"\n", json!({"a": {"v": "x ---y ...z --- w #c "}})),
        // In a flow collection, and with CRLF and CR line breaks.
        ("a:\n  v: [\"x\ny\", z]\n", json!({"a": {"v": ["x y", "z"]}})),
        ("a:\r\n  v: \"x\r\ny\r\n  z\"\r\n", json!({"a": {"v": "x y z"}})),
        ("a:\n  v: \"x\ry\"\n", json!({"a": {"v": "x y"}})),
    ];
    for (text, expected) in cases {
        assert_eq!(value(text), expected, "{text:?}");
    }
}

#[test]
fn a_document_marker_line_still_ends_the_scalar_with_an_error() {
    for text in ["a:\n  v: \"x\n---\n  y\"\n", "a:\n  v: 'x\n...\n  y'\n", "a:\n  v: \"x\n y\n--- \n  z\"\n"] {
        match yaml::parse(text) {
            Err(YamlError::Syntax { line: 2, column: 6, message }) => {
                assert!(message.contains("document indicator"), "{text:?}: {message}")
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

#[test]
fn positions_after_a_rewritten_line_are_the_texts_own() {
    // `z` and `*nope` sit on the scalar's last line, which is read indented.
    let Ok(root) = yaml::parse("a:\n  v: [\"x\ny\", z]\n") else { panic!() };
    let Body::Mapping(top) = &root.body else { panic!() };
    let Body::Mapping(inner) = &top[0].value.body else { panic!() };
    let Body::Sequence(items) = &inner[0].value.body else { panic!() };
    assert_eq!((items[1].line, items[1].column), (3, 5));
    match yaml::parse("a:\n  v: [\"x\ny\", *nope]\n") {
        Err(YamlError::Syntax { line, column, .. }) => assert_eq!((line, column), (3, 5)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_reading_again_charges_the_alias_budget_once() {
    // The aliases take most of the budget before the scalar that needs a second reading: charged
    // again, they would go over it.
    let long = "w".repeat(3000);
    let text = format!("a: &a \"{long}\"\nb: [*a, *a]\nc:\n  v: \"x\ny\"\n");
    let mut budget = AliasBudget::for_text(text.len());
    let parsed = yaml::parse_yaml_only_within(&text, &mut budget).map(|node| node.to_value());
    assert_eq!(parsed.map(|value| value["c"].clone()), Ok(json!({"v": "x y"})));
    let left = budget.limit() - 3 * (3000 + 32);
    assert!(budget.charge(left).is_ok(), "only the three copies were charged");
}

#[test]
fn many_such_scalars_are_read_and_too_many_are_refused_quickly() {
    let few: String = (0..50).map(|index| format!("k{index}:\n  v: \"x\ny\"\n")).collect();
    assert_eq!(value(&few)["k49"], json!({"v": "x y"}));
    // Each needs one more reading: past 100 of them the text is refused with yaml-rust2's error,
    // where the 101st is.
    let many: String = (0..20_000).map(|index| format!("k{index}:\n  v: \"x\ny\"\n")).collect();
    let started = Instant::now();
    let error = yaml::parse(&many).err();
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    match error {
        Some(YamlError::Syntax { line, column: 6, message }) => {
            assert_eq!(message, "invalid indentation in quoted scalar");
            assert_eq!(line, 3 * 100 + 2);
        }
        other => panic!("{other:?}"),
    }
}
