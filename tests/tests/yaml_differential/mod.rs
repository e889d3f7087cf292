//! The shim's YAML reader against Heat's: each text is read by
//! heat.common.template_format.simple_parse (json.loads, then PyYAML 6.0.4 with Heat's
//! `yaml_loader` over libyaml's CSafeLoader; tests/peers/real-heat/yaml_load.py) and by
//! `anneal_shim::template::yaml::parse_with_warnings`: both give the same value with the same key
//! order, or both refuse. Where a key is written twice in one mapping the shim warns, naming the
//! key and the line, exactly where Heat's composer has it. The texts are the two cases of issue 33
//! (duplicate keys, merge keys among them; libyaml's leniency on quoted scalars), what libyaml
//! still refuses, and the differences that remain, each pinned.

use anneal_shim::template::yaml::{self, Body, Node};
use anneal_tests::peers;
use serde_json::{Value, json};

/// What the shim must do with a text, given Heat's answer.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    Same,
    /// Heat reads it and the shim refuses it, for the reason given (docs/templates.md, "The
    /// document", lists these).
    ShimRefuses(&'static str),
    /// Both read it, to different values, for the reason given (listed there too).
    Differs(&'static str),
}

const HOT: &str = "heat_template_version: 2018-08-31\n";

/// Duplicate keys, and the merge keys that build mappings too.
fn duplicate_cases() -> Vec<String> {
    let large: String = (0..40).map(|index| format!("  k{index}: {index}\n")).collect();
    let texts = [
        // The case: a TripleO environment's parameter written twice.
        "parameter_defaults:\n  NeutronL3HA: true\n  ControllerCount: 3\n  NeutronL3HA: false\n".to_owned(),
        format!("{HOT}resources: {{}}\nresources:\n  a: {{type: OS::Heat::None}}\n"),
        format!(
            "{HOT}resources:\n  c:\n    type: OS::Heat::SoftwareConfig\n    properties:\n      group: script\n      \
             group: puppet\n"
        ),
        format!(
            "{HOT}resources:\n  config:\n    type: OS::Heat::SoftwareConfig\n  other: {{type: OS::Heat::None}}\n  \
             config:\n    type: OS::Heat::StructuredConfig\n"
        ),
        "x: 1\ny: 2\nx: {z: 1}\nx: last\n".to_owned(),
        format!("big:\n{large}  k3: again\n  k40: new\n  k0: [again]\n"),
        "{a: 1, b: {c: 1, c: [2]}, a: 3}\n".to_owned(),
        "{\"a\": 1, \"b\": {\"c\": 1.5e2, \"c\": 2}, \"a\": 3}".to_owned(),
        "a: &a {x: 1, x: 2}\nb: *a\nc: [*a, *a]\n".to_owned(),
        "\"a\": 1\na: 2\n'a': 3\n".to_owned(),
        "a: 1\n? a\n: 3\n".to_owned(),
        // Merge keys: merged first, the mapping's own keys win, lists in order, a later mapping's
        // value winning except for keys CPython shares one string object for.
        "base: &b {x: 1, yy: 2}\nm:\n  zz: 0\n  <<: *b\n  x: 3\n".to_owned(),
        "m: {zz: 0, <<: {aa: 1, zz: 9}, bb: 2}\n".to_owned(),
        "a: &a {xx: 1}\nc: &c {xx: 2, y: 3}\nm: {<<: [*a, *c]}\nn: {<<: [*c, *a]}\n".to_owned(),
        "m: {<<: {xx: 1}, <<: {y: 2, xx: 3}}\n".to_owned(),
        "m: {<<: [{x: 1}, {x: 2}], <<: {é: 1}, <<: {é: 2, ē: 1}, <<: {ē: 2}, \
         <<: {'': 1}, <<: {'': 2}}\n"
            .to_owned(),
        "a: &a {p: 1, <<: {q: 2}}\nb: {<<: *a, r: 3}\n".to_owned(),
        "m: {<<: {xx: 1}, xx: 2, xx: 3}\n".to_owned(),
        "m: {\"<<\": {x: 1}, y: 2}\n".to_owned(),
        "m: {<<: {}}\n".to_owned(),
        "m:\n  <<:\n    - {a: 1}\n    - {b: 2}\n  c: 3\n".to_owned(),
        "m: {<<: 1}\n".to_owned(),
        "m: {<<: [{x: 1}, 2]}\n".to_owned(),
        "m:\n  <<: null\n".to_owned(),
    ];
    texts.into_iter().collect()
}

/// Quoted scalars whose lines are less indented than yaml-rust2 wants, and their limits.
fn quoted_cases() -> Vec<&'static str> {
    vec![
        "a:\n  value: \"{\n    x\n  }\"\n",
        "a:\n  value: \"{\n x\n  }\"\n",
        "a:\n  value: \"{\n    x\n}\"\n",
        "a:\n  b:\n    value: \"one\ntwo\n   three\"\n    next: 1\n",
        "value: \"{\nx\n}\"\n",
        "a:\n  v: 'it''s\nfine'\n",
        "a:\n  v: 'x\n y'\n",
        "a:\n  - \"x\n y\"\n",
        "a:\n- \"x\ny\"\n",
        "a:\n  - k: \"x\n y\"\n",
        "a:\n  v: \"x\n\ty\"\n",
        "a:\n  v: \"x\n  \ty\"\n",
        "a:\n  v: \"x\n\t\ty\n\t\"\n",
        "a:\n  v: \"x\n\t\n y\"\n",
        "a:\n  v: \"x\n\n\n y\"\n",
        "a:\n  v: \"x\\\n\ty\"\n",
        "a:\n  v: \"x \\\" \\\\\n y\"\n",
        "a:\n  v: \"x\n y\" # c\n  w: 1\n",
        "a:\n  v: \"x\n---y\n...z\n\t--- w\n#c\n%YAML\n- v\n\"\n",
        "a:\n  v: [\"x\ny\", z]\n",
        "a:\n  v: {k: \"x\ny\", j: 'p\nq'}\n",
        "a:\r\n  v: \"x\r\ny\r\n  z\"\r\n",
        "a:\n  v: \"x\ry\"\n",
        "a:\n  v: \"first\n  second\"\n  w: \"third\nfourth\"\nb: 'fifth\nsixth'\n",
        // What libyaml refuses too.
        "a:\n  v: \"x\n---\n  y\"\n",
        "a:\n  v: 'x\n...\n  y'\n",
        "a:\n  v: \"x\n y\n--- \n  z\"\n",
        "a:\n  v: \"x\n y\n",
        "a:\n  \"k\n y\": 1\n",
        "a:\n  v: \"x\n y\"\n b: 1\n",
        "a:\n  v: \"x\n y\" z\n",
    ]
}

/// Where the shim and Heat still differ, pinned so a change to either is noticed.
fn known_differences() -> Vec<(&'static str, Expect)> {
    let flow = Expect::ShimRefuses("a flow collection's line less indented than its block (yaml-rust2 checks it)");
    // PyYAML drops a merged pair whose key is the same string object as one merged before.
    let identity = Expect::Differs("PyYAML's merge tells keys apart by object identity");
    vec![
        ("a:\n  v: [\"x\ny\",\n z]\n", flow),
        ("a:\n  v: [x,\ny]\n", flow),
        // The same mapping merged again after another: PyYAML ignores the second time.
        ("b: &b {xx: 1}\nc: &c {xx: 2}\nm: {<<: [*b, *c, *b]}\n", identity),
        // A shared-string key written twice in a merged mapping: PyYAML merges the first value.
        ("m: {<<: {x: 1, x: 2}}\n", identity),
    ]
}

/// A node as yaml_load.py writes a value: mappings as their pairs in order.
fn ordered(node: &Node) -> Value {
    match &node.body {
        Body::Scalar(value) => value.clone(),
        Body::Sequence(items) => json!({"seq": items.iter().map(ordered).collect::<Vec<_>>()}),
        Body::Mapping(entries) => {
            json!({"map": entries.iter().map(|entry| json!([entry.key, ordered(&entry.value)])).collect::<Vec<_>>()})
        }
    }
}

/// The shim's answer as Heat's is written: its value and its duplicates (key, line), sorted by
/// line; or its error.
fn shim_answer(text: &str) -> Result<(Value, Vec<Value>), String> {
    let document = yaml::parse_with_warnings(text).map_err(|error| error.to_string())?;
    let mut duplicates: Vec<(usize, String)> =
        document.duplicates.iter().map(|duplicate| (duplicate.line, duplicate.key.clone())).collect();
    duplicates.sort();
    let duplicates = duplicates.into_iter().map(|(line, key)| json!([key, line])).collect();
    Ok((ordered(&document.root), duplicates))
}

fn mismatch(text: &str, expect: Expect, heat: &Value) -> Option<String> {
    let shim = shim_answer(text);
    let heat_value = heat.get("value");
    match (expect, &shim, heat_value) {
        (Expect::Same, Err(_), None) => None,
        (Expect::Same, Ok((value, duplicates)), Some(expected)) => {
            let same = value == expected && Some(&Value::Array(duplicates.clone())) == heat.get("duplicates");
            (!same).then(|| format!("shim {value} with duplicates {duplicates:?}"))
        }
        (Expect::ShimRefuses(_), Err(_), Some(_)) => None,
        (Expect::Differs(_), Ok((value, _)), Some(expected)) if value != expected => None,
        _ => Some(format!("shim {shim:?}")),
    }
    .map(|shim| format!("{text:?}: {shim}, Heat {heat}"))
}

#[test]
fn documents_read_as_heats_template_loader_reads_them() {
    let mut cases: Vec<(String, Expect)> = duplicate_cases().into_iter().map(|text| (text, Expect::Same)).collect();
    cases.extend(quoted_cases().into_iter().map(|text| (text.to_owned(), Expect::Same)));
    cases.extend(known_differences().into_iter().map(|(text, expect)| (text.to_owned(), expect)));
    let texts = cases.iter().map(|(text, _)| Value::String(text.clone())).collect();
    let answers = peers::heat_answers("yaml_load.py", texts);
    let mismatches: Vec<String> =
        cases.iter().zip(&answers).filter_map(|((text, expect), heat)| mismatch(text, *expect, heat)).collect();
    assert!(mismatches.is_empty(), "{} of {} texts differ:\n{}", mismatches.len(), cases.len(), mismatches.join("\n"));
    // Every case Heat reads, it reads with libyaml (or json.loads): none depends on the
    // pure-Python loader Heat falls back to.
    let fallback: Vec<&String> = cases
        .iter()
        .zip(&answers)
        .filter(|(_, heat)| heat.get("loader").is_some_and(|loader| loader == "python"))
        .map(|((text, _), _)| text)
        .collect();
    assert!(fallback.is_empty(), "read by PyYAML's fallback loader only: {fallback:?}");
}
