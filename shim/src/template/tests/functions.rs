//! Function tests: each function's edge cases, the version gates, the stored form, and the
//! bounds hostile templates meet (repeat and list sizes).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::template::{Expr, evaluate_snippet};

fn parameters() -> BTreeMap<String, Value> {
    [("env", json!("prod")), ("zones", json!(["a", "b"])), ("flag", json!(false)), ("port", json!(80))]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
}

fn conditions() -> Map<String, Value> {
    match json!({
        "prod": {"equals": [{"get_param": "env"}, "prod"]},
        "dev": {"not": "prod"},
        "flagged": {"and": ["prod", {"get_param": "flag"}]},
        "loop_a": {"not": "loop_b"},
        "loop_b": {"or": ["loop_a", true]},
        "broken": "prod",
        "bad_function": {"str_replace": {"template": "x", "params": {}}},
    }) {
        Value::Object(map) => map,
        _ => unreachable!("a map"),
    }
}

fn run(version: &str, snippet: Value) -> Result<Value, String> {
    evaluate_snippet(version, &conditions(), &parameters(), &snippet)
}

fn ok(snippet: Value) -> Value {
    match run("2021-04-16", snippet.clone()) {
        Ok(value) => value,
        Err(error) => panic!("{snippet} should evaluate: {error}"),
    }
}

fn error(version: &str, snippet: Value) -> String {
    match run(version, snippet.clone()) {
        Ok(value) => panic!("{snippet} should fail in {version}, gave {value}"),
        Err(error) => error,
    }
}

#[test]
fn repeat_products_zips_and_maps() {
    let snippet = json!({"repeat": {"for_each": {"%a%": ["1", "2"], "%b%": ["x"]}, "template": {"%a%": "%a%-%b%"}}});
    assert_eq!(ok(snippet), json!([{"1": "1-x"}, {"2": "2-x"}]));
    let zipped = json!({"repeat": {"for_each": {"<a>": ["1", "2"], "<b>": ["x", "y"]}, "template": "<a><b>",
                                    "permutations": false}});
    assert_eq!(ok(zipped), json!(["1x", "2y"]));
    assert_eq!(ok(json!({"repeat": {"for_each": {"%k%": {"one": 1}}, "template": "%k%"}})), json!(["one"]));
    assert_eq!(ok(json!({"repeat": {"for_each": {"%k%": null}, "template": "%k%"}})), json!([]));
    let uneven =
        json!({"repeat": {"for_each": {"a": ["1"], "b": ["1", "2"]}, "template": "ab", "permutations": false}});
    assert!(error("2021-04-16", uneven).contains("should be equal if no nested loop"));
    assert!(error("2021-04-16", json!({"repeat": {"for_each": {}, "template": "x"}})).contains("not enough values"));
    assert!(error("2021-04-16", json!({"repeat": {"for_each": {"a": [1]}, "template": "a"}})).contains("must be str"));
    // Maps are lists' equals only from 2016-10-14; permutations only from 2017-09-01.
    let map = json!({"repeat": {"for_each": {"%k%": {"one": 1}}, "template": "%k%"}});
    assert!(error("2016-04-08", map).contains("must be lists"));
    let flag = json!({"repeat": {"for_each": {"a": ["1"], "b": ["1", "2"]}, "template": "ab", "permutations": false}});
    assert_eq!(run("2016-10-14", flag), Ok(json!(["11", "12"])));
}

#[test]
fn repeat_and_list_concat_are_bounded() {
    let hundred: Vec<String> = (0..100).map(|index| index.to_string()).collect();
    let snippet = json!({"repeat": {"for_each": {"a": hundred, "b": hundred, "c": hundred}, "template": "abc"}});
    assert!(error("2021-04-16", snippet).contains("more than 100000 items"));
    let wide = "x".repeat(1 << 20);
    let twenty = vec!["1"; 20];
    let snippet = json!({"repeat": {"for_each": {"a": twenty}, "template": wide}});
    assert!(error("2021-04-16", snippet).contains("bytes"));
    let list: Vec<u32> = (0..60_000).collect();
    assert!(error("2021-04-16", json!({"list_concat": [list, list]})).contains("more than 100000 items"));
    let big = vec!["x".repeat(1 << 20)];
    let copies: Vec<&Vec<String>> = std::iter::repeat_n(&big, 20).collect();
    assert!(error("2021-04-16", json!({"list_concat": copies})).contains("larger than"));
}

#[test]
fn digest_and_str_split() {
    assert_eq!(
        ok(json!({"digest": ["sha256", "abc"]})),
        json!("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    );
    assert_eq!(ok(json!({"digest": ["md5", "abc"]})), json!("900150983cd24fb0d6963f7d28e17f72"));
    assert_eq!(ok(json!({"digest": ["SHA1", "abc"]})), json!("a9993e364706816aba3e25717850c26c9cd0d89d"));
    assert!(error("2021-04-16", json!({"digest": ["sha3_256", "abc"]})).contains("not supported"));
    assert!(error("2021-04-16", json!({"digest": ["sha256", "€"]})).contains("latin-1"));
    assert_eq!(ok(json!({"str_split": [",", "a,,b"]})), json!(["a", "", "b"]));
    assert_eq!(ok(json!({"str_split": [",", "a,b", "-1"]})), json!("b"));
    assert_eq!(ok(json!({"str_split": [",", null]})), json!(null));
    assert_eq!(
        error("2021-04-16", json!({"str_split": [",", "a,b", 2]})),
        "Incorrect index to \"str_split\" should be between 0 and 1"
    );
    assert!(error("2021-04-16", json!({"str_split": ["", "ab"]})).contains("empty separator"));
}

#[test]
fn strict_replacements() {
    let both = json!({"str_replace_strict": {"template": "$ab", "params": {"$ab": "1", "$a": "2"}}});
    assert_eq!(error("2021-04-16", both), "The following params were not found in the template: $a");
    assert_eq!(ok(json!({"str_replace_strict": {"template": "$a$b", "params": {"$a": 1, "$b": null}}})), json!("1"));
    let empty = json!({"str_replace_vstrict": {"template": "$a", "params": {"$a": []}}});
    assert_eq!(
        error("2021-04-16", empty),
        "str_replace_vstrict has an undefined or empty value for param $a, must be a defined non-empty value"
    );
}

#[test]
fn maps_and_lists() {
    assert_eq!(ok(json!({"map_merge": [{"a": 1}, null, {"a": 2, "b": 3}]})), json!({"a": 2, "b": 3}));
    assert!(error("2021-04-16", json!({"map_merge": [{"a": 1}, "x"]})).contains("Items to merge must be maps"));
    let replaced = json!({"map_replace": [{"k": "v", "n": 1}, {"keys": {"k": "K"}, "values": {"v": "V", "1": "x"}}]});
    assert_eq!(ok(replaced), json!({"K": "V", "n": 1}));
    let collides = json!({"map_replace": [{"a": 1, "b": 2}, {"keys": {"a": "b"}}]});
    assert_eq!(error("2021-04-16", collides), "key replacement b collides with a key in the input map");
    assert_eq!(ok(json!({"list_concat_unique": [[1, true, 1.0, "1"], ["1", 2]]})), json!([1, "1", 2]));
    assert_eq!(ok(json!({"filter": [[1, null], [1, null, 2, true]]})), json!([2]));
    assert_eq!(ok(json!({"filter": [null, [1]]})), json!([1]));
    assert_eq!(ok(json!({"contains": ["b", {"get_param": "zones"}]})), json!(true));
    assert_eq!(ok(json!({"contains": [true, [1]]})), json!(true));
    assert!(error("2021-04-16", json!({"contains": ["a", 1]})).contains("should be a sequence"));
}

#[test]
fn make_url_quotes_each_component() {
    let url = json!({"make_url": {"scheme": "https", "username": "a b", "password": "p/w", "host": "fe80::1",
                                  "port": 443, "path": "/x y", "query": {"k": "a b/c", "z": 1}, "fragment": "f"}});
    assert_eq!(ok(url), json!("https://a%20b:p%2Fw@[fe80::1]:443/x%20y?k=a+b/c&z=1#f"));
    assert_eq!(ok(json!({"make_url": {"scheme": "http", "path": "p"}})), json!("http:///p"));
    assert_eq!(
        error("2021-04-16", json!({"make_url": {"port": 70000}})),
        "Invalid URL port 70000, must be in range 1-65535"
    );
    assert_eq!(error("2021-04-16", json!({"make_url": {"hots": "h"}})), "Invalid arguments to \"make_url\": hots");
}

#[test]
fn conditions_and_if() {
    assert_eq!(ok(json!({"if": ["prod", "p", "d"]})), json!("p"));
    assert_eq!(ok(json!({"if": ["dev", "p", "d"]})), json!("d"));
    assert_eq!(ok(json!({"if": ["flagged", "p", "d"]})), json!("d"));
    assert_eq!(ok(json!({"if": [{"not": "dev"}, {"get_param": "port"}, null]})), json!(80));
    // 2021-04-16: an omitted branch leaves the item out.
    assert_eq!(ok(json!(["a", {"if": ["dev", "b"]}, {"k": {"if": ["dev", "v"]}}])), json!(["a", {}]));
    assert!(error("2018-08-31", json!({"if": ["dev", "b"]})).starts_with("Arguments to \"if\" must be of the form"));
    assert_eq!(error("2021-04-16", json!({"if": ["loop_a", 1, 2]})), "Circular definition for condition \"loop_a\"");
    assert_eq!(error("2021-04-16", json!({"if": ["nope", 1, 2]})), "Invalid condition \"nope\"");
    assert!(error("2021-04-16", json!({"if": ["broken", 1, 2]})).contains("The definition of condition \"broken\""));
    assert!(error("2021-04-16", json!({"if": ["bad_function", 1, 2]})).contains("is invalid in this context"));
    assert!(error("2021-04-16", json!({"equals": [1, 1]})).contains("only valid in a condition"));
}

#[test]
fn versions_gate_functions() {
    for (version, snippet, needle) in [
        ("2014-10-16", json!({"repeat": {"for_each": {"a": ["1"]}, "template": "a"}}), "added in 2015-04-30"),
        ("2015-04-30", json!({"str_split": [",", "a"]}), "added in 2015-10-15"),
        ("2015-10-15", json!({"map_merge": [{}]}), "added in 2016-04-08"),
        ("2016-04-08", json!({"if": [true, 1, 2]}), "added in 2016-10-14"),
        ("pike", json!({"digest": ["sha256", "x"]}), ""),
        ("2016-10-14", json!({"filter": [[], []]}), "added in 2017-02-24"),
        ("ocata", json!({"list_concat": [[1]]}), "added in 2017-09-01"),
        (
            "2015-10-15",
            json!({"Fn::Select": [0, [1]]}),
            "The function Fn::Select is not supported in this version of HOT.",
        ),
        (
            "2014-10-16",
            json!({"Fn::Split": [",", "a"]}),
            "The function Fn::Split is not supported in this version of HOT.",
        ),
        ("2013-05-23", json!({"Ref": "r"}), "The specified reference \"r\" (in unknown) is incorrect."),
        ("2014-10-16", json!({"Ref": "r"}), "The function Ref is not supported in this version of HOT."),
        ("2013-05-23", json!({"list_join": [",", ["a"], ["b"]]}), "Incorrect arguments to \"list_join\""),
    ] {
        match run(version, snippet.clone()) {
            Ok(_) if needle.is_empty() => {}
            Err(message) if !needle.is_empty() && message.contains(needle) => {}
            other => panic!("{version} {snippet}: {other:?}"),
        }
    }
    assert_eq!(run("2013-05-23", json!({"Fn::Join": ["-", ["a", null, "b"]]})), Ok(json!("a--b")));
    assert_eq!(run("2015-04-30", json!({"Fn::Select": ["1", "[\"a\", \"b\"]"]})), Ok(json!("b")));
}

#[test]
fn the_stored_form_reads_back() {
    for value in [
        json!({"if": [{"equals": [{"get_param": "env"}, "prod"]}, {"get_attr": ["r", "a"]}, null]}),
        json!({"if": [{"and": [true, {"not": false}]}, "a"]}),
        json!({"repeat": {"for_each": {"%a%": {"get_param": "zones"}}, "template": {"get_resource": "r"}}}),
        json!({"Fn::Select": [0, {"Fn::Split": [",", "a,b"]}]}),
        json!({"list_concat_unique": [[1], {"get_attr": ["r", "l"]}]}),
    ] {
        let expr = match Expr::from_json(&value) {
            Ok(expr) => expr,
            Err(error) => panic!("{value}: {error}"),
        };
        assert_eq!(expr.to_json(), value);
    }
    let parsed = Expr::from_json(&json!({"map_merge": [{"get_attr": ["r", "a"]}, {"k": 1}]}));
    assert!(parsed.is_ok_and(|expr| expr.references().len() == 1));
}
