//! MIME header parameters as Python's `email` package (compat32) reads and writes them, which
//! Heat's MultipartMime goes through: `Message.get_param` (email.message._parseparam, its
//! quote counting included, and email.utils.decode_params with RFC 2231 continuations),
//! `email.utils.unquote`/`quote`, `collapse_rfc2231_value`, and `_formatparam`. Only the three
//! charsets Python always has by many names (UTF-8, ASCII, Latin-1) are decoded; another one
//! Python would know is refused rather than guessed.

use std::collections::HashMap;

use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum ParamError {
    #[error("charset {charset:?} of an RFC 2231 parameter is not one anneal decodes (UTF-8, ASCII, Latin-1)")]
    UnsupportedCharset { charset: String },
    #[error("parameter {name:?} mixes numbered and unnumbered RFC 2231 sections (Python's email fails on it)")]
    MixedSections { name: String },
    #[error("a parameter value has characters {charset} cannot encode (Python's email fails on it)")]
    Unencodable { charset: String },
}

/// A parameter's value: a string as written (quoted or not), or an RFC 2231 one.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    Plain(String),
    Encoded { charset: Option<String>, language: Option<String>, text: String },
}

/// Python's `str.isspace`: Rust's whitespace and the four separator controls.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

pub fn py_strip(text: &str) -> &str {
    text.trim_matches(is_py_space)
}

pub fn py_rstrip(text: &str) -> &str {
    text.trim_end_matches(is_py_space)
}

/// email.utils.unquote: one pair of `"` (unescaping `\\` and `\"`) or `<>` removed.
pub fn unquote(text: &str) -> String {
    if text.len() > 1 {
        if let Some(inner) = text.strip_prefix('"').and_then(|rest| rest.strip_suffix('"')) {
            return inner.replace("\\\\", "\\").replace("\\\"", "\"");
        }
        if let Some(inner) = text.strip_prefix('<').and_then(|rest| rest.strip_suffix('>')) {
            return inner.to_owned();
        }
    }
    text.to_owned()
}

/// email.utils.quote.
pub fn quote(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

/// email.message._parseparam: `;`-separated, a `;` after an odd number of quotes (less the
/// escaped ones) not separating; names lower-cased. Python counts from the item's start at each
/// `;`; the counts are carried along here, so a long header stays linear work.
fn split_params(value: &str) -> Vec<String> {
    let mut rest = value;
    let mut items = Vec::new();
    loop {
        let mut end = rest.find(';');
        let (mut counted, mut open_quotes) = (0, 0);
        while let Some(at) = end.filter(|&at| at > 0) {
            let piece = &rest[counted..at];
            open_quotes += piece.matches('"').count() - piece.matches("\\\"").count();
            counted = at;
            if open_quotes % 2 == 0 {
                break;
            }
            end = rest[at + 1..].find(';').map(|next| at + 1 + next);
        }
        let end = end.unwrap_or(rest.len());
        let item = &rest[..end];
        let item = match item.split_once('=') {
            Some((name, value)) => format!("{}={}", py_strip(name).to_lowercase(), py_strip(value)),
            None => item.to_owned(),
        };
        items.push(py_strip(&item).to_owned());
        match rest[end..].strip_prefix(';') {
            Some(after) => rest = after,
            None => return items,
        }
    }
}

/// Message._get_params_preserve: the header's parameters, RFC 2231 ones decoded and put last.
pub fn params(value: &str) -> Result<Vec<(String, ParamValue)>, ParamError> {
    let mut items = split_params(value).into_iter().map(|item| match item.split_once('=') {
        Some((name, value)) => (py_strip(name).to_owned(), py_strip(value).to_owned()),
        None => (py_strip(&item).to_owned(), String::new()),
    });
    let Some((first_name, first_value)) = items.next() else { return Ok(Vec::new()) };
    let mut decoded = vec![(first_name, ParamValue::Plain(first_value))];
    // Each name's sections, in order of first appearance (`positions` indexes them by name).
    let mut sectioned: Vec<(String, Vec<Section>)> = Vec::new();
    let mut positions: HashMap<String, usize> = HashMap::new();
    for (name, value) in items {
        let value = unquote(&value);
        match rfc2231_section(&name) {
            Some((base, number)) => {
                let section = Section { number: number.map(str::to_owned), value, encoded: name.ends_with('*') };
                match positions.get(base) {
                    Some(&position) => sectioned[position].1.push(section),
                    None => {
                        positions.insert(base.to_owned(), sectioned.len());
                        sectioned.push((base.to_owned(), vec![section]));
                    }
                }
            }
            None => decoded.push((name, ParamValue::Plain(format!("\"{}\"", quote(&value))))),
        }
    }
    for (name, sections) in sectioned {
        decoded.push((name.clone(), joined_sections(name, sections)?));
    }
    Ok(decoded)
}

/// One RFC 2231 section of a parameter (`name*0=`, `name*1*=`, or `name*=`).
struct Section {
    number: Option<String>,
    value: String,
    /// `%`-encoded (the name ends in `*`).
    encoded: bool,
}

impl Section {
    /// The number as Python's `int` orders it: digits without leading zeros, shorter first.
    fn number_order(&self) -> (usize, &str) {
        let digits = self.number.as_deref().unwrap_or_default().trim_start_matches('0');
        (digits.len(), digits)
    }
}

/// decode_params for one name: its sections in number order, %-decoded where encoded; with an
/// encoded one, `charset'language'` leads the whole value.
fn joined_sections(name: String, mut sections: Vec<Section>) -> Result<ParamValue, ParamError> {
    let numbered = sections.iter().filter(|section| section.number.is_some()).count();
    if numbered != 0 && numbered != sections.len() {
        return Err(ParamError::MixedSections { name });
    }
    // Python sorts (number, value, encoded) tuples, the number as an integer.
    sections.sort_by(|a, b| {
        let order = a.number_order().cmp(&b.number_order());
        order.then_with(|| a.value.cmp(&b.value)).then(a.encoded.cmp(&b.encoded))
    });
    let extended = sections.iter().any(|section| section.encoded);
    let joined: String = sections
        .into_iter()
        .map(|section| if section.encoded { percent_decoded(&section.value) } else { section.value })
        .collect();
    let value = quote(&joined);
    if !extended {
        return Ok(ParamValue::Plain(format!("\"{value}\"")));
    }
    let mut fields = value.splitn(3, '\'');
    match (fields.next(), fields.next(), fields.next()) {
        (Some(charset), Some(language), Some(text)) => Ok(ParamValue::Encoded {
            charset: Some(charset.to_owned()),
            language: Some(language.to_owned()),
            text: format!("\"{text}\""),
        }),
        _ => Ok(ParamValue::Encoded { charset: None, language: None, text: format!("\"{value}\"") }),
    }
}

/// utils.rfc2231_continuation (`name*`, `name*0`, `name*0*`; ASCII word characters): the name
/// and the section number.
fn rfc2231_section(name: &str) -> Option<(&str, Option<&str>)> {
    let (base, after) = name.split_once('*')?;
    if base.is_empty() || !base.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    if after.is_empty() {
        return Some((base, None));
    }
    let number = after.strip_suffix('*').unwrap_or(after);
    (!number.is_empty() && number.chars().all(|c| c.is_ascii_digit())).then_some((base, Some(number)))
}

/// urllib.parse.unquote(value, encoding='latin-1'): each `%XX` becomes the character XX.
fn percent_decoded(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let hex = rest.get(at + 1..at + 3).filter(|hex| hex.chars().all(|c| c.is_ascii_hexdigit()));
        match hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 3..];
            }
            None => {
                out.push('%');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Message.get_param(name, header=...) with `unquote=True`: the first parameter of that name.
pub fn get_param(header: Option<&str>, name: &str) -> Result<Option<ParamValue>, ParamError> {
    let Some(header) = header else { return Ok(None) };
    let name = name.to_lowercase();
    let found = params(header)?.into_iter().find(|(key, _)| key.to_lowercase() == name);
    Ok(found.map(|(_, value)| unquoted(value)))
}

/// email.message._unquotevalue: the value (an RFC 2231 one's text) unquoted.
pub fn unquoted(value: ParamValue) -> ParamValue {
    match value {
        ParamValue::Plain(text) => ParamValue::Plain(unquote(&text)),
        ParamValue::Encoded { charset, language, text } => {
            ParamValue::Encoded { charset, language, text: unquote(&text) }
        }
    }
}

/// The codecs decoded here, of those Python looks up by name.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Codec {
    Utf8,
    Ascii,
    Latin1,
}

/// codecs.lookup: `Ok(None)` where Python raises LookupError (an empty name).
fn codec(charset: &str) -> Result<Option<Codec>, ParamError> {
    // encodings.normalize_encoding after the lower-casing: runs of punctuation become `_`.
    let mut name = String::new();
    let mut punctuation = false;
    for c in charset.to_lowercase().chars() {
        if c.is_alphanumeric() || c == '.' {
            if punctuation && !name.is_empty() {
                name.push('_');
            }
            if c.is_ascii() {
                name.push(c);
            }
            punctuation = false;
        } else {
            punctuation = true;
        }
    }
    let underscored = name.replace('.', "_");
    let known = |names: &[&str]| names.contains(&name.as_str()) || names.contains(&underscored.as_str());
    if name.is_empty() {
        Ok(None)
    } else if known(&["utf_8", "cp65001", "u8", "utf", "utf8", "utf8_ucs2", "utf8_ucs4"]) {
        Ok(Some(Codec::Utf8))
    } else if known(&[
        "ascii",
        "646",
        "ansi_x3.4_1968",
        "ansi_x3.4_1986",
        "ansi_x3_4_1968",
        "cp367",
        "csascii",
        "ibm367",
        "iso646_us",
        "iso_646.irv_1991",
        "iso_ir_6",
        "us",
        "us_ascii",
    ]) {
        Ok(Some(Codec::Ascii))
    } else if known(&[
        "latin_1",
        "8859",
        "cp819",
        "csisolatin1",
        "ibm819",
        "iso8859",
        "iso8859_1",
        "iso_8859_1",
        "iso_8859_1_1987",
        "iso_ir_100",
        "l1",
        "latin",
        "latin1",
    ]) {
        Ok(Some(Codec::Latin1))
    } else {
        Err(ParamError::UnsupportedCharset { charset: charset.to_owned() })
    }
}

/// email.utils.collapse_rfc2231_value: an RFC 2231 value's characters taken as bytes
/// (`raw-unicode-escape`) and decoded with its charset (US-ASCII when it has none), errors
/// replaced; an unknown charset leaves the text unquoted.
pub fn collapse_rfc2231_value(value: ParamValue) -> Result<String, ParamError> {
    let (charset, text) = match value {
        ParamValue::Plain(text) => return Ok(unquote(&text)),
        ParamValue::Encoded { charset, text, .. } => (charset.unwrap_or_else(|| "us-ascii".to_owned()), text),
    };
    let mut bytes = Vec::with_capacity(text.len());
    for c in text.chars() {
        match u8::try_from(u32::from(c)) {
            Ok(byte) => bytes.push(byte),
            Err(_) if u32::from(c) <= 0xffff => bytes.extend(format!("\\u{:04x}", u32::from(c)).bytes()),
            Err(_) => bytes.extend(format!("\\U{:08x}", u32::from(c)).bytes()),
        }
    }
    Ok(match codec(&charset)? {
        None => unquote(&text),
        Some(Codec::Utf8) => String::from_utf8_lossy(&bytes).into_owned(),
        Some(Codec::Ascii) => {
            bytes.iter().map(|&byte| if byte.is_ascii() { char::from(byte) } else { '\u{fffd}' }).collect()
        }
        Some(Codec::Latin1) => bytes.iter().copied().map(char::from).collect(),
    })
}

/// email.message._formatparam with quoting: `name="value"`, `name*=utf-8''…` when not ASCII,
/// the bare name when empty; an RFC 2231 value re-encoded (email.utils.encode_rfc2231).
pub fn format_param(name: &str, value: &ParamValue) -> Result<String, ParamError> {
    match value {
        ParamValue::Plain(text) if text.is_empty() => Ok(name.to_owned()),
        ParamValue::Plain(text) if text.is_ascii() => Ok(format!("{name}=\"{}\"", quote(text))),
        ParamValue::Plain(text) => Ok(format!("{name}*=utf-8''{}", url_quoted(text, Codec::Utf8)?)),
        ParamValue::Encoded { charset, language, text } => {
            let codec = match charset.as_deref() {
                Some(charset) => codec(charset)?.unwrap_or(Codec::Ascii),
                None => Codec::Ascii,
            };
            let quoted = url_quoted(text, codec)?;
            if charset.is_none() && language.is_none() {
                return Ok(format!("{name}*={quoted}"));
            }
            let charset = charset.as_deref().unwrap_or_default();
            Ok(format!("{name}*={charset}'{}'{quoted}", language.as_deref().unwrap_or_default()))
        }
    }
}

/// urllib.parse.quote(text, safe=''): bytes in `codec`, all but letters, digits and `_.-~`
/// as `%XX`.
fn url_quoted(text: &str, codec: Codec) -> Result<String, ParamError> {
    let unencodable = || ParamError::Unencodable { charset: format!("{codec:?}") };
    let bytes: Vec<u8> = match codec {
        Codec::Utf8 => text.as_bytes().to_vec(),
        Codec::Ascii if text.is_ascii() => text.as_bytes().to_vec(),
        Codec::Latin1 => {
            text.chars().map(|c| u8::try_from(u32::from(c))).collect::<Result<_, _>>().map_err(|_| unencodable())?
        }
        Codec::Ascii => return Err(unencodable()),
    };
    Ok(bytes
        .iter()
        .map(|&byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => char::from(byte).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values are Python 3.11's email.message and email.utils.
    #[test]
    fn reads_and_writes_parameters_as_python_email_does() {
        assert_eq!(
            split_params("text/plain; A = \"x;y\"; b=2; \"odd;c=3"),
            ["text/plain", "a=\"x;y\"", "b=2", "\"odd;c=3"]
        );
        let sections = params("x; t*1=b; t*0*=utf-8''%C3%A9; t*10=z; t*2=c").unwrap();
        let encoded = ParamValue::Encoded {
            charset: Some("utf-8".into()),
            language: Some(String::new()),
            text: "\"\u{c3}\u{a9}bcz\"".into(),
        };
        assert_eq!(sections, [("x".to_owned(), ParamValue::Plain(String::new())), ("t".to_owned(), encoded.clone())]);
        assert_eq!(collapse_rfc2231_value(unquoted(encoded)).unwrap(), "\u{e9}bcz");
        let format = |name: &str, value: ParamValue| format_param(name, &value).unwrap();
        assert_eq!(format("filename", ParamValue::Plain("a\"b\\c".into())), "filename=\"a\\\"b\\\\c\"");
        assert_eq!(format("x", ParamValue::Plain(String::new())), "x");
        assert_eq!(format("n", ParamValue::Plain("\u{e9}".into())), "n*=utf-8''%C3%A9");
        let latin =
            ParamValue::Encoded { charset: Some("latin-1".into()), language: Some("en".into()), text: "\u{e9}".into() };
        assert_eq!(format("n", latin), "n*=latin-1'en'%E9");
    }

    /// An odd quote before 200,000 `;`, and as many sectioned names: Python's quote counting
    /// is quadratic there, this is not.
    #[test]
    fn long_headers_are_linear_work() {
        let started = std::time::Instant::now();
        let quoted = format!("text/plain; \"{}", ";".repeat(200_000));
        assert_eq!(split_params(&quoted).len(), 2);
        let sectioned: String = (0..200_000).map(|index| format!("; n{index}*0=x")).collect();
        assert_eq!(params(&format!("text/plain{sectioned}")).unwrap().len(), 200_001);
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    }
}
