//! Differential tests of the `yaql` function: each expression is evaluated by Heat's own
//! `Yaql` function (openstack-heat 27.0.1 with its yaql, in-process through
//! tests/peers/real-heat/hot_eval.py) and by the shim; both must give the same value or both
//! refuse. Cases cover every operator, function and method of the supported subset
//! (docs/templates.md, "yaql"), the shapes of expression TripleO's templates use (our own
//! snippets with representative data), the engine limits, and what the subset refuses.

use std::collections::BTreeMap;

use anneal_shim::template::evaluate_snippet;
use anneal_tests::peers;
use serde_json::{Value, json};

/// What the shim must do with a case, given Heat's answer.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    /// The same value, or both refuse (and, when given, the shim's message contains the text).
    Same(Option<&'static str>),
    /// Outside the subset: Heat answers, the shim refuses with a message containing the text.
    ShimRefuses(&'static str),
}

struct Case {
    version: &'static str,
    snippet: Value,
    expect: Expect,
}

const LATEST: &str = "2021-04-16";

fn yaql(expression: &str, data: Value) -> Value {
    json!({"yaql": {"expression": expression, "data": data}})
}

fn same(expression: &str, data: Value) -> Case {
    Case { version: LATEST, snippet: yaql(expression, data), expect: Expect::Same(None) }
}

fn refused(expression: &str, data: Value, needle: &'static str) -> Case {
    Case { version: LATEST, snippet: yaql(expression, data), expect: Expect::Same(Some(needle)) }
}

fn stricter(expression: &str, data: Value, needle: &'static str) -> Case {
    Case { version: LATEST, snippet: yaql(expression, data), expect: Expect::ShimRefuses(needle) }
}

fn parameters() -> Value {
    json!({
        "expression": {"type": "string", "value": "$.data.sum()"},
        "numbers": {"type": "json", "value": {"n": [3, 2, 1]}},
    })
}

/// The operators, literals and lookups of the grammar.
fn operator_cases() -> Vec<Case> {
    let data = json!({"a": 1, "l": [1, 2, 3], "s": "text", "m": {"k": "v", "n": null}, "f": 1.5});
    let mut cases: Vec<Case> = [
        "$.data",
        "$.data.a",
        "$.data.m.k",
        "$.data.m.n",
        "$.data.l[0]",
        "$.data.l[-1]",
        "$.data.m[k]",
        "$.data.m['x', 7]",
        "$.data?.m",
        "$.data.m.n?.x",
        "[1, 'a', true, null, 2.5]",
        "{a => 1, 'b c' => [2]}",
        "{}",
        "[]",
        "1 + 2 * 3",
        "(1 + 2) * 3",
        "7 / 2",
        "-7 / 2",
        "7.0 / 2",
        "7 mod 3",
        "-7 mod 3",
        "2.5 * 2",
        "1 - 5",
        "-$.data.a",
        "+$.data.f",
        "--1",
        "\"a\" + 'b'",
        "[1] + [2, 3]",
        "{a => 1} + {b => 2}",
        "'ab' * 3",
        "3 * [0]",
        "1 = 1.0",
        "true = 1",
        "'a' = 'a'",
        "[1, 2] = [1, 2]",
        "$.data.l = [1, 2, 3]",
        "1 != 2",
        "2 > 1",
        "1 >= 1",
        "'a' < 'b'",
        "null < 1",
        "null >= null",
        "2 < null",
        "1 in $.data.l",
        "'ex' in $.data.s",
        "not true",
        "not null",
        "not $.data.l",
        "1 and 2",
        "0 and 2",
        "null or 'x'",
        "'' or []",
        "true and not false or false",
        "1 = 1 and 2 > 1",
        "not 1 = 2",
        "`a\\b`",
        "'line\\n'",
        "\"q\\\"\"",
        "'\\x41\\u00e9'",
        "$.data.s =~ 'e.t'",
        "$.data.s !~ '^x'",
        "$.data.l.select($ * 2)",
    ]
    .into_iter()
    .map(|expression| same(expression, data.clone()))
    .collect();
    cases.extend([
        refused("$.data.missing", data.clone(), "KeyError"),
        refused("$.data.a.b", data.clone(), "#property#b"),
        refused("$.data.l[5]", data.clone(), "IndexError"),
        refused("'abc'[0]", data.clone(), "#indexer"),
        refused("1 / 0", data.clone(), "ZeroDivisionError"),
        refused("'a' + 1", data.clone(), "#operator_+"),
        refused("1 < 'a'", data.clone(), "#operator_<"),
        refused("true + 1", data.clone(), "#operator_+"),
        refused("'a' in {a => 1}", data.clone(), "#operator_in"),
        refused("$.data.l.select($)[0]", data.clone(), "#indexer"),
        refused("1 +", data.clone(), "Bad expression"),
        refused("(1", data.clone(), "Bad expression"),
        refused("'open", data.clone(), "Bad expression"),
        refused("1 # 2", data.clone(), "Bad expression"),
        refused("1.5e3", data.clone(), "Bad expression"),
    ]);
    cases
}

/// Every function and method of the subset, with its edge cases.
fn library_cases() -> Vec<Case> {
    let data = json!({
        "l": [3, 1, 2, 1], "nested": [[1, [2]], {"k": 1}, "s", []], "words": " a  b c ",
        "m": {"x": {"p": [1, 2], "q": 1}, "y": 2}, "o": {"x": {"p": [2, 3], "r": 1}, "y": 3, "z": [1]},
        "pairs": [["a", 1], ["b", 2], ["a", 3]], "people": [{"name": "n1", "age": 30}, {"name": "n2", "age": 20}],
        "path": "registry.example.com:8787/ns/image:tag", "none": null, "cidr": "192.0.2.0/24",
    });
    let mut cases: Vec<Case> = [
        "coalesce(null, $.data.none, 2, 3)",
        "coalesce(null)",
        "dict(a => 1, b => [2])",
        "dict($.data.pairs)",
        "dict($.data.pairs.where($[1] > 1))",
        "list(1, 2)",
        "list($.data.l)",
        "list($.data.l.select($))",
        "list(null)",
        "list()",
        "len($.data.l)",
        "$.data.l.len()",
        "len('abc')",
        "len($.data.m)",
        "int('12')",
        "int(' 7 ')",
        "int(2.9)",
        "int(-2.9)",
        "int(null)",
        "int(true)",
        "str(12)",
        "str(1.5)",
        "str(2.0)",
        "str(null)",
        "str(true)",
        "str('s')",
        "concat('a', 'b', 'c')",
        "concat([1], [2])",
        "[1].concat([2], [3])",
        "switch(false => 1, $.data.l => 2, true => 3)",
        "switch(false => 1)",
        "range(3)",
        "range(2, 5)",
        "range(5, 0, -2)",
        "range(0)",
        "isList($.data.l)",
        "isList($.data.l.select($))",
        "isList('a')",
        "isDict($.data.m)",
        "isDict(1)",
        "isString('a')",
        "isString(1)",
        "distinct($.data.l)",
        "$.data.l.distinct()",
        "$.data.pairs.distinct($[0])",
        "$.data.l.any()",
        "$.data.l.any($ > 2)",
        "[].any()",
        "$.data.l.all($ > 0)",
        "[0].all()",
        "$.data.l.max()",
        "$.data.l.min()",
        "max(1, 2)",
        "min('a', 'b')",
        "$.data.l.sum()",
        "' '.isEmpty()",
        "isEmpty(null)",
        "'x'.isEmpty()",
        "$.data.m.keys().len()",
        "list($.data.m.values())",
        "isList($.data.m.values())",
        "$.data.m.values() = [2]",
        "list($.data.m.values().select($))",
        "$.data.m.items().first()",
        "$.data.m.items().select($[0])",
        "$.data.m.get(y)",
        "$.data.m.get('zz')",
        "$.data.m.get('zz', 5)",
        "$.data.m.containsKey(x)",
        "$.data.m.containsKey(zz)",
        "$.data.m.mergeWith($.data.o)",
        "$.data.o.mergeWith($.data.m)",
        "{a => 1, b => 2}.deleteAll([a, c])",
        "$.data.l.first()",
        "[].first(null)",
        "[].first(default => 4)",
        "$.data.l.last()",
        "[].last(default => '')",
        "$.data.l.select($ + 1)",
        "$.data.l.where($ > 1)",
        "$.data.l.where($)",
        "$.data.pairs.selectMany($)",
        "[[1], 2].selectMany($)",
        "$.data.l.reduce($1 + $2)",
        "$.data.l.reduce($1 + $2, 10)",
        "[{a => 1}, {b => 2}].reduce($1.mergeWith($2), {})",
        "$.data.nested.flatten()",
        "$.data.l.zip([4, 5])",
        "$.data.l.zip([4, 5, 6], ['a', 'b'])",
        "$.data.pairs.groupBy($[0], $[1])",
        "$.data.pairs.groupBy($[0])",
        "$.data.people.toDict($.name, $.age)",
        "$.data.people.toDict($.name)",
        "$.data.l.contains(2)",
        "$.data.l.contains('2')",
        "'a'.repeat(3)",
        "[1].repeat(0)",
        "$.data.people.name",
        "$.data.l.join(',')",
        "[1, null, true, 'x', 1.5].join('-')",
        "', '.join(['a', 'b'])",
        "'a,b,c'.split(',')",
        "'a,b,c'.split(',', 1)",
        "$.data.words.split()",
        "$.data.words.split(null, 1)",
        "'a,b,c'.rightSplit(',', 1)",
        "$.data.words.rightSplit(null, 1)",
        "$.data.path.rightSplit(':', 1)[0]",
        "$.data.path.rightSplit(separator => '/', maxSplits => 1)[1]",
        "'aXbX'.replace('X', '-')",
        "'aXbX'.replace('X', '-', 1)",
        "'MiXed'.toUpper()",
        "'MiXed'.toLower()",
        "'  t  '.trim()",
        "'abc'.startsWith('x', 'a')",
        "'abc'.endsWith('bc')",
        "'a.b'.matches('\\.')",
        "'ab'.matches('^b')",
        "regex('([a-z])([A-Z])').replace('fooBar', '\\1_\\2')",
        "regex('o').replace('foo', '0', 1)",
        "regex('[0-9]+[KMG]').search('x 2M y')",
        "regex('z').search('abc')",
        "regex('(?:https?://)?(.*?)/(.*)').split('http://host/a/b')",
        "regex(',').split('a,b,c', 1)",
        "regex('^a').matches('abc')",
        "let(x => 2) -> $x * $x",
        "let(1, 2) -> $1 + $2",
        "let(root => $) -> $root.data.l.where($ in $root.data.l)",
        "let(a => 1) -> let(b => $a + 1) -> [$a, $b]",
        "$.data.l.select($1 * 10)",
        "[[1, 2]].select($[0] + $[1])",
    ]
    .into_iter()
    .map(|expression| same(expression, data.clone()))
    .collect();
    cases.extend([
        refused("[].first()", data.clone(), "StopIteration"),
        refused("$.data.m.values()[0]", data.clone(), "#indexer"),
        refused("[].reduce($1 + $2)", data.clone(), "reduce"),
        refused("int('x')", data.clone(), "invalid literal"),
        refused("{a => [1]}.mergeWith({a => 1})", json!({}), ""),
        refused("{a => 1}.mergeWith({a => [1]})", json!({}), "Cannot merge"),
        refused("'a,b'.split('')", json!({}), "empty separator"),
        refused("select($.data.l, $)", data.clone(), "select"),
        refused("$.data.m.coalesce(1)", data.clone(), "coalesce"),
        refused("$.data.l.get(1)", data.clone(), "get"),
        refused("$.data.m.select($)", data.clone(), "select"),
        refused("'abc'.select($)", data.clone(), "select"),
        refused("$.data.l.toUpper()", data.clone(), "toUpper"),
        refused("switch(1)", data.clone(), "switch"),
        refused("'{0}'.format(1)", data.clone(), "format"),
        stricter("$.data.l.orderBy($)", data.clone(), "method .orderBy()"),
        refused("now()", data.clone(), "now"),
        refused("'a'.repeat()", data.clone(), "Collection length exceeds 200"),
        stricter("str([1, 'a'])", data.clone(), "str() of a list or map"),
        stricter("range(300).len()", data.clone(), "Collection length exceeds 200"),
        stricter("dict([[1, 2]])", data.clone(), "map keys must be strings"),
    ]);
    cases
}

/// Expressions shaped like TripleO's (tripleo-heat-templates 18.0.0), on data of the shape
/// those templates give them.
fn tripleo_cases() -> Vec<Case> {
    let role_data = json!([
        {"service_name": "s1", "upgrade_tasks": [{"name": "t1"}], "config_settings": {"a": 1}, "kolla": {"k1": {"x": [1]}},
         "metadata_settings": [{"service": "svc", "network": "internal", "type": "node"}]},
        null,
        {"service_name": "s2", "upgrade_tasks": [{"name": "t1"}, {"name": "t2"}], "kolla": {"k1": {"x": [2]}, "k2": 1},
         "metadata_settings": [{"service": "vip", "network": "storage_mgmt", "type": "vip"}]},
        {"service_name": "s3"},
    ]);
    let services = json!({"service_names": ["s1", "s2", "s3"], "step": [{"a": 1}, null, {"b": 2}],
                          "docker": [null, {"c": 3}, {"d": 4}]});
    let ceph = json!({"default_user": "openstack", "key": "glance", "multiconfig": {
        "one": {"CephClusterName": "c1"}, "two": {"CephClusterName": "c2", "CephClientUserName": "u2"}}});
    let mut cases = vec![
        same(
            "coalesce($.data, []).where($ != null).select($.get('upgrade_tasks')).where($ != null).flatten().distinct()",
            role_data.clone(),
        ),
        same(
            "list(coalesce($.data, []).where($ != null).select($.get('config_settings')).where($ != null)).flatten()",
            role_data.clone(),
        ),
        same(
            "coalesce($.data, []).where($ != null).select($.get('kolla')).where($ != null).reduce($1.mergeWith($2), {})",
            role_data.clone(),
        ),
        same("coalesce($.data, []).first(null)", json!(null)),
        same("coalesce($.data, []).first(null)", json!(["x"])),
        same(
            "$.data.service_names.zip($.data.docker).where($[1] != null).select($[1]).reduce($1.mergeWith($2), {})",
            services.clone(),
        ),
        same(
            "$.data.service_names.zip($.data.step, $.data.docker).where($[2] = null).where($[1] != null).select($[1])",
            services.clone(),
        ),
        same(
            "dict(coalesce($.data, []).where($ != null).select($.get('metadata_settings')).where($ != null).flatten().where($.type = 'node').groupBy(concat('compact_service_', $.service), $.network.replace('_', '')))",
            role_data.clone(),
        ),
        same(
            "let(u => $.data.default_user) -> $.data.multiconfig.values().select(concat($.CephClusterName, ':', $.get('CephClientUserName', $u)))",
            ceph.clone(),
        ),
        same(
            "let(k => $.data.key) -> list(coalesce($.data.multiconfig, {}).get('one')).flatten().select($.get('CephClusterName'))",
            ceph.clone(),
        ),
        same(
            "let(servers => switch(isDict($.data.servers) => $.data.servers, true => {})) -> $servers.deleteAll($servers.keys().where($servers[$] = null))",
            json!({"servers": {"a": 1, "b": null}}),
        ),
        same(
            "let(servers => switch(isDict($.data.servers) => $.data.servers, true => {})) -> $servers",
            json!({"servers": "none"}),
        ),
        same(
            "switch(not isList($.data) => 1, not $.data.where($.startsWith('vlan_id')).len() => 1, true => int($.data.where($.startsWith('vlan_id')).first().split('=').last()))",
            json!(["x=1", "vlan_id=42"]),
        ),
        same("switch(not isList($.data) => 1, true => 2)", json!("text")),
        same(
            "let(root => $) -> $.data.extra.items().where($[0] in $root.data.enabled).select($[1]).flatten() + $root.data.enabled",
            json!({"extra": {"a": ["a1"], "b": ["b1", "b2"]}, "enabled": ["b"]}),
        ),
        same(
            "let(root => $) -> dict($.data.ip_map.items().where($[0] in $root.data.networks))",
            json!({"ip_map": {"internal": ["1"], "external": ["2"]}, "networks": ["internal"]}),
        ),
        same(
            "let(public => $.data.public) -> $.data.networks.where($ != $public or $ = 'ctlplane')",
            json!({"public": "external", "networks": ["external", "internal", "ctlplane"]}),
        ),
        same(
            "dict($.data.map.items().select([regex('([a-z0-9])([A-Z])').replace($[0], '\\1_\\2').toLower(), $[1]]))",
            json!({"map": {"CephPool": 1, "plain": 2}}),
        ),
        same(
            "dict($.data.where($ != null).flatten().selectMany($.items()).groupBy($[0], $[1]).select([$[0], $[1].flatten()]))",
            json!([[{"a": [1]}, {"b": [2]}], null, {"a": [3]}]),
        ),
        same(
            "concat($.data.rightSplit(separator => ':', maxSplits => 1)[0], ':pcmklatest')",
            json!("registry:8787/ns/image:tag"),
        ),
        same(
            "concat('cluster.common.tag/', $.data.rightSplit(separator => '/', maxSplits => 1)[1])",
            json!("registry:8787/ns/image:tag"),
        ),
        same(
            "let(location => $.data.rightSplit(':', 1)[0]) -> regex('(?:https?://)?(.*?)/(.*)').split($location)[1]",
            json!("registry:8787/ns/image:tag"),
        ),
        same("$.data.split('/')[0].matches('(\\.|:)')", json!("registry.example.com/ns/image")),
        same(
            "$.data.hostname_map.get($.data.hostname, $.data.hostname).toLower()",
            json!({"hostname": "Node-0", "hostname_map": {}}),
        ),
        same(
            "$.data.values().any($.get('GlanceBackend', '') = 'rbd')",
            json!({"a": {"GlanceBackend": "rbd"}, "b": {}}),
        ),
        same(
            "$.data.values().where($ != null).GlanceBackend.contains('rbd')",
            json!({"a": {"GlanceBackend": "file"}, "b": null}),
        ),
        same("$.data.items().first().last().ip_version", json!({"net": {"ip_version": 6}})),
        same("$.data.where($.get('ip_address'))", json!([{"ip_address": "192.0.2.1"}, {"ip_address": ""}, {}])),
        same("$.data.select($ + ':' + $ + ':ro')", json!(["/a", "/b"])),
        same(
            "$.data.vols.select($.replace('glance_api', 'glance_api_internal'))",
            json!({"vols": ["/var/glance_api:/x"]}),
        ),
        same("$.data.max()", json!([2, 9, 4])),
        same("$.data.sources.flatten()", json!({"sources": [["a"], ["b", ["c"]]]})),
        same("$.data.multiconfig.select($.cluster)", json!({"multiconfig": [{"cluster": "c1"}]})),
        same("range(0, len($.data.dpdk)).join(',').split(',')", json!({"dpdk": ["a", "b", "c"]})),
        same(
            "let(hz => switch($.data.size = '2M' => '2048', true => '4')) -> $.data.dpdk.select(int($) * 1024 / int($hz)).join(',')",
            json!({"size": "2M", "dpdk": ["4096", "2048"]}),
        ),
        same("let(hz => '2048') -> [$hz] * len($.data)", json!(["a", "b"])),
        same(
            "let(hzx => regex('([0-9]+[K|M|G])').search($.data.p + $.data.g)) -> switch($hzx = '1G' => 1, $hzx => 2, $hzx = null => 3)",
            json!({"p": "hugepagesz=1G", "g": ""}),
        ),
        same(
            "let(c => $.data.cred) -> $c.get($.data.ns, {}).keys().last(default => '').isEmpty()",
            json!({"cred": {"ns": {"k": "v"}}, "ns": "ns"}),
        ),
        same(
            "let(c => $.data.cred) -> $c.get($.data.ns, {}).values().last(default => '')",
            json!({"cred": {}, "ns": "ns"}),
        ),
        same("str($.data.debug)", json!({"debug": true})),
        same("int($.data.port)", json!({"port": "8080"})),
        same("$.data.toUpper()", json!("abc")),
        same(
            "$.data.where($ != null).reduce($1.mergeWith($2), {})",
            json!([{"a": {"b": [1]}}, null, {"a": {"b": [2]}}]),
        ),
        same(
            "distinct($.data.extra.items().where($[0] in $.data.enabled).select($[1]).flatten())",
            json!({"extra": {"a": ["x", "y"]}, "enabled": ["a"]}),
        ),
        same("list($.data.where($ != null and len($) > 0)).flatten()", json!([[1], [], null, [2, 3]])),
        same(
            "let(role_networks => $.data.rn) -> list(coalesce($.data.role_data, []).where($ != null).where($.containsKey('metadata_settings')).metadata_settings.flatten().distinct().where($ != null and $.containsKey('network')).where($role_networks.contains($.network))).flatten()",
            json!({"rn": ["internal"], "role_data": role_data.clone()}),
        ),
        same(
            "dict(coalesce($.data, []).where($ != null).select([$.get('kolla'), $.get('service_name')]).where($[0] != null).select([$[0], dict($[0].keys().zip(dict(service_name => $[1]).repeat(len($[0].keys()))))]).select($[0].mergeWith($[1])).selectMany($.items()).groupBy($[0], $[1]))",
            role_data.clone(),
        ),
        // TripleO writes str.format, which yaql 3 does not have: Heat refuses it too.
        refused(
            "let(u => $.data.default_user) -> $.data.multiconfig.values().select('{0}:{1}'.format($.CephClusterName, $u))",
            ceph,
            "format",
        ),
        refused("str('{0}'.format($.data).split('/')[-1])", json!("192.0.2.0/24"), "format"),
    ];
    cases.push(Case {
        version: LATEST,
        snippet: json!({"yaql": {"expression": {"get_param": "expression"}, "data": {"get_param": ["numbers", "n"]}}}),
        expect: Expect::Same(None),
    });
    cases
}

/// Heat's limits, argument checks and version gate.
fn limit_cases() -> Vec<Case> {
    let long: Vec<i64> = (0..250).collect();
    vec![
        refused("range(1000000)", json!({}), "Collection length exceeds 200"),
        refused("$.data.select($)", json!(long), "Collection length exceeds 200"),
        refused("$.data", json!(long), "Collection length exceeds 200"),
        same("$.data.len()", json!(long)),
        refused("'a' * 20000", json!({}), "Expression consumed too much memory"),
        refused("let(s => 'abcdefghij' * 990) -> $s + $s", json!({}), "Expression consumed too much memory"),
        same("'a' * 9000", json!({})),
        refused("[1] * 300", json!({}), "Collection length exceeds 200"),
        Case {
            version: LATEST,
            snippet: json!({"yaql": {"expression": 1}}),
            expect: Expect::Same(Some("must contain a string")),
        },
        Case {
            version: LATEST,
            snippet: json!({"yaql": {"data": {}}}),
            expect: Expect::Same(Some("syntax should be")),
        },
        Case {
            version: LATEST,
            snippet: json!({"yaql": {"expression": "1", "other": 1}}),
            expect: Expect::Same(Some("syntax should be")),
        },
        Case { version: LATEST, snippet: json!({"yaql": ["1"]}), expect: Expect::Same(Some("must be a map")) },
        Case { version: LATEST, snippet: json!({"yaql": {"expression": "$.data"}}), expect: Expect::Same(None) },
        Case { version: "2016-10-14", snippet: yaql("$.data.sum()", json!([1, 2])), expect: Expect::Same(None) },
    ]
}

/// Heat's answers, one per case, from the heat venv's python.
fn heat_answers(cases: &[Case]) -> Vec<Value> {
    let input: Vec<Value> = cases
        .iter()
        .map(|case| json!({"version": case.version, "parameters": parameters(), "snippet": case.snippet}))
        .collect();
    match peers::heat_python("hot_eval.py", &Value::Array(input)) {
        Value::Array(answers) if answers.len() == cases.len() => answers,
        other => panic!("hot_eval.py answered {other}"),
    }
}

fn shim_answer(case: &Case) -> Result<Value, String> {
    let parameters: BTreeMap<String, Value> = match parameters() {
        Value::Object(map) => map.into_iter().map(|(name, spec)| (name, spec["value"].clone())).collect(),
        _ => unreachable!("parameters are a map"),
    };
    evaluate_snippet(case.version, &serde_json::Map::new(), &parameters, &case.snippet)
}

fn disagreements(cases: &[Case]) -> Vec<String> {
    let answers = heat_answers(cases);
    let mut found = Vec::new();
    for (case, heat) in cases.iter().zip(answers) {
        let shim = shim_answer(case);
        let heat_error = heat.get("error").and_then(Value::as_str);
        let agree = match (case.expect, &shim, heat_error) {
            (Expect::Same(_), Ok(value), None) => Some(value) == heat.get("value"),
            (Expect::Same(None), Err(_), Some(_)) => true,
            (Expect::Same(Some(needle)), Err(message), Some(_)) => message.contains(needle),
            (Expect::ShimRefuses(needle), Err(message), None) => message.contains(needle),
            _ => false,
        };
        if !agree {
            found.push(format!("{}: heat {heat}, shim {shim:?}", case.snippet));
        }
    }
    found
}

fn assert_agree(cases: Vec<Case>) {
    let found = disagreements(&cases);
    assert!(found.is_empty(), "{} of {} disagree:\n{}", found.len(), cases.len(), found.join("\n"));
}

#[test]
fn operators_agree_with_heat() {
    assert_agree(operator_cases());
}

#[test]
fn library_functions_agree_with_heat() {
    assert_agree(library_cases());
}

#[test]
fn tripleo_shaped_expressions_agree_with_heat() {
    assert_agree(tripleo_cases());
}

#[test]
fn limits_and_arguments_agree_with_heat() {
    assert_agree(limit_cases());
}

#[test]
fn before_2016_10_14_yaql_is_not_a_function() {
    let case = Case { version: "2016-04-08", snippet: yaql("1", json!({})), expect: Expect::Same(None) };
    let answers = heat_answers(std::slice::from_ref(&case));
    // Heat keeps the unknown function name as data; the shim refuses it (docs/templates.md).
    assert_eq!(answers[0]["value"], case.snippet);
    let message = shim_answer(&case).expect_err("the shim refuses yaql before 2016-10-14");
    assert!(message.contains("is not available in heat_template_version 2016-04-08"), "{message}");
}
