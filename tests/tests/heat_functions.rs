//! Differential tests of the HOT functions: each snippet is evaluated by Heat's own template
//! classes (openstack-heat from PyPI, in-process through tests/peers/real-heat/hot_eval.py)
//! and by the shim's template library; both must give the same value or both refuse it.
//! Cases cover every function, their edge cases and each version gate.

use std::collections::BTreeMap;

use anneal_shim::template::evaluate_snippet;
use anneal_tests::peers;
use serde_json::{Value, json};

/// What the shim must do with a case, given Heat's answer.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    /// The same value, or both refuse (and, when given, both messages contain the text).
    Same(Option<&'static str>),
    /// Heat treats a function name its version lacks as data; the shim refuses it loudly
    /// (docs/templates.md, "Functions").
    HeatKeepsAsData,
}

struct Case {
    version: &'static str,
    snippet: Value,
    expect: Expect,
}

const SAME: Expect = Expect::Same(None);

fn case(version: &'static str, snippet: Value) -> Case {
    Case { version, snippet, expect: SAME }
}

fn refused(version: &'static str, snippet: Value, needle: &'static str) -> Case {
    Case { version, snippet, expect: Expect::Same(Some(needle)) }
}

fn data(version: &'static str, snippet: Value) -> Case {
    Case { version, snippet, expect: Expect::HeatKeepsAsData }
}

fn parameters() -> Value {
    json!({
        "name": {"type": "string", "value": "web"},
        "env": {"type": "string", "value": "prod"},
        "port": {"type": "number", "value": 8080},
        "zones": {"type": "comma_delimited_list", "value": "a,b,c"},
        "settings": {"type": "json", "value": {"db": {"hosts": ["h1", "h2"]}, "k": "v"}},
        "flag": {"type": "boolean", "value": true},
    })
}

fn conditions() -> Value {
    json!({
        "is_prod": {"equals": [{"get_param": "env"}, "prod"]},
        "is_dev": {"not": "is_prod"},
        "both": {"and": ["is_prod", {"get_param": "flag"}]},
        "either": {"or": ["is_dev", false]},
        "zoned": {"contains": ["b", {"get_param": "zones"}]},
    })
}

fn cases() -> Vec<Case> {
    let latest = "2021-04-16";
    vec![
        // repeat, including maps, permutations and the version gates of each.
        case("2015-04-30", json!({"repeat": {"for_each": {"%z%": {"get_param": "zones"}}, "template": "zone-%z%"}})),
        case(
            latest,
            json!({"repeat": {"for_each": {"%a%": ["1", "2"], "%b%": ["x", "y"]}, "template": {"k-%a%": "%a%%b%"}}}),
        ),
        case(
            latest,
            json!({"repeat": {"for_each": {"%a%": ["1", "2"], "%b%": ["x", "y"]}, "template": "%a%%b%", "permutations": false}}),
        ),
        case(
            latest,
            json!({"repeat": {"for_each": {"%a%": ["1", "2"], "%b%": ["x"]}, "template": "%a%%b%", "permutations": false}}),
        ),
        case(latest, json!({"repeat": {"for_each": {"%k%": {"one": 1, "two": 2}}, "template": "%k%"}})),
        case("2016-04-08", json!({"repeat": {"for_each": {"%k%": {"one": 1}}, "template": "%k%"}})),
        case(latest, json!({"repeat": {"for_each": {"%a%": null}, "template": "%a%"}})),
        case(latest, json!({"repeat": {"for_each": {"%a%": "abc"}, "template": "%a%"}})),
        case(latest, json!({"repeat": {"for_each": ["x"], "template": "%a%"}})),
        data("2014-10-16", json!({"repeat": {"for_each": {"%a%": ["1"]}, "template": "%a%"}})),
        // digest
        case("2015-04-30", json!({"digest": ["sha256", "hello"]})),
        case(latest, json!({"digest": ["SHA512", {"get_param": "name"}]})),
        case(latest, json!({"digest": ["sha256"]})),
        case(latest, json!({"digest": ["sha256", 1]})),
        case(latest, json!({"digest": ["md5", "hello"]})),
        case(latest, json!({"digest": ["SHA1", "caf\u{e9}"]})),
        data("2014-10-16", json!({"digest": ["sha256", "x"]})),
        // str_split
        case("2015-10-15", json!({"str_split": [",", "a,b,,c"]})),
        case(latest, json!({"str_split": [",", "a,b,c", 1]})),
        case(latest, json!({"str_split": [",", "a,b,c", "2"]})),
        case(latest, json!({"str_split": [",", "a,b,c", -1]})),
        case(latest, json!({"str_split": [",", "a,b,c", 5]})),
        case(latest, json!({"str_split": [",", null]})),
        case(latest, json!({"str_split": [","]})),
        data("2015-04-30", json!({"str_split": [",", "a,b"]})),
        // str_replace_strict / str_replace_vstrict
        case("2017-02-24", json!({"str_replace_strict": {"template": "a $x b", "params": {"$x": "1"}}})),
        refused(
            latest,
            json!({"str_replace_strict": {"template": "a $x", "params": {"$x": "1", "$y": "2"}}}),
            "were not found in the template: $y",
        ),
        refused(
            latest,
            json!({"str_replace_strict": {"template": "$ab", "params": {"$ab": "1", "$a": "2"}}}),
            "not found in the template: $a",
        ),
        case(latest, json!({"str_replace_vstrict": {"template": "a $x", "params": {"$x": ["l"]}}})),
        refused(
            latest,
            json!({"str_replace_vstrict": {"template": "a $x", "params": {"$x": ""}}}),
            "has an undefined or empty value for param $x",
        ),
        refused(
            latest,
            json!({"str_replace_vstrict": {"template": "a $x", "params": {"$x": null}}}),
            "must be a defined non-empty value",
        ),
        data("2016-10-14", json!({"str_replace_strict": {"template": "a", "params": {"a": "b"}}})),
        data("2017-02-24", json!({"str_replace_vstrict": {"template": "a", "params": {"a": "b"}}})),
        // map_merge / map_replace
        case("2016-04-08", json!({"map_merge": [{"a": 1, "b": 1}, {"b": 2}, null, {"get_param": "settings"}]})),
        case(latest, json!({"map_merge": [{"a": 1}, ["x"]]})),
        case(
            latest,
            json!({"map_replace": [{"k1": "v1", "k2": "v2"}, {"keys": {"k1": "K1"}, "values": {"v2": "V2"}}]}),
        ),
        case(latest, json!({"map_replace": [{"k1": "v1", "k2": "v2"}, {"keys": {"k1": "k2"}}]})),
        case(latest, json!({"map_replace": [{"k1": "v1"}, {"other": {}}]})),
        case(latest, json!({"map_replace": [{"k1": "v1"}]})),
        case(latest, json!({"map_replace": [{"k1": 1, "k2": [1]}, {"values": {"1": "one"}}]})),
        data("2016-04-08", json!({"map_replace": [{"a": 1}, {}]})),
        // list_concat / list_concat_unique
        case("2017-09-01", json!({"list_concat": [[1, 2], null, {"get_param": "zones"}]})),
        case(latest, json!({"list_concat_unique": [[1, "a", 1.0, true], ["a", {"x": 1}, {"x": 1}]]})),
        case(latest, json!({"list_concat": [[1], "ab"]})),
        case(latest, json!({"list_concat": "ab"})),
        data("2017-02-24", json!({"list_concat": [[1], [2]]})),
        // contains
        case("2017-09-01", json!({"contains": ["b", {"get_param": "zones"}]})),
        case(latest, json!({"contains": [1, [1.0, 2]]})),
        case(latest, json!({"contains": ["ell", "hello"]})),
        case(latest, json!({"contains": ["a", {"k": 1}]})),
        case(latest, json!({"contains": ["a"]})),
        data("2017-02-24", json!({"contains": ["a", ["a"]]})),
        // filter
        case("2017-02-24", json!({"filter": [[null, 2], [1, null, 2, 3]]})),
        case(latest, json!({"filter": [null, [1, 2]]})),
        case(latest, json!({"filter": [[1], []]})),
        case(latest, json!({"filter": [[1], "abc"]})),
        case(latest, json!({"filter": [[1]]})),
        data("2016-10-14", json!({"filter": [[1], [1, 2]]})),
        // make_url
        case(
            "2017-09-01",
            json!({"make_url": {"scheme": "https", "host": "example.com", "port": 8443, "path": "/a b/c", "query": {"q": "x y/z", "n": "1"}, "fragment": "f g"}}),
        ),
        case(
            latest,
            json!({"make_url": {"scheme": "http", "username": "u@x", "password": "p:w", "host": "::1", "port": "80"}}),
        ),
        case(latest, json!({"make_url": {"scheme": "http", "host": "[fe80::1]", "path": "x"}})),
        case(latest, json!({"make_url": {"scheme": "file", "path": "/etc/hosts"}})),
        case(latest, json!({"make_url": {"host": "h", "port": 0}})),
        case(latest, json!({"make_url": {"host": "h", "bogus": "x"}})),
        case(latest, json!({"make_url": {"scheme": "a:b", "host": "h"}})),
        data("2017-02-24", json!({"make_url": {"host": "h"}})),
        // if, conditions and the condition functions
        case("2016-10-14", json!({"if": ["is_prod", "big", "small"]})),
        case(latest, json!({"if": ["is_dev", "big", "small"]})),
        case(latest, json!({"if": ["both", {"get_param": "name"}, "x"]})),
        case(latest, json!({"if": ["either", 1, 2]})),
        case(latest, json!({"if": ["zoned", 1, 2]})),
        case(latest, json!({"if": [{"equals": [{"get_param": "port"}, 8080]}, "yes", "no"]})),
        case(latest, json!({"if": [true, "t", "f"]})),
        case(latest, json!({"list": ["a", {"if": ["is_dev", "b"]}, "c"]})),
        case(latest, json!({"if": ["nope", 1, 2]})),
        case("2018-08-31", json!({"if": ["is_prod", 1]})),
        refused(
            latest,
            json!({"if": [{"str_replace": {"template": "a", "params": {}}}, 1, 2]}),
            "is invalid in this context",
        ),
        data("2016-04-08", json!({"if": [true, 1, 2]})),
        // cfn functions: accepted in early HOT, removed later with Heat's message
        case("2013-05-23", json!({"Fn::Select": [1, ["a", "b"]]})),
        case("2015-04-30", json!({"Fn::Select": ["k", {"k": "v"}]})),
        case("2014-10-16", json!({"Fn::Select": [5, ["a"]]})),
        refused(
            "2015-10-15",
            json!({"Fn::Select": [0, ["a"]]}),
            "The function Fn::Select is not supported in this version of HOT",
        ),
        case("2013-05-23", json!({"Fn::Join": [",", ["a", "b"]]})),
        case("2013-05-23", json!({"Fn::Split": [",", "a,b"]})),
        case("2013-05-23", json!({"Fn::Replace": [{"$a": "x"}, "$a-$a"]})),
        case("2013-05-23", json!({"Fn::Base64": "text"})),
        refused(
            "2014-10-16",
            json!({"Fn::Join": [",", ["a"]]}),
            "The function Fn::Join is not supported in this version of HOT",
        ),
        refused(latest, json!({"Fn::Base64": "x"}), "The function Fn::Base64 is not supported in this version of HOT"),
        case(latest, json!({"repeat": {"for_each": {}, "template": "x"}})),
        refused("2013-05-23", json!({"list_join": [",", ["a"], ["b"]]}), "Incorrect arguments to \"list_join\""),
        case("2015-10-15", json!({"list_join": [",", ["a"], ["b"]]})),
        case(latest, json!({"if": [{"not": "is_prod"}, 1, 2]})),
        case(latest, json!({"if": [{"or": ["is_dev", {"equals": [{"get_param": "port"}, 8080.0]}]}, 1, 2]})),
        case(latest, json!({"if": [{"not": "missing"}, 1, 2]})),
        case(latest, json!({"if": [{"and": ["is_prod"]}, 1, 2]})),
        case("2017-02-24", json!({"if": [{"contains": ["a", ["a"]]}, 1, 2]})),
        case(latest, json!({"if": ["is_prod", {"get_param": "zones"}, {"get_attr": ["nothing", "x"]}]})),
        // str_replace and list_join before 2015-10-15 are Heat's older classes
        refused(
            "2014-10-16",
            json!({"str_replace": {"template": "$a", "params": {"$a": [1]}}}),
            "params must be strings or numbers",
        ),
        case("2015-04-30", json!({"str_replace": {"template": "$a $b", "params": {"$a": 1, "$b": null}}})),
        refused("2013-05-23", json!({"list_join": [",", ["a", 1]]}), "Items to join must be strings"),
        case("2014-10-16", json!({"list_join": [",", ["a", null, "b"]]})),
        // the existing functions, for the record
        case(latest, json!({"list_join": [",", ["a"], {"get_param": "zones"}, [{"k": 1}]]})),
        case(latest, json!({"str_replace": {"template": "$a $ab", "params": {"$a": [1], "$ab": {"x": true}}}})),
    ]
}

/// Heat's answers, one per case, from the heat venv's python.
fn heat_answers(cases: &[Case]) -> Vec<Value> {
    let input: Vec<Value> = cases
        .iter()
        .map(|case| {
            json!({"version": case.version, "parameters": parameters(), "conditions": conditions(),
                   "snippet": case.snippet})
        })
        .collect();
    peers::heat_answers("hot_eval.py", input)
}

fn shim_answer(case: &Case) -> Result<Value, String> {
    let Value::Object(conditions) = conditions() else { unreachable!("conditions are a map") };
    let parameters: BTreeMap<String, Value> = match parameters() {
        Value::Object(map) => map.into_iter().map(|(name, spec)| (name, peers::typed_parameter(&spec))).collect(),
        _ => unreachable!("parameters are a map"),
    };
    evaluate_snippet(case.version, &conditions, &parameters, &case.snippet)
}

#[test]
fn functions_agree_with_heat() {
    let cases = cases();
    let answers = heat_answers(&cases);
    let mut disagreements = Vec::new();
    for (case, heat) in cases.iter().zip(answers) {
        let shim = shim_answer(case);
        let agree = match (case.expect, &shim) {
            (Expect::Same(needle), _) => peers::same_answer(&shim, &heat, needle),
            (Expect::HeatKeepsAsData, Err(message)) => {
                heat.get("value") == Some(&case.snippet)
                    && message.contains("is not available in heat_template_version")
            }
            (Expect::HeatKeepsAsData, Ok(_)) => false,
        };
        if !agree {
            disagreements.push(format!("{} {}: heat {heat}, shim {shim:?}", case.version, case.snippet));
        }
    }
    assert!(disagreements.is_empty(), "{} disagreements:\n{}", disagreements.len(), disagreements.join("\n"));
}

#[test]
fn every_condition_agrees_with_heat() {
    let Value::Object(definitions) = conditions() else { unreachable!("conditions are a map") };
    let cases: Vec<Case> =
        definitions.keys().map(|name| case("2021-04-16", json!({"if": [name, "on", "off"]}))).collect();
    let answers = heat_answers(&cases);
    let mut values = Vec::new();
    for (case, heat) in cases.iter().zip(answers) {
        assert_eq!(shim_answer(case).ok().as_ref(), heat.get("value"), "{}", case.snippet);
        values.push(heat["value"].clone());
    }
    // Both outcomes occur, so the comparison is not of constants.
    assert!(values.contains(&json!("on")) && values.contains(&json!("off")), "{values:?}");
}

/// What the shim must do with an `allowed_pattern` case, given Heat's answer.
#[derive(Clone, Copy, PartialEq, Debug)]
enum PatternExpect {
    /// Both accept, or both refuse.
    Same,
    /// Heat accepts; anneal refuses the pattern at its bound on backtracking work
    /// (docs/templates.md, "Parameters").
    AnnealBound,
}

/// (pattern, value given or none, default or none, expectation).
type PatternCase = (&'static str, Option<&'static str>, Option<&'static str>, PatternExpect);

/// TripleO's net-config-bond rule and heat-templates' IIS/Drupal rules (as their YAML strings
/// read), look-around, back-references, anchors and newlines, Python's `\d`/`\w`/`\s`, what
/// Python's syntax refuses or reads differently from Rust's, and defaults.
fn pattern_cases() -> Vec<PatternCase> {
    use PatternExpect::{AnnealBound, Same};
    let bond = "^((?!balance.tcp).)*$";
    let iis = r"(?=^.{6,255}$)((?=.*\\d)(?=.*[A-Z])(?=.*[a-z])|(?=.*\\d)(?=.*[^A-Za-z0-9])(?=.*[a-z])|(?=.*[^A-Za-z0-9])(?=.*[A-Z])(?=.*[a-z])|(?=.*\\d)(?=.*[A-Z])(?=.*[^A-Za-z0-9]))^.*";
    let site = r#"^(?!.*["\r\n\f]).*$"#;
    let given = |pattern, value| (pattern, Some(value), None, Same);
    let mut cases: Vec<PatternCase> = [
        (bond, "mode=balance-slb lacp=active"),
        (bond, "mode=balance-tcp lacp=active"),
        (bond, "balance_tcp"),
        (bond, ""),
        (bond, "mode=active-backup\n"),
        (iis, "Passw0rd!"),
        (iis, r"Pass\dword"),
        (iis, r"pass\dword!"),
        (iis, "Sh0rt"),
        (site, "My Drupal site"),
        (site, "say \"hi\""),
        (site, "tab\there"),
        (site, "line\nbreak"),
        (r"^[\S]+$", "n0-spaces"),
        (r"^[\S]+$", "a space"),
        (r"^[a-zA-Z0-9._%+-]+@(?:[a-zA-Z0-9-]+\.)+[a-zA-Z]{2,4}$", "admin@example.org"),
        // look-around and back-references
        ("(?=.*[0-9])[a-z0-9]+", "abc1"),
        ("(?=.*[0-9])[a-z0-9]+", "abc"),
        ("(?!admin$)[a-z]+", "admin"),
        ("(?!admin$)[a-z]+", "admins"),
        (".(?<=a)b", "ab"),
        (".(?<=a)b", "cb"),
        ("x(?<!y)z", "xz"),
        ("..(?<=ab|cd)", "cd"),
        ("a(?<=a|bc)", "a"),
        (r"(a+)b\1", "aabaa"),
        (r"(a+)b\1", "aaba"),
        (r"(?P<n>\d+)-(?P=n)", "12-12"),
        (r"(?P<n>\d+)-(?P=n)", "12-13"),
        (r"(?i)(a)\1", "aA"),
        (r"\1(a)", "aa"),
        ("(a)(?(1)b|c)", "ab"),
        ("(a)?(?(1)b|c)", "c"),
        ("(a)?(?(1)b|c)", "ac"),
        ("(?>a+)a", "aaa"),
        ("a++a", "aa"),
        ("a*+", "aaa"),
        // anchors and newlines: Heat's end check after re.match
        ("abc$", "abc"),
        ("abc$", "abc\n"),
        ("abc$\n", "abc\n"),
        ("abc\\n?$", "abc\n"),
        (r"abc\Z", "abc"),
        (r"abc\Z", "abc\n"),
        ("a$|a\n", "a\n"),
        ("(?m)a$\nb", "a\nb"),
        ("a$\nb", "a\nb"),
        (r"[\s\S]*?$", "ab\ncd"),
        (r"[\s\S]*?$", "ab\ncd\n"),
        (r"[\s\S]*$", "ab\ncd\n"),
        (".*", "a\nb"),
        ("(?s).*", "a\nb"),
        ("^$", ""),
        ("^$", "\n"),
        ("(?m)^b", "b"),
        ("a\n^b", "a\nb"),
        ("(?m)a\n^b", "a\nb"),
        (r"\bfoo\b", "foo"),
        (r"foo\b.", "foo!"),
        (r"foo\b.", "fooé"),
        (r"\B", ""),
        (r"a\B", "a"),
        (r"caf\w\b", "café"),
        // Python's str classes
        (r"\d+", "١٢٣"),
        (r"(?a)\d+", "١٢٣"),
        ("[0-9]+", "١٢٣"),
        (r"\w+", "héllo"),
        (r"\w", "²"),
        (r"\w", "\u{301}"),
        (r"\w", "‿"),
        (r"\s", "\u{1c}"),
        (r"(?a)\s", "\u{1c}"),
        (r"\s", "\u{a0}"),
        (r"[^\W\d]+", "abc"),
        (r"[^\W\d]+", "ab1"),
        ("(?i)k", "\u{212a}"),
        // leftmost-first: the first match Python finds must reach the end
        ("a|ab", "ab"),
        ("ab|a", "ab"),
        ("a*?", "aaa"),
        ("(|a)*", "aa"),
        ("(a|)+b?", "aab"),
        ("^4.?[0-9]?", "4.1"),
        ("-(%[YmdHMSVs])+$", "-%Y%m"),
        // Python's syntax where Rust's differs
        ("x{,2}", "xx"),
        ("a{", "a{"),
        ("a{1,2", "a{1,2"),
        ("a{}", "a{}"),
        ("[[:alpha:]]", "a]"),
        ("[[:alpha:]]", "a"),
        ("[a-z&&[^aeiou]]", "b]"),
        ("[]a]+", "]a"),
        ("[^]]", "x"),
        ("[a-]+", "-a"),
        ("a(?#comment)b", "ab"),
        ("(?x) a b # c", "ab"),
        ("(?x)a[ ]b", "a b"),
        ("(?i)ABC", "abc"),
        ("(?i:a)B", "AB"),
        ("(?i:a)B", "Ab"),
        (r"\x41\u0042\U00000043", "ABC"),
        (r"\101", "A"),
        (r"[\b]", "\u{8}"),
        (r"\$\.", "$."),
        (r"\z", "z"),
        (r"\p{L}", "a"),
        ("(?<n>a)", "a"),
        ("a{3,2}", "aa"),
        ("(", "x"),
        ("a**", "a"),
        ("*a", "a"),
        ("(?<=a+)b", "ab"),
        ("[z-a]", "a"),
        (r"[\d-z]", "a"),
        ("(?a)(?u)x", "x"),
        ("x(?i)", "x"),
        ("(?L)x", "x"),
        ("(?P<1>a)", "a"),
        ("(?(2)a|b)(c)", "bc"),
    ]
    .into_iter()
    .map(|(pattern, value)| given(pattern, value))
    .collect();
    cases.extend([
        ("[a-z]+", None, Some("abc"), Same),
        ("[a-z]+", None, Some("ABC"), Same),
        ("[a-z]+", Some("abc"), Some("ABC"), Same),
        (bond, None, Some("balance-tcp"), Same),
        ("(?=(?!a))b", Some("b"), None, AnnealBound),
        (r"(?=(a)\1)aa", Some("aa"), None, AnnealBound),
    ]);
    cases
}

/// The shim's answer: the template parsed (a bad pattern refuses it) and the parameter
/// resolved as at stack create.
fn shim_pattern_answer(pattern: &str, value: Option<&str>, default: Option<&str>) -> Result<(), String> {
    let mut parameter = json!({"type": "string", "constraints": [{"allowed_pattern": pattern}]});
    if let Some(default) = default {
        parameter["default"] = json!(default);
    }
    let text = json!({"heat_template_version": "2021-04-16", "parameters": {"p": parameter}}).to_string();
    let template = anneal_shim::template::parse_template(&text).map_err(|error| error.to_string())?;
    let given: BTreeMap<String, String> = value.map(|value| ("p".to_owned(), value.to_owned())).into_iter().collect();
    anneal_shim::template::resolve_parameters(&template, &given).map(|_| ()).map_err(|problems| problems.join("; "))
}

#[test]
fn allowed_patterns_agree_with_heat() {
    let cases = pattern_cases();
    let input = cases
        .iter()
        .map(|(pattern, value, default, _)| {
            let mut case = json!({"pattern": pattern, "value": value});
            if let Some(default) = default {
                case["default"] = json!(default);
            }
            case
        })
        .collect();
    let answers = peers::heat_answers("allowed_pattern.py", input);
    let mut disagreements = Vec::new();
    let mut outcomes = (0, 0);
    for ((pattern, value, default, expect), heat) in cases.iter().zip(answers) {
        let shim = shim_pattern_answer(pattern, *value, *default);
        let heat_accepts = heat.get("value").is_some();
        let agree = match expect {
            PatternExpect::Same => heat_accepts == shim.is_ok(),
            PatternExpect::AnnealBound => {
                heat_accepts && shim.as_ref().is_err_and(|message| message.contains("anneal's limit"))
            }
        };
        if heat_accepts {
            outcomes.0 += 1
        } else {
            outcomes.1 += 1
        }
        if !agree {
            disagreements.push(format!("{pattern:?} value {value:?} default {default:?}: heat {heat}, shim {shim:?}"));
        }
    }
    assert!(disagreements.is_empty(), "{} disagreements:\n{}", disagreements.len(), disagreements.join("\n"));
    // Both outcomes are common, so the comparison is not of constants.
    assert!(outcomes.0 > 30 && outcomes.1 > 30, "{outcomes:?}");
}
