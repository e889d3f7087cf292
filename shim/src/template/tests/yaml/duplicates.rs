//! Duplicate keys and `<<` merge keys, as PyYAML 6.0.4 builds a dict (the values below are what
//! Heat's loader, heat.common.template_format.yaml_loader, gives for each text).

use serde_json::json;

use crate::template::parse_template;
use crate::template::yaml::{self, Body, Document, DuplicateKey, Node, YamlError};

fn document(text: &str) -> Document {
    match yaml::parse_with_warnings(text) {
        Ok(document) => document,
        Err(error) => panic!("{text:?} should parse: {error}"),
    }
}

/// The keys of a mapping node in their order.
fn keys(node: &Node) -> Vec<&str> {
    match &node.body {
        Body::Mapping(entries) => entries.iter().map(|entry| entry.key.as_str()).collect(),
        other => panic!("not a mapping: {other:?}"),
    }
}

fn member<'a>(node: &'a Node, key: &str) -> &'a Node {
    let Body::Mapping(entries) = &node.body else { panic!("not a mapping: {node:?}") };
    match entries.iter().find(|entry| entry.key == key) {
        Some(entry) => &entry.value,
        None => panic!("no {key} in {node:?}"),
    }
}

#[test]
fn a_duplicate_key_keeps_its_first_place_and_its_last_value_with_a_warning() {
    let document = document("a: 1\nb:\n  c: 1\n  d: 2\n  c: 3\na: 4\n");
    assert_eq!(document.root.to_value(), json!({"a": 4, "b": {"c": 3, "d": 2}}));
    assert_eq!(keys(&document.root), ["a", "b"]);
    assert_eq!(keys(member(&document.root, "b")), ["c", "d"]);
    // The entry is the key whose value it holds: what messages about it point at.
    let Body::Mapping(entries) = &document.root.body else { panic!() };
    assert_eq!((entries[0].line, entries[0].column, entries[0].value.line), (6, 1, 6));
    let expected = [
        DuplicateKey { key: "c".into(), line: 5, column: 3, earlier_line: 3 },
        DuplicateKey { key: "a".into(), line: 6, column: 1, earlier_line: 1 },
    ];
    assert_eq!(document.duplicates, expected);
    assert_eq!(
        document.warnings()[0],
        "line 5 column 3: duplicate key \"c\" (also at line 3): its last value is used, as in Heat"
    );
}

#[test]
fn a_key_written_three_times_is_two_warnings_and_the_third_value() {
    let document = document("x: 1\ny: 2\nx: {z: 1}\nx: last\n");
    assert_eq!(document.root.to_value(), json!({"x": "last", "y": 2}));
    assert_eq!(keys(&document.root), ["x", "y"]);
    let lines: Vec<(usize, usize)> =
        document.duplicates.iter().map(|duplicate| (duplicate.line, duplicate.earlier_line)).collect();
    assert_eq!(lines, [(3, 1), (4, 3)]);
}

#[test]
fn duplicates_are_found_in_large_mappings_and_flow_mappings_and_json() {
    let mut text: String = (0..40).map(|index| format!("k{index}: {index}\n")).collect();
    text.push_str("k3: again\nk40: new\n");
    let large = document(&text);
    assert_eq!(large.root.to_value()["k3"], "again");
    assert_eq!(keys(&large.root)[3], "k3");
    assert_eq!(keys(&large.root).len(), 41);
    assert_eq!(large.duplicates, [DuplicateKey { key: "k3".into(), line: 41, column: 1, earlier_line: 4 }]);

    let flow = document("{a: 1, b: 2, a: 3}");
    assert_eq!((flow.root.to_value(), keys(&flow.root)), (json!({"a": 3, "b": 2}), vec!["a", "b"]));
    assert_eq!(flow.duplicates, [DuplicateKey { key: "a".into(), line: 1, column: 14, earlier_line: 1 }]);
    // A JSON text: `json.loads` keeps the last value in the first place too.
    let json = document("{\"a\": 1, \"b\": 2, \"a\": {\"c\": 1.5e2}}");
    assert_eq!((json.root.to_value(), keys(&json.root)), (json!({"a": {"c": 150.0}, "b": 2}), vec!["a", "b"]));
    assert_eq!(json.duplicates.len(), 1);
}

#[test]
fn warnings_list_100_duplicates_count_the_rest_and_shorten_long_keys() {
    let long = "k".repeat(100);
    let text: String = (0..151).map(|index| format!("{long}: {index}\n")).collect();
    let document = document(&text);
    assert_eq!(document.root.to_value(), json!({long.clone(): 150}));
    assert_eq!((document.duplicates.len(), document.unlisted_duplicates), (100, 50));
    let warnings = document.warnings();
    assert_eq!(warnings.len(), 101);
    assert_eq!(warnings[100], "... and 50 more duplicate keys");
    assert!(
        warnings[0].contains(&format!("duplicate key \"{}...\" (also at line 1)", "k".repeat(64))),
        "{}",
        warnings[0]
    );
}

#[test]
fn duplicate_resources_and_properties_reach_the_template_with_the_last_definition() {
    let text = "heat_template_version: 2018-08-31\nresources:\n  config:\n    type: OS::Heat::SoftwareConfig\n    \
                properties: {group: script, group: puppet}\n  config:\n    type: OS::Heat::StructuredConfig\n";
    let template = match parse_template(text) {
        Ok(template) => template,
        Err(error) => panic!("duplicates are accepted: {error}"),
    };
    assert_eq!(template.resources.len(), 1);
    let (name, resource) = &template.resources[0];
    assert_eq!((name.as_str(), resource.kind.name(), resource.line), ("config", "OS::Heat::StructuredConfig", 6));
}

#[test]
fn merge_keys_come_first_and_the_mappings_own_keys_win() {
    let merging = document("base: &b {x: 1, yy: 2}\nm:\n  zz: 0\n  <<: *b\n  x: 3\n");
    let merged = member(&merging.root, "m");
    assert_eq!(merged.to_value(), json!({"x": 3, "yy": 2, "zz": 0}));
    assert_eq!(keys(merged), ["x", "yy", "zz"]);
    assert!(merging.duplicates.is_empty(), "a key over a merged one is no duplicate: {:?}", merging.duplicates);
    // Several merge keys and lists: in the order written, a later mapping's value winning...
    let text = "a: &a {xx: 1}\nc: &c {xx: 2, y: 3}\nm: {<<: [*a, *c]}\nn: {<<: {xx: 1}, <<: {y: 2, xx: 3}}\n";
    let lists = document(text).root.to_value();
    assert_eq!((&lists["m"], &lists["n"]), (&json!({"xx": 2, "y": 3}), &json!({"xx": 3, "y": 2})));
    // ...except for the keys CPython shares one string object for (PyYAML drops a merged key it
    // has seen as the same object): the empty string and one character up to U+00FF.
    let shared = document("m: {<<: [{x: 1}, {x: 2}], <<: {é: 1}, <<: {é: 2, ē: 1}, <<: {ē: 2}}\n").root.to_value();
    assert_eq!(shared["m"], json!({"x": 1, "é": 1, "ē": 2}));
    // Only a plain `<<` merges.
    assert_eq!(document("m: {\"<<\": {x: 1}}\n").root.to_value(), json!({"m": {"<<": {"x": 1}}}));
}

#[test]
fn a_merge_key_needs_a_mapping_or_a_list_of_mappings() {
    for (text, column) in [("m: {<<: 1}\n", 9), ("m: {<<: [{x: 1}, 2]}\n", 18), ("m:\n  <<: null\n", 7)] {
        match yaml::parse(text) {
            Err(YamlError::Merge { column: found, message, .. }) => {
                assert_eq!(found, column, "{text:?}: {message}");
                assert!(message.contains("the merge key at line"), "{message}");
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}
