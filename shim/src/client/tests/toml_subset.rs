//! A strict parser for the TOML subset `formats` writes (comments, `[table]`, `[[array]]`,
//! `key = "basic string" | integer | [array]`), so the tests can check that the generated agent
//! config is TOML without a `toml` dependency in the shim. Anything outside the subset is an
//! error, never silently accepted.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum TomlValue {
    String(String),
    Integer(i64),
    Array(Vec<TomlValue>),
}

/// One table: `[name]` or one element of `[[name]]`; keys before any header are table "".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TomlTable {
    pub name: String,
    pub array: bool,
    pub entries: BTreeMap<String, TomlValue>,
}

pub(super) fn parse(text: &str) -> Result<Vec<TomlTable>, String> {
    let mut tables = vec![TomlTable { name: String::new(), array: false, entries: BTreeMap::new() }];
    for (index, raw_line) in text.lines().enumerate() {
        let line = raw_line.trim();
        let fail = |reason: &str| format!("line {}: {reason}: {raw_line:?}", index + 1);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix("[[").and_then(|rest| rest.strip_suffix("]]")) {
            check_bare_key(name).map_err(|reason| fail(&reason))?;
            tables.push(TomlTable { name: name.to_string(), array: true, entries: BTreeMap::new() });
        } else if let Some(name) = line.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
            check_bare_key(name).map_err(|reason| fail(&reason))?;
            if tables.iter().any(|table| table.name == name) {
                return Err(fail("table defined twice"));
            }
            tables.push(TomlTable { name: name.to_string(), array: false, entries: BTreeMap::new() });
        } else {
            let (key, value) = line.split_once('=').ok_or_else(|| fail("expected key = value"))?;
            let key = key.trim();
            check_bare_key(key).map_err(|reason| fail(&reason))?;
            let (value, rest) = parse_value(value.trim_start()).map_err(|reason| fail(&reason))?;
            let rest = rest.trim_start();
            if !rest.is_empty() && !rest.starts_with('#') {
                return Err(fail("text after the value"));
            }
            let table = tables.last_mut().ok_or_else(|| fail("no table"))?;
            if table.entries.insert(key.to_string(), value).is_some() {
                return Err(fail("duplicate key"));
            }
        }
    }
    Ok(tables)
}

fn check_bare_key(key: &str) -> Result<(), String> {
    let bare =
        !key.is_empty() && key.chars().all(|character| character.is_ascii_alphanumeric() || "_-".contains(character));
    if bare { Ok(()) } else { Err(format!("not a bare key: {key:?}")) }
}

/// A value and the text after it.
fn parse_value(text: &str) -> Result<(TomlValue, &str), String> {
    if let Some(rest) = text.strip_prefix('"') {
        let (string, rest) = parse_basic_string(rest)?;
        return Ok((TomlValue::String(string), rest));
    }
    if let Some(mut rest) = text.strip_prefix('[') {
        let mut items = Vec::new();
        loop {
            rest = rest.trim_start();
            if let Some(after) = rest.strip_prefix(']') {
                return Ok((TomlValue::Array(items), after));
            }
            let (item, after) = parse_value(rest)?;
            items.push(item);
            rest = after.trim_start();
            if let Some(after) = rest.strip_prefix(',') {
                rest = after;
            } else if !rest.starts_with(']') {
                return Err("expected ',' or ']' in an array".to_string());
            }
        }
    }
    let end = text.find(|character: char| !(character.is_ascii_digit() || character == '-')).unwrap_or(text.len());
    let number = text[..end].parse::<i64>().map_err(|_| format!("not a value: {text:?}"))?;
    Ok((TomlValue::Integer(number), &text[end..]))
}

fn parse_basic_string(text: &str) -> Result<(String, &str), String> {
    let mut result = String::new();
    let mut characters = text.char_indices();
    while let Some((index, character)) = characters.next() {
        match character {
            '"' => return Ok((result, &text[index + 1..])),
            '\\' => {
                let (_, escape) = characters.next().ok_or("unfinished escape")?;
                match escape {
                    '"' => result.push('"'),
                    '\\' => result.push('\\'),
                    'n' => result.push('\n'),
                    't' => result.push('\t'),
                    'r' => result.push('\r'),
                    'b' => result.push('\u{8}'),
                    'f' => result.push('\u{c}'),
                    'u' | 'U' => {
                        let digits = if escape == 'u' { 4 } else { 8 };
                        let hex: String =
                            (0..digits).filter_map(|_| characters.next().map(|(_, digit)| digit)).collect();
                        let code = u32::from_str_radix(&hex, 16).map_err(|_| format!("bad \\u escape {hex:?}"))?;
                        result.push(char::from_u32(code).ok_or("escape is not a character")?);
                    }
                    other => return Err(format!("unknown escape \\{other}")),
                }
            }
            character if character.is_control() && character != '\t' => {
                return Err("control character in a string".to_string());
            }
            character => result.push(character),
        }
    }
    Err("unterminated string".to_string())
}

#[test]
fn the_subset_parser_is_strict() {
    let tables =
        parse("# c\n[agent]\na = \"x\\\"y\\u0001\" # trailing\nb = [\"p\", \"q\"]\nc = 30\n[[source]]\nk = \"v\"\n")
            .unwrap();
    assert_eq!(tables[1].entries["a"], TomlValue::String("x\"y\u{1}".to_string()));
    assert_eq!(
        tables[1].entries["b"],
        TomlValue::Array(vec![TomlValue::String("p".into()), TomlValue::String("q".into())])
    );
    assert_eq!(tables[1].entries["c"], TomlValue::Integer(30));
    assert!(tables[2].array);
    for bad in ["a = \"x", "a = x", "[a b]", "a = 1\na = 2", "a = \"x\" y", "a = \"\\q\"", "just text"] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}
