//! resolve_parameters tests: typing, defaults, unknown and missing values, constraints, hidden
//! values, and `allowed_pattern` as Python's `re` reads it (look-around, back-references, Heat's
//! anchoring, Python's syntax and classes) within anneal's bounds on backtracking.

use serde_json::json;

use super::{assert_problem, parse_problems, strings, template};
use crate::template::parameters::pattern::{BACKTRACK_LIMIT, Pattern, PatternError};
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
  word: {type: string, constraints: [{allowed_pattern: 'ab|a'}, {allowed_values: [1, ab]}]}
",
    );
    let given = strings(&[("size", "2.0"), ("flag", "yes"), ("word", "ab")]);
    assert!(resolve_parameters(&parsed, &given).is_ok());
    // The pattern must match the whole value, as in Heat.
    assert!(resolve_parameters(&parsed, &strings(&[("size", "3"), ("flag", "1"), ("word", "abc")])).is_err());
}

/// Whether `pattern` accepts `value` as Heat's AllowedPattern does.
fn accepts(pattern: &str, value: &str) -> bool {
    match Pattern::compile(pattern).map(|compiled| compiled.matches(value)) {
        Ok(Ok(matched)) => matched,
        other => panic!("{pattern:?} on {value:?}: {other:?}"),
    }
}

#[test]
fn look_around_and_backreferences_are_accepted_as_in_python() {
    // TripleO's net-config-bond rule: refused by the regex crate, taken by Python.
    let bond = "^((?!balance.tcp).)*$";
    assert!(accepts(bond, "mode=balance-slb"));
    assert!(!accepts(bond, "mode=balance-tcp lacp=active"));
    assert!(accepts("(?=.*[0-9])(?=.*[A-Z]).{8,}", "Passw0rdX"));
    assert!(!accepts("(?=.*[0-9])(?=.*[A-Z]).{8,}", "password1"));
    assert!(accepts(".(?<!x)y", "ay") && !accepts(".(?<!x)y", "xy"));
    assert!(accepts(r"(?P<word>\w+) (?P=word)", "hey hey") && !accepts(r"(\w+) \1", "hey you"));
    let declarations = format!("  bond: {{type: string, constraints: [{{allowed_pattern: '{bond}'}}]}}\n");
    assert!(resolve_parameters(&declared(&declarations), &strings(&[("bond", "mode=active-backup")])).is_ok());
    assert_eq!(
        problems(&declarations, &[("bond", "balance-tcp")]),
        [format!("parameter \"bond\": the value must match the pattern \"{bond}\"")]
    );
}

#[test]
fn the_first_match_python_finds_must_reach_the_end() {
    // re.match takes the first alternative that matches; Heat then compares match.end().
    assert!(!accepts("a|ab", "ab"));
    assert!(accepts("ab|a", "ab"));
    assert!(!accepts("a*?", "aaa"));
    assert!(!accepts("(|a)*", "aa"));
    assert!(!accepts("(?=a)|ab", "ab"));
}

#[test]
fn anchors_and_newlines_are_pythons() {
    // `$` matches before a final newline, so the match ends short of the value: refused.
    assert!(accepts("abc$", "abc") && !accepts("abc$", "abc\n"));
    assert!(accepts("abc$\n", "abc\n"));
    assert!(!accepts("a$|a\n", "a\n"));
    assert!(!accepts("a$\nb", "a\nb") && accepts("(?m)a$\nb", "a\nb"));
    assert!(accepts(r"[\s\S]*?$", "ab\ncd") && !accepts(r"[\s\S]*?$", "ab\ncd\n"));
    // `\Z` is the very end in Python; `\z` is no escape of Python's.
    assert!(accepts(r"abc\Z", "abc") && !accepts(r"abc\Z", "abc\n"));
    assert!(!accepts(".*", "a\nb") && accepts("(?s).*", "a\nb"));
    assert!(!accepts(r"\B", "") && !accepts(r"\b", ""));
    assert!(!accepts(r"foo\b.", "fooé") && accepts(r"foo\b.", "foo!"));
}

#[test]
fn classes_are_pythons_str_classes() {
    assert!(accepts(r"\d+", "١٢٣") && !accepts(r"(?a)\d+", "١٢٣"));
    assert!(accepts(r"\w", "²") && !accepts(r"\w", "\u{301}") && !accepts(r"\w", "‿"));
    assert!(accepts(r"\s", "\u{1c}") && !accepts(r"(?a)\s", "\u{1c}"));
    assert!(accepts(r"[^\W\d]+", "abc") && !accepts(r"[^\W\d]+", "ab1"));
    // What Rust reads as set operations or POSIX classes, Python reads as characters.
    assert!(accepts("[[:alpha:]]", "a]") && !accepts("[[:alpha:]]", "a"));
    assert!(accepts("[a-z&&[^aeiou]]", "a]"));
    assert!(accepts("x{,2}", "xx") && accepts("a{", "a{") && accepts("a{1,2", "a{1,2"));
    assert!(accepts("(?x) a b # comment", "ab") && accepts("a(?#note)b", "ab"));
    assert!(accepts(r"\x41\101\u0042", "AAB"));
}

#[test]
fn patterns_python_refuses_refuse_the_template_with_pythons_message() {
    let refused = |pattern: &str| match Pattern::compile(pattern) {
        Err(PatternError::Invalid { reason, .. }) => reason,
        other => panic!("{pattern:?}: {other:?}"),
    };
    assert_eq!(refused(r"\p{L}"), r"bad escape \p at position 0");
    assert_eq!(refused(r"a\z"), r"bad escape \z at position 1");
    assert_eq!(refused("(?<n>a)"), "unknown extension ?<n at position 1");
    assert_eq!(refused("(?<=a+)b"), "look-behind requires fixed-width pattern");
    assert_eq!(refused(r"\1(a)"), "invalid group reference 1 at position 1");
    assert_eq!(refused("a**"), "multiple repeat at position 2");
    assert_eq!(refused("x(?i)"), "global flags not at the start of the expression at position 1");
    let problems = parse_problems(
        "heat_template_version: 2018-08-31\nparameters:\n  p: {type: string, constraints: [{allowed_pattern: '[z-a]'}]}\n",
    );
    assert_problem(&problems, "allowed_pattern \"[z-a]\" is not a valid regular expression: bad character range z-a");
}

#[test]
fn catastrophic_backtracking_is_bounded_and_refused_with_the_limit() {
    // Exponential for a backtracking engine; fancy-regex stops at BACKTRACK_LIMIT steps.
    let hostile = "(a|a)+(?=c)";
    let value = format!("{}b", "a".repeat(64));
    let Ok(compiled) = Pattern::compile(hostile) else { panic!("the pattern compiles") };
    assert_eq!(compiled.matches(&value), Err(PatternError::Steps { pattern: hostile.to_owned() }));
    let declarations = format!(
        "  pin: {{type: string, hidden: true, constraints: [{{allowed_pattern: '{hostile}', description: letters}}]}}\n"
    );
    let problems = problems(&declarations, &[("pin", &value)]);
    // The limit is said even though the constraint has a description, and the value is not.
    assert_eq!(
        problems,
        [format!(
            "parameter \"pin\": allowed_pattern \"{hostile}\": matching the value took more than {BACKTRACK_LIMIT} \
             backtracking steps or saved positions (anneal's limit for look-around and back-reference patterns), \
             so the value is refused"
        )]
    );
}

#[test]
fn backtracking_work_is_bounded_by_value_length_and_no_nested_look_around() {
    let Ok(compiled) = Pattern::compile("(?=.*x).*") else { panic!("the pattern compiles") };
    assert!(matches!(compiled.matches(&"x".repeat(5000)), Err(PatternError::TooLong { .. })));
    assert_eq!(compiled.matches(&"x".repeat(4096)), Ok(true));
    // A linear pattern has no length bound.
    assert!(accepts("x+", &"x".repeat(100_000)));
    for nested in ["(?=(?!a))b", r"(?=(a)\1)aa", "(?<=(?>a))b"] {
        assert!(matches!(Pattern::compile(nested), Err(PatternError::Unsupported { .. })), "{nested}");
    }
    let deep = format!("{}a{}", "(".repeat(41), ")".repeat(41));
    assert!(matches!(Pattern::compile(&deep), Err(PatternError::Unsupported { .. })));
    // At the nesting limit, with the look-arounds `\b` and `$` become, the backtracking engine
    // still takes it.
    let Ok(deepest) = Pattern::compile(&format!("{}\\ba(?=a)${}", "(".repeat(39), ")".repeat(39))) else {
        panic!("40 levels compile")
    };
    assert_eq!(deepest.matches("a"), Ok(false));
}

#[test]
fn a_default_is_checked_even_when_a_value_is_given() {
    // Heat's Schema.validate checks the default first: "Invalid default".
    let declarations = "  word: {type: string, default: ABC, constraints: [{allowed_pattern: '[a-z]+'}]}\n";
    assert_eq!(
        problems(declarations, &[("word", "abc")]),
        ["parameter \"word\": invalid default: the value must match the pattern \"[a-z]+\""]
    );
    let fine = declared("  word: {type: string, default: xyz, constraints: [{allowed_pattern: '[a-z]+'}]}\n");
    assert!(resolve_parameters(&fine, &strings(&[("word", "abc")])).is_ok());
}
