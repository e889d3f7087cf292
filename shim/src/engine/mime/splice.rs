//! The parts Heat's MultipartMime splices in for a part of `type: multipart`
//! (heat.engine.resources.openstack.heat.multi_part.MultipartMime._append_multiparts): the
//! config text parsed by Python's `email.message_from_string` (the compat32 feed parser, ported
//! here line by line: header and boundary recognition, the preamble, repeated boundary lines, the
//! newline a boundary owns, `multipart/digest` defaults), then for each part of the message its
//! raw payload (never decoded: a base64 part stays base64 text), `get_content_subtype()` and
//! `get_filename()`. A text that is not a multipart message splices nothing, as in Heat.
//!
//! Heat splices one level: a part that has parts of its own (a multipart one, or `message/*`)
//! makes Heat's MultipartMime fail, and is refused here. So nothing below the spliced message's
//! own parts is ever parsed: such a part's content is only skipped to its end, which bounds the
//! work on any text to a few passes over its lines however deep it nests.

use thiserror::Error;

use super::params::{self, ParamError};

/// Entities this deep (the message is 0, its parts 1) are skipped, not parsed: Heat fails on
/// the part that holds them anyway.
const SKIPPED_DEPTH: usize = 2;

#[derive(Debug, Error, PartialEq)]
pub enum SpliceError {
    #[error(
        "its part {index} ({content_type}) has parts of its own; MultipartMime splices one level of parts, the \
         message's own (Heat's fails on such a part: 'list' object has no attribute 'encode')"
    )]
    NestedPart { index: usize, content_type: String },
    #[error("its part {index}: {source}")]
    Param { index: usize, source: ParamError },
    #[error("a boundary parameter: {0}")]
    Boundary(ParamError),
}

/// One part as Heat passes it to `_append_part`: payload, subtype, file name (`None` if absent).
#[derive(Debug, Clone, PartialEq)]
pub struct SplicedPart {
    pub text: String,
    pub subtype: String,
    pub filename: Option<String>,
}

/// The parts spliced from `text`: none when it is not a multipart message.
pub fn spliced_parts(text: &str) -> Result<Vec<SplicedPart>, SpliceError> {
    let mut input = Input::new(text);
    let message = parse_entity(&mut input, "text/plain", 0)?;
    let Body::Entities(parts) = message.body else { return Ok(Vec::new()) };
    let mut spliced = Vec::with_capacity(parts.len());
    for (position, part) in parts.into_iter().enumerate() {
        let index = position + 1;
        let content_type = part.content_type();
        let filename = part.filename().map_err(|source| SpliceError::Param { index, source })?;
        let Body::Text(text) = part.body else { return Err(SpliceError::NestedPart { index, content_type }) };
        let subtype = content_type.split_once('/').map(|(_, subtype)| subtype.to_owned()).unwrap_or_default();
        spliced.push(SplicedPart { text, subtype, filename });
    }
    Ok(spliced)
}

/// email.feedparser.BufferedSubFile over the whole text: lines with their line ends, the lines
/// pushed back, and the stack of false-EOF matchers (`""` is the end, real or false).
struct Input<'a> {
    lines: Vec<&'a str>,
    next: usize,
    pushed: Vec<&'a str>,
    ends: Vec<End>,
}

/// What ends an entity early: a boundary line of an enclosing multipart, or a blank line
/// (the header blocks of `message/delivery-status`).
enum End {
    Boundary(String),
    BlankLine,
}

impl End {
    fn matches(&self, line: &str) -> bool {
        match self {
            End::Boundary(separator) => boundary_line(line, separator).is_some(),
            End::BlankLine => starts_with_line_end(line),
        }
    }
}

impl<'a> Input<'a> {
    /// The text split as `StringIO(newline='').readlines()` splits it: after `\n`, `\r\n` or a
    /// lone `\r`.
    fn new(text: &'a str) -> Input<'a> {
        let bytes = text.as_bytes();
        let mut lines = Vec::new();
        let mut start = 0;
        let mut index = 0;
        while index < bytes.len() {
            let end = match bytes[index] {
                b'\n' => index + 1,
                b'\r' if bytes.get(index + 1) == Some(&b'\n') => index + 2,
                b'\r' => index + 1,
                _ => {
                    index += 1;
                    continue;
                }
            };
            lines.push(&text[start..end]);
            start = end;
            index = end;
        }
        if start < text.len() {
            lines.push(&text[start..]);
        }
        Input { lines, next: 0, pushed: Vec::new(), ends: Vec::new() }
    }

    fn readline(&mut self) -> &'a str {
        let line = match self.pushed.pop() {
            Some(line) => line,
            None if self.next < self.lines.len() => {
                self.next += 1;
                self.lines[self.next - 1]
            }
            None => return "",
        };
        // RFC 2046: an enclosing boundary ends every entity inside it.
        if self.ends.iter().rev().any(|end| end.matches(line)) {
            self.pushed.push(line);
            return "";
        }
        line
    }

    fn unreadline(&mut self, line: &'a str) {
        self.pushed.push(line);
    }

    /// The lines up to the (false) end, joined.
    fn rest(&mut self) -> String {
        let mut text = String::new();
        loop {
            let line = self.readline();
            if line.is_empty() {
                return text;
            }
            text.push_str(line);
        }
    }
}

/// A parsed entity (email.message.Message): its raw headers, the type it has without a
/// Content-Type header, and its payload.
struct Entity {
    headers: Vec<(String, String)>,
    default_type: &'static str,
    body: Body,
}

enum Body {
    /// A string payload.
    Text(String),
    /// A list payload: the parts of a multipart, the message inside a `message/*`.
    Entities(Vec<Entity>),
    /// Beyond `SKIPPED_DEPTH`: read past, not parsed.
    Skipped,
}

impl Entity {
    /// Message.get: the first header of that name, its value raw (compat32).
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    /// Message.get_content_type: lower case; `text/plain` when malformed.
    fn content_type(&self) -> String {
        let Some(value) = self.header("content-type") else { return self.default_type.to_owned() };
        let main = value.split_once(';').map_or(value, |(main, _)| main);
        let content_type = params::py_strip(main).to_lowercase();
        if content_type.matches('/').count() == 1 { content_type } else { "text/plain".to_owned() }
    }

    fn maintype(&self) -> String {
        self.content_type().split('/').next().unwrap_or_default().to_owned()
    }

    /// Message.get_boundary.
    fn boundary(&self) -> Result<Option<String>, ParamError> {
        let Some(boundary) = params::get_param(self.header("content-type"), "boundary")? else { return Ok(None) };
        Ok(Some(params::py_rstrip(&params::collapse_rfc2231_value(boundary)?).to_owned()))
    }

    /// Message.get_filename: Content-Disposition's `filename`, else Content-Type's `name`.
    fn filename(&self) -> Result<Option<String>, ParamError> {
        let mut found = params::get_param(self.header("content-disposition"), "filename")?;
        if found.is_none() {
            found = params::get_param(self.header("content-type"), "name")?;
        }
        let Some(filename) = found else { return Ok(None) };
        Ok(Some(params::py_strip(&params::collapse_rfc2231_value(filename)?).to_owned()))
    }
}

/// FeedParser._parsegen: one entity, read up to the input's (false) end.
fn parse_entity(input: &mut Input<'_>, default_type: &'static str, depth: usize) -> Result<Entity, SpliceError> {
    if depth >= SKIPPED_DEPTH {
        while !input.readline().is_empty() {}
        return Ok(Entity { headers: Vec::new(), default_type, body: Body::Skipped });
    }
    let headers = read_headers(input);
    let mut entity = Entity { headers, default_type, body: Body::Skipped };
    let content_type = entity.content_type();
    entity.body = if content_type == "message/delivery-status" {
        Body::Entities(header_blocks(input, depth)?)
    } else if entity.maintype() == "message" {
        Body::Entities(vec![parse_entity(input, "text/plain", depth + 1)?])
    } else if entity.maintype() == "multipart" {
        match entity.boundary().map_err(SpliceError::Boundary)? {
            Some(boundary) => multipart_body(input, &boundary, &content_type, depth)?,
            None => Body::Text(input.rest()),
        }
    } else {
        Body::Text(input.rest())
    };
    Ok(entity)
}

/// The header lines (up to a line that is neither a header nor a continuation; a blank one is
/// dropped, another is the body's first line), then FeedParser._parse_headers.
fn read_headers(input: &mut Input<'_>) -> Vec<(String, String)> {
    let mut lines = Vec::new();
    loop {
        let line = input.readline();
        if line.is_empty() {
            break;
        }
        if !is_header_line(line) {
            if !starts_with_line_end(line) {
                input.unreadline(line);
            }
            break;
        }
        lines.push(line);
    }
    let mut headers = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for (number, line) in lines.iter().copied().enumerate() {
        if line.starts_with([' ', '\t']) {
            // A continuation; one before any header is dropped.
            if !current.is_empty() {
                current.push(line);
            }
            continue;
        }
        headers.extend(header_of(&std::mem::take(&mut current)));
        if line.starts_with("From ") {
            // The envelope line first is dropped; one last is the body's first line; one
            // elsewhere is dropped.
            if number > 0 && number == lines.len() - 1 {
                input.unreadline(line);
                return headers;
            }
            continue;
        }
        // A line starting with a colon has no name: dropped.
        if !line.starts_with(':') {
            current.push(line);
        }
    }
    headers.extend(header_of(&current));
    headers
}

/// Compat32.header_source_parse: the name, and the value with its continuation lines.
fn header_of(lines: &[&str]) -> Option<(String, String)> {
    let (first, continuation) = lines.split_first()?;
    let (name, value) = first.split_once(':')?;
    let mut value = value.trim_start_matches([' ', '\t']).to_owned();
    value.extend(continuation.iter().copied());
    Some((name.to_owned(), value.trim_end_matches(['\r', '\n']).to_owned()))
}

/// feedparser.headerRE: `From `, a name of printable characters but `:` then `:`, or a
/// continuation's leading blank.
fn is_header_line(line: &str) -> bool {
    if line.starts_with("From ") || line.starts_with([' ', '\t']) {
        return true;
    }
    let name_end = line.find(|c: char| !matches!(c, '\x21'..='\x39' | '\x3b'..='\x7e')).unwrap_or(line.len());
    line[name_end..].starts_with(':')
}

fn starts_with_line_end(line: &str) -> bool {
    line.starts_with(['\r', '\n'])
}

/// The multipart branch of _parsegen: the start boundary (a message without one is a string
/// payload, its preamble), then the parts, each up to the next boundary line.
fn multipart_body(
    input: &mut Input<'_>,
    boundary: &str,
    content_type: &str,
    depth: usize,
) -> Result<Body, SpliceError> {
    let separator = format!("--{boundary}");
    let part_type = if content_type == "multipart/digest" { "message/rfc822" } else { "text/plain" };
    let mut preamble = String::new();
    let mut started = false;
    let mut closed = false;
    let mut parts = Vec::new();
    loop {
        let line = input.readline();
        if line.is_empty() {
            break;
        }
        match boundary_line(line, &separator) {
            None => preamble.push_str(line),
            Some(true) => {
                closed = true;
                break;
            }
            Some(false) if !started => {
                started = true;
                input.unreadline(line);
            }
            Some(false) => {
                // Repeated boundary lines (the closing one too) make no empty parts.
                loop {
                    let next = input.readline();
                    if boundary_line(next, &separator).is_none() {
                        input.unreadline(next);
                        break;
                    }
                }
                input.ends.push(End::Boundary(separator.clone()));
                let part = parse_entity(input, part_type, depth + 1);
                input.ends.pop();
                parts.push(without_boundary_newline(part?));
            }
        }
    }
    if closed || !started {
        // The epilogue, or what follows a closing boundary before any start: read, not kept.
        input.rest();
    }
    Ok(if started { Body::Entities(parts) } else { Body::Text(preamble) })
}

/// RFC 2046: the line end before a boundary belongs to the boundary, so a part's string
/// payload loses one; not a multipart's (Python strips its epilogue instead).
fn without_boundary_newline(mut part: Entity) -> Entity {
    if part.maintype() != "multipart"
        && let Body::Text(text) = &mut part.body
    {
        let line_end = if text.ends_with("\r\n") { 2 } else { usize::from(text.ends_with(['\r', '\n'])) };
        text.truncate(text.len() - line_end);
    }
    part
}

/// `message/delivery-status`: blocks of headers, each ended by a blank line.
fn header_blocks(input: &mut Input<'_>, depth: usize) -> Result<Vec<Entity>, SpliceError> {
    let mut blocks = Vec::new();
    loop {
        input.ends.push(End::BlankLine);
        let block = parse_entity(input, "text/plain", depth + 1);
        input.ends.pop();
        blocks.push(block?);
        // The blank line, then whether anything follows.
        input.readline();
        let next = input.readline();
        if next.is_empty() {
            return Ok(blocks);
        }
        input.unreadline(next);
    }
}

/// The boundary pattern of _parsegen (`--boundary`, `--` for the closing one, blanks, the line
/// end): `Some(true)` for a closing line, `Some(false)` for a separating one.
fn boundary_line(line: &str, separator: &str) -> Option<bool> {
    let rest = line.strip_prefix(separator)?;
    let rest = rest.strip_suffix("\r\n").or_else(|| rest.strip_suffix(['\r', '\n'])).unwrap_or(rest);
    let blanks = |text: &str| text.chars().all(|c| c == ' ' || c == '\t');
    match rest.strip_prefix("--") {
        Some(after) if blanks(after) => Some(true),
        _ if blanks(rest) => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(text: &str) -> Vec<(String, String, Option<String>)> {
        let spliced = spliced_parts(text).unwrap_or_else(|error| panic!("{text:?}: {error}"));
        spliced.into_iter().map(|part| (part.text, part.subtype, part.filename)).collect()
    }

    fn part(text: &str, subtype: &str, filename: Option<&str>) -> (String, String, Option<String>) {
        (text.to_owned(), subtype.to_owned(), filename.map(str::to_owned))
    }

    /// Each expectation is what Python 3.11's email (Heat's `_append_multiparts`) gives; a
    /// message Heat rendered is in mime's `a_rendered_message_splices_back_into_its_parts`.
    #[test]
    fn splices_what_python_email_parses() {
        // CRLF lines, a preamble, a part without headers, repeated boundary lines, upper case,
        // Content-Type's `name`, an epilogue.
        let crlf = "Content-Type: Multipart/Mixed; boundary=B\r\n\r\npreamble\r\n--B\r\n\r\nno headers\r\n--B\r\n--B\r\n\
                    Content-Type: TEXT/X-Upper; name=n.txt\r\n\r\nafter dup\r\n--B--\r\nepilogue";
        assert_eq!(parts(crlf), [part("no headers", "plain", None), part("after dup", "x-upper", Some("n.txt"))]);
        // A folded header, an RFC 2231 file name, a base64 payload kept encoded, a first line that
        // is no header, an unclosed message.
        let folded = "Content-Type: multipart/mixed;\n boundary=B\n\n--B\nContent-Disposition: attachment; \
                      filename*=utf-8''n%C3%A9.sh\nContent-Transfer-Encoding: base64\n\naMOpbGxvCg==\n\n--B\n\
                      not a header\n--B";
        assert_eq!(
            parts(folded),
            [
                part("aMOpbGxvCg==\n", "plain", Some("n\u{e9}.sh")),
                part("not a header", "plain", None),
                part("", "plain", None)
            ]
        );
        assert_eq!(parts("#!/bin/sh\necho not a message\n"), []);
        assert_eq!(parts("Content-Type: multipart/mixed; boundary=B\n\nno start boundary\n--B--\nafter"), []);
        assert_eq!(parts("Content-Type: multipart/mixed\n\n--B\n\nno boundary parameter\n--B--\n"), []);
        let no_inner_start = "Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: multipart/alternative; \
                              boundary=C\n\nno inner start\n--B--\n";
        assert_eq!(parts(no_inner_start), [part("no inner start\n", "alternative", None)]);
        let message = "Content-Type: message/rfc822\n\nContent-Type: text/x-inner\n\nbody\n";
        assert_eq!(parts(message), [part("body\n", "x-inner", None)]);
        let envelope = "From me\nContent-Type: multipart/mixed; boundary=B\n\n--B\nA: 1\nFrom x\n\nbody\n--B--";
        assert_eq!(parts(envelope), [part("From x\nbody", "plain", None)]);
        let status = "Content-Type: message/delivery-status\n\nA: 1\n\nContent-Type: text/y\nB: 2\n\n";
        assert_eq!(parts(status), [part("", "plain", None), part("", "y", None)]);
        let blanks = "Content-Type: multipart/mixed; boundary=\"B \"\n\n--B \t\nx\n--B--";
        assert_eq!(parts(blanks), [part("x", "plain", None)]);
        let sections = "Content-Type: multipart/mixed; boundary*0=\"A\"; boundary*1=B\n\n--AB\n\nx\n--AB--";
        assert_eq!(parts(sections), [part("x", "plain", None)]);
        let broken_header = "Content-Type: multipart/mixed; boundary=B\n\n--B\n: no name\nX: 1\n continued\n\
                             Content-Type: text/bad\n\nx\n--B--";
        assert_eq!(parts(broken_header), [part("x", "bad", None)]);
        let empty_subtype = "Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: text/\n\
                             Content-Disposition: attachment; filename=\"f.sh\"\n\nx\n--B--";
        assert_eq!(parts(empty_subtype), [part("x", "", Some("f.sh"))]);
    }

    #[test]
    fn reads_file_names_as_python_email_does() {
        let with_part =
            |headers: &str| format!("Content-Type: multipart/mixed; boundary=B\n\n--B\n{headers}\n\nx\n--B--");
        let filename = |headers: &str| parts(&with_part(headers)).remove(0).2;
        // No charset: Python's lookup fails and the text stays, %-decoded.
        assert_eq!(filename("Content-Type: text/plain; name*=''x%FF"), Some("x\u{ff}".into()));
        let quoted = "Content-Type: text/plain; name*=us-ascii''x%FF; filename=ignored\nContent-Disposition: inline; \
                      filename=\"a \\\"q\\\" b\"; filename=second";
        assert_eq!(filename(quoted), Some("a \"q\" b".into()));
        assert_eq!(filename("Content-Type: text/plain; name*=us-ascii''x%FF"), Some("x\u{fffd}".into()));
        assert_eq!(filename("Content-Type: text/plain; name*=latin-1''x%FF"), Some("x\u{ff}".into()));
        let unsupported = spliced_parts(&with_part("Content-Type: text/plain; name*=iso-8859-15''x"));
        let charset = ParamError::UnsupportedCharset { charset: "iso-8859-15".into() };
        assert_eq!(unsupported, Err(SpliceError::Param { index: 1, source: charset }));
        // Python's sort of the sections fails (TypeError) on `boundary*` with `boundary*0`.
        let mixed = spliced_parts("Content-Type: multipart/mixed; boundary*=\"A\"; boundary*0=B\n\n--AB\n\nx\n--AB--");
        assert_eq!(mixed, Err(SpliceError::Boundary(ParamError::MixedSections { name: "boundary".into() })));
    }

    #[test]
    fn a_part_with_parts_of_its_own_is_refused_as_heat_fails_on_it() {
        let nested = "Content-Type: multipart/mixed; boundary=B\n\n--B\n\nfirst\n--B\nContent-Type: multipart/alternative; \
                      boundary=C\n\n--C\n\ninner\n--C--\n--B--\n";
        let refused = SpliceError::NestedPart { index: 2, content_type: "multipart/alternative".into() };
        assert_eq!(spliced_parts(nested), Err(refused));
        let digest = "Content-Type: multipart/digest; boundary=B\n\n--B\n\nimplicit message\n--B--\n";
        let refused = SpliceError::NestedPart { index: 1, content_type: "message/rfc822".into() };
        assert_eq!(spliced_parts(digest), Err(refused));
        let refused =
            spliced_parts("Content-Type: message/rfc822\n\nContent-Type: multipart/mixed; boundary=C\n\n--C\n");
        assert_eq!(refused, Err(SpliceError::NestedPart { index: 1, content_type: "multipart/mixed".into() }));
        let error = SpliceError::NestedPart { index: 2, content_type: "multipart/mixed".into() }.to_string();
        assert!(error.contains("splices one level of parts"), "{error}");
    }

    /// Nesting is skipped, not parsed, below the spliced message's parts: 100,000 levels (each
    /// a part opening the next) and 100,000 parts are a few passes over their lines.
    #[test]
    fn deep_or_wide_messages_are_bounded_work() {
        let levels = 100_000;
        let mut deep = String::new();
        for level in 0..levels {
            deep.push_str(&format!("Content-Type: multipart/mixed; boundary=b{level}\n\n--b{level}\n"));
        }
        let started = std::time::Instant::now();
        let refused = spliced_parts(&deep);
        assert_eq!(refused, Err(SpliceError::NestedPart { index: 1, content_type: "multipart/mixed".into() }));
        let wide = format!("Content-Type: multipart/mixed; boundary=B\n\n{}--B--\n", "--B\n\nx\n".repeat(levels));
        assert_eq!(spliced_parts(&wide).map(|parts| parts.len()), Ok(levels));
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    }
}
