//! `yaml.safe_load` as PyYAML reads it, for the YAML heat-agents' hooks and os-apply-config read
//! with it (docker-cmd configs given as text, os-apply-config's `.oac` control files): one document, plain
//! scalars resolved by YAML 1.1's rules (`yes`/`no`/`on`/`off` are booleans, `010` is octal 8,
//! `1_000` is 1000, `1:30` is 90, `1e3` is a string), quoted scalars always strings, anchors and
//! aliases, `<<` merge keys, duplicate keys (the last value wins, in the first key's place). The
//! result is JSON: non-string keys become their Python `str()`, `.inf`/`.nan` the text Python
//! prints for them, timestamps stay the text they were written as. What anchors and aliases copy
//! is charged to the text's byte budget (`anneal_protocol::alias_budget`), as the shim's reader
//! charges it.

use std::collections::HashMap;

use anneal_protocol::alias_budget::{self, AliasBudget, NODE_BYTES};
use serde_json::{Map, Value};
use yaml_rust2::parser::{Event, EventReceiver, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

use anneal_protocol::pyjson;

/// Deeper nesting is refused, so a hostile config cannot exhaust the stack.
const MAX_DEPTH: usize = 128;
/// More nodes (counting every alias expansion) are refused, however short their text.
const MAX_NODES: usize = 1_000_000;
/// The handle yaml-rust2 gives `!!` tags.
const CORE_TAGS: &str = "tag:yaml.org,2002:";

/// The single document of `text`, or why PyYAML's `safe_load` would not give one.
pub(crate) fn safe_load(text: &str) -> Result<Value, String> {
    let mut sink = Events::default();
    Parser::new_from_str(text).load(&mut sink, true).map_err(|error| error.to_string())?;
    let mut builder = Builder {
        events: sink.0.into_iter(),
        anchors: HashMap::new(),
        nodes: 0,
        bytes: 0,
        budget: AliasBudget::for_text(text.len()),
    };
    let mut documents = Vec::new();
    while let Some(event) = builder.events.next() {
        if event == Event::DocumentStart {
            documents.push(builder.node(0)?);
        }
    }
    match documents.len() {
        0 => Err("the config holds no YAML document".into()),
        1 => Ok(documents.remove(0)),
        _ => Err("expected a single document in the stream, found several".into()),
    }
}

#[derive(Default)]
struct Events(Vec<Event>);

impl EventReceiver for Events {
    fn on_event(&mut self, event: Event) {
        self.0.push(event);
    }
}

struct Builder {
    events: std::vec::IntoIter<Event>,
    /// Anchored nodes by yaml-rust2's anchor id.
    anchors: HashMap<usize, Anchored>,
    /// Nodes built so far, copies included.
    nodes: usize,
    /// What the nodes built so far cost (`alias_budget`), copies included.
    bytes: usize,
    /// What anchors and aliases may still copy.
    budget: AliasBudget,
}

/// An anchored node kept for aliases, with its node count and what a copy of it costs.
struct Anchored {
    value: Value,
    nodes: usize,
    bytes: usize,
}

impl Builder {
    fn node(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("the config nests deeper than {MAX_DEPTH} levels"));
        }
        let (nodes_before, bytes_before) = (self.nodes, self.bytes);
        let (value, anchor) = match self.events.next() {
            Some(Event::Scalar(text, style, anchor, tag)) => {
                self.count(1, alias_budget::scalar_bytes(text.len()))?;
                (scalar(text, style, tag.as_ref())?, anchor)
            }
            Some(Event::Alias(id)) => (self.alias(id)?, 0),
            Some(Event::SequenceStart(anchor, tag)) => {
                check_collection_tag(tag.as_ref(), "seq")?;
                self.count(1, NODE_BYTES)?;
                (self.sequence(depth)?, anchor)
            }
            Some(Event::MappingStart(anchor, tag)) => {
                check_collection_tag(tag.as_ref(), "map")?;
                self.count(1, NODE_BYTES)?;
                (Value::Object(self.mapping(depth)?), anchor)
            }
            other => return Err(format!("unexpected YAML event {other:?}")),
        };
        if anchor > 0 {
            // The copy kept for aliases is charged too: anchors nested in anchors would otherwise
            // copy the text once per level.
            let bytes = self.bytes - bytes_before;
            self.budget.charge(bytes).map_err(|exceeded| exceeded.to_string())?;
            self.anchors.insert(anchor, Anchored { value: value.clone(), nodes: self.nodes - nodes_before, bytes });
        }
        Ok(value)
    }

    /// A copy of the anchored node `id`, charged before it is made.
    fn alias(&mut self, id: usize) -> Result<Value, String> {
        let anchored = self.anchors.get(&id).ok_or("an alias names no anchor")?;
        let (nodes, bytes) = (anchored.nodes, anchored.bytes);
        self.budget.charge(bytes).map_err(|exceeded| exceeded.to_string())?;
        self.count(nodes, bytes)?;
        Ok(self.anchors[&id].value.clone())
    }

    fn count(&mut self, nodes: usize, bytes: usize) -> Result<(), String> {
        self.nodes += nodes;
        self.bytes = self.bytes.saturating_add(bytes);
        if self.nodes > MAX_NODES {
            return Err(format!("the config expands to more than {MAX_NODES} YAML nodes"));
        }
        Ok(())
    }

    fn sequence(&mut self, depth: usize) -> Result<Value, String> {
        let mut items = Vec::new();
        loop {
            if self.events.as_slice().first() == Some(&Event::SequenceEnd) {
                self.events.next();
                return Ok(Value::Array(items));
            }
            items.push(self.node(depth + 1)?);
        }
    }

    /// PyYAML's `flatten_mapping` then `construct_mapping`: the pairs merged in by `<<` first,
    /// then the mapping's own, each assigned in turn into a dict.
    fn mapping(&mut self, depth: usize) -> Result<Map<String, Value>, String> {
        let mut merged = Vec::new();
        let mut own = Vec::new();
        loop {
            match self.events.as_slice().first() {
                Some(Event::MappingEnd) => {
                    self.events.next();
                    break;
                }
                Some(Event::Scalar(text, TScalarStyle::Plain, _, None)) if text == "<<" => {
                    self.node(depth + 1)?;
                    merged.extend(merge_pairs(self.node(depth + 1)?)?);
                }
                _ => {
                    let key = key_text(self.node(depth + 1)?)?;
                    own.push((key, self.node(depth + 1)?));
                }
            }
        }
        let mut map = Map::new();
        for (key, value) in merged.into_iter().chain(own) {
            map.insert(key, value);
        }
        Ok(map)
    }
}

/// The pairs a `<<` value merges in: a mapping's, or those of a list of mappings with the
/// earlier ones last (so they win), as PyYAML orders them.
fn merge_pairs(value: Value) -> Result<Vec<(String, Value)>, String> {
    let not_mergeable = || "a << merge key needs a mapping or a list of mappings".to_string();
    match value {
        Value::Object(map) => Ok(map.into_iter().collect()),
        Value::Array(items) => {
            let mut pairs = Vec::new();
            for item in items.into_iter().rev() {
                let Value::Object(map) = item else { return Err(not_mergeable()) };
                pairs.extend(map);
            }
            Ok(pairs)
        }
        _ => Err(not_mergeable()),
    }
}

/// A mapping key as a JSON key: a string as is, another scalar as Python's `str()` of it.
fn key_text(key: Value) -> Result<String, String> {
    match key {
        Value::String(text) => Ok(text),
        Value::Array(_) | Value::Object(_) => Err("found an unhashable (list or mapping) key".into()),
        scalar => Ok(pyjson::python_str(&scalar)),
    }
}

fn check_collection_tag(tag: Option<&Tag>, expected: &str) -> Result<(), String> {
    match tag {
        None => Ok(()),
        Some(tag) if tag.handle == CORE_TAGS && tag.suffix == expected => Ok(()),
        Some(tag) => Err(format!("YAML tag {}{} is not supported here", tag.handle, tag.suffix)),
    }
}

fn scalar(text: String, style: TScalarStyle, tag: Option<&Tag>) -> Result<Value, String> {
    let Some(tag) = tag else {
        return Ok(if style == TScalarStyle::Plain { resolve_plain(text) } else { Value::String(text) });
    };
    if tag.handle != CORE_TAGS {
        return Err(format!("YAML tag {}{} is not supported here", tag.handle, tag.suffix));
    }
    // An explicit tag applies PyYAML's constructor for it whatever the scalar's style.
    let constructed = match tag.suffix.as_str() {
        "str" => Some(Value::String(text.clone())),
        "null" => Some(Value::Null),
        "bool" => Some(resolve_plain(text.to_lowercase())).filter(Value::is_boolean),
        "int" => resolve_int(&text),
        "float" => resolve_float(&text)
            .or_else(|| text.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number)),
        _ => return Err(format!("YAML tag {}{} is not supported here", tag.handle, tag.suffix)),
    };
    constructed.ok_or_else(|| format!("{text:?} is not a valid !!{}", tag.suffix))
}

/// PyYAML's implicit resolvers and `SafeConstructor` for a plain scalar.
fn resolve_plain(text: String) -> Value {
    match text.as_str() {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => return Value::Bool(true),
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => return Value::Bool(false),
        _ => {}
    }
    if let Some(value) = resolve_int(&text) {
        return value;
    }
    resolve_float(&text).unwrap_or(Value::String(text))
}

/// `[-+]?` then the rest.
fn split_sign(text: &str) -> (bool, &str) {
    match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    }
}

fn all(text: &str, accept: impl Fn(u8) -> bool) -> bool {
    text.bytes().all(accept)
}

fn digit_or_underscore(byte: u8) -> bool {
    byte.is_ascii_digit() || byte == b'_'
}

/// YAML 1.1 ints: `0b1010`, `0o`-less octal `017`, decimal `1_000`, `0x1F`, sexagesimal `1:30`.
fn resolve_int(text: &str) -> Option<Value> {
    let (negative, rest) = split_sign(text);
    let digits = |body: &str| body.replace('_', "");
    let magnitude = if let Some(body) = rest.strip_prefix("0b") {
        (!body.is_empty() && all(body, |b| matches!(b, b'0' | b'1' | b'_'))).then(|| u128_radix(&digits(body), 2))?
    } else if let Some(body) = rest.strip_prefix("0x") {
        (!body.is_empty() && all(body, |b| b.is_ascii_hexdigit() || b == b'_'))
            .then(|| u128_radix(&digits(body), 16))?
    } else if rest == "0" {
        Some(0)
    } else if let Some(body) = rest.strip_prefix('0') {
        (!body.is_empty() && all(body, |b| matches!(b, b'0'..=b'7' | b'_'))).then(|| u128_radix(&digits(body), 8))?
    } else if rest.starts_with(|c: char| c.is_ascii_digit()) && all(rest, digit_or_underscore) {
        u128_radix(&digits(rest), 10)
    } else if is_sexagesimal(rest, false) {
        rest.split(':')
            .try_fold(0u128, |total, part| total.checked_mul(60)?.checked_add(u128_radix(&digits(part), 10)?))
    } else {
        return None;
    }?;
    let text = if negative { format!("-{magnitude}") } else { magnitude.to_string() };
    serde_json::from_str(&text).ok()
}

/// Every digit string but one empty after `0b`/`0x`/`0` (PyYAML itself fails on those).
fn u128_radix(digits: &str, radix: u32) -> Option<u128> {
    if digits.is_empty() {
        return Some(0);
    }
    u128::from_str_radix(digits, radix).ok()
}

/// `[1-9][0-9_]*(?::[0-5]?[0-9])+` (an int), or `[0-9][0-9_]*(?::[0-5]?[0-9])+` then
/// `\.[0-9_]*` (a float, `fraction`).
fn is_sexagesimal(text: &str, fraction: bool) -> bool {
    let (text, tail) = match (fraction, text.find('.')) {
        (true, Some(dot)) => (&text[..dot], &text[dot + 1..]),
        (true, None) => return false,
        (false, _) => (text, ""),
    };
    let mut parts = text.split(':');
    let head = parts.next().unwrap_or_default();
    let head_ok = match head.as_bytes().first() {
        Some(b'1'..=b'9') => all(head, digit_or_underscore),
        Some(b'0') => fraction && all(head, digit_or_underscore),
        _ => false,
    };
    let mut sixties = 0;
    for part in parts {
        let bytes = part.as_bytes();
        let ok = match bytes {
            [last] => last.is_ascii_digit(),
            [first, last] => matches!(first, b'0'..=b'5') && last.is_ascii_digit(),
            _ => false,
        };
        if !ok {
            return false;
        }
        sixties += 1;
    }
    head_ok && sixties > 0 && all(tail, digit_or_underscore)
}

/// YAML 1.1 floats: `1.5`, `1.`, `.5`, `1.0e+3` (the exponent needs its sign), `1:30.5`,
/// `.inf`, `.nan`.
fn resolve_float(text: &str) -> Option<Value> {
    let (negative, rest) = split_sign(text);
    let special = match rest {
        ".inf" | ".Inf" | ".INF" => Some(if negative { "-inf" } else { "inf" }),
        ".nan" | ".NaN" | ".NAN" if rest.len() == text.len() => Some("nan"),
        _ => None,
    };
    if let Some(word) = special {
        // Python's `str()` of the float; JSON has no such number.
        return Some(Value::String(word.into()));
    }
    let magnitude = if is_sexagesimal(rest, true) {
        rest.replace('_', "")
            .split(':')
            .try_fold(0.0f64, |total, part| Some(total * 60.0 + part.parse::<f64>().ok()?))?
    } else if is_decimal_float(rest, rest.len() == text.len()) {
        rest.replace('_', "").parse::<f64>().ok()?
    } else {
        return None;
    };
    serde_json::Number::from_f64(if negative { -magnitude } else { magnitude }).map(Value::Number)
}

/// `[0-9][0-9_]*\.[0-9_]*` or (unsigned) `\.[0-9_]+`, then `(?:[eE][-+][0-9]+)?`.
fn is_decimal_float(text: &str, unsigned: bool) -> bool {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let Some((whole, fraction)) = mantissa.split_once('.') else { return false };
    let mantissa_ok = if whole.is_empty() {
        unsigned && !fraction.is_empty()
    } else {
        whole.starts_with(|c: char| c.is_ascii_digit()) && all(whole, digit_or_underscore)
    };
    let exponent_ok = match exponent {
        None => true,
        Some(exponent) => {
            exponent.len() > 1 && exponent.starts_with(['+', '-']) && all(&exponent[1..], |b| b.is_ascii_digit())
        }
    };
    mantissa_ok && all(fraction, digit_or_underscore) && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plain(text: &str) -> Value {
        resolve_plain(text.to_string())
    }

    #[test]
    fn plain_scalars_resolve_as_pyyaml_resolves_them() {
        for (text, expected) in [
            ("yes", json!(true)),
            ("Off", json!(false)),
            ("~", json!(null)),
            ("010", json!(8)),
            ("0x1F", json!(31)),
            ("0b101", json!(5)),
            ("-1_000", json!(-1000)),
            ("1:30", json!(90)),
            ("08", json!("08")),
            ("0o17", json!("0o17")),
            ("1e3", json!("1e3")),
            ("1.0e+3", json!(1000.0)),
            (".5", json!(0.5)),
            ("1.", json!(1.0)),
            ("1:30.5", json!(90.5)),
            ("-.inf", json!("-inf")),
            ("2001-12-14", json!("2001-12-14")),
            ("+.5", json!("+.5")),
            ("-.nan", json!("-.nan")),
            ("0:30", json!("0:30")),
            ("1:5", json!(65)),
            ("1:60", json!("1:60")),
            ("00", json!(0)),
            ("0b", json!("0b")),
            ("+0x10", json!(16)),
            ("1.5e3", json!("1.5e3")),
            ("+1.", json!(1.0)),
            ("db:/var/lib/db", json!("db:/var/lib/db")),
        ] {
            assert_eq!(plain(text), expected, "{text}");
        }
    }

    #[test]
    fn documents_keep_order_merge_and_take_the_last_duplicate() {
        let text = "base: &base {image: a, user: root}\nweb:\n  <<: *base\n  image: b\n  privileged: 'yes'\nweb2: *base\nbase: {}\n";
        let loaded = safe_load(text).unwrap();
        assert_eq!(
            loaded,
            json!({"base": {}, "web": {"image": "b", "user": "root", "privileged": "yes"},
                   "web2": {"image": "a", "user": "root"}})
        );
        assert_eq!(loaded.as_object().unwrap().keys().collect::<Vec<_>>(), ["base", "web", "web2"]);
        assert_eq!(safe_load("1: {detach: no}").unwrap(), json!({"1": {"detach": false}}));
        assert_eq!(safe_load("a: !!str 010").unwrap(), json!({"a": "010"}));
        assert_eq!(
            safe_load("a: !!float 1\nb: !!int '7'\nc: !!bool 'Yes'").unwrap(),
            json!({"a": 1.0, "b": 7, "c": true})
        );
        let merged = safe_load("a: {<<: [{x: 1, y: 1}, {x: 2, z: 2}], w: 0}").unwrap();
        assert_eq!(merged, json!({"a": {"x": 1, "z": 2, "y": 1, "w": 0}}));
        assert_eq!(merged["a"].as_object().unwrap().keys().collect::<Vec<_>>(), ["x", "z", "y", "w"]);
    }

    #[test]
    fn what_safe_load_refuses_is_an_error() {
        assert!(safe_load("").is_err());
        assert!(safe_load("a: 1\n---\nb: 2\n").is_err());
        assert!(safe_load("a: !custom x").is_err());
        assert!(safe_load("? [a]\n: 1\n").is_err());
        assert!(safe_load("a: [unclosed").is_err());
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n\
                    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n\
                    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n";
        assert!(safe_load(bomb).unwrap_err().contains("more than"));
    }

    /// The shim's bomb of issue 31 as a docker-cmd config: 500 KB aliased 100,000 times, refused
    /// before the copies are made, naming the limit.
    #[test]
    fn long_strings_are_charged_by_their_length_when_aliased() {
        let text = format!("a: &a \"{}\"\nb: [{}]\n", "x".repeat(500_000), ["*a"; 100_000].join(","));
        let started = std::time::Instant::now();
        let error = safe_load(&text).unwrap_err();
        let limit = AliasBudget::for_text(text.len()).limit();
        assert!(error.starts_with(&format!("aliases expand to more than {limit} bytes")), "{error}");
        // Reading the text's 100,000 events takes a moment in a debug build; 50 GB of copies would
        // take far longer, if memory held them.
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
        let long = "y".repeat(100_000);
        let loaded = safe_load(&format!("a: &a {long}\nb: *a\nc: {{<<: {{d: *a}}}}\n")).unwrap();
        assert_eq!(loaded, json!({"a": long, "b": long, "c": {"d": long}}));
        // `*b` copies the two copies of `a` it holds: the third is over this short text's budget.
        let nested = format!("a: &a {}\nb: &b [*a, *a]\nc: [*b, *b, *b]\n", "z".repeat(1000));
        assert!(safe_load(&nested).unwrap_err().starts_with("aliases expand to more than"));
    }
}
