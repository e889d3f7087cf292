//! libyaml's leniency on quoted scalars, which yaml-rust2 does not have. libyaml (and PyYAML's
//! own scanner: "Instead of checking indentation, we check for document separators") reads the
//! lines of a multi-line quoted scalar at any indentation and with tabs in it; it refuses only a
//! line that starts with a document marker (`---` or `...` then a blank or the end). yaml-rust2
//! refuses a line less indented than the scalar's block, and a tab there. What a continuation
//! line starts with is dropped from the value whatever it is, so when yaml-rust2 refuses one the
//! text is read again with that whitespace rewritten: the scalar's continuation lines indented
//! to one past its opening quote, tabs made spaces. Positions are given back in the text's own
//! columns (`Shifts`). A reading again costs up to a reading of the text, so they are bounded: at
//! most 100 rewritings, and all readings together at most eight times the text (plus 64 KiB).
//! Not done (yaml-rust2 still refuses it, libyaml does not): a line of a flow collection less
//! indented than the collection's block; nothing says how far to indent it.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use yaml_rust2::scanner::{Marker, ScanError};

use super::YamlError;

/// What yaml-rust2 says of a quoted scalar's line less indented than the scalar's block: the
/// error's position is the opening quote.
const QUOTED_INDENTATION: &str = "invalid indentation in quoted scalar";
/// What it says of a tab in that whitespace: the error's position is the tab.
const QUOTED_TAB: &str = "tab cannot be used as indentation";
/// Rewritings allowed in one document (each costs a copy of the text).
const MAX_REWRITINGS: usize = 100;
/// What all the readings together may read: eight times the text, and 64 KiB whatever its size,
/// so a document full of such scalars costs a bounded multiple of a plain one.
const READS_PER_BYTE: usize = 8;
const READ_FLOOR: usize = 64 * 1024;

/// How a reading failed: a scanner error may be one this module can get past.
pub(super) enum Failure {
    Scan(ScanError),
    Yaml(YamlError),
}

/// Columns added at the start of the lines the text was rewritten on (1-based line numbers).
#[derive(Debug, Default)]
pub(super) struct Shifts(HashMap<usize, isize>);

impl Shifts {
    /// A marker of the text read as a 1-based line and column of the text given.
    pub(super) fn position(&self, marker: &Marker) -> (usize, usize) {
        let (line, column) = (marker.line(), marker.col() + 1);
        match self.0.get(&line) {
            Some(shift) => (line, column.saturating_add_signed(-shift).max(1)),
            None => (line, column),
        }
    }
}

/// The scanner error as the document's syntax error, where the text given has it.
pub(super) fn syntax_error(error: &ScanError, shifts: &Shifts) -> YamlError {
    let (line, column) = shifts.position(error.marker());
    YamlError::Syntax { line, column, message: error.info().to_owned() }
}

/// Runs `attempt` on `text`, and again on the text rewritten each time it fails on a quoted
/// scalar's indentation that libyaml accepts, within the rereading allowance.
pub(super) fn read<T>(
    text: &str,
    mut attempt: impl FnMut(&str, &Shifts) -> Result<T, Failure>,
) -> Result<T, YamlError> {
    let allowance = text.len().saturating_mul(READS_PER_BYTE).saturating_add(READ_FLOOR);
    let mut current = Cow::Borrowed(text);
    let mut shifts = Shifts::default();
    let mut fixed = HashSet::new();
    // What the failed readings read: up to where each failed (the marker counts characters,
    // which are never more than bytes).
    let mut read = 0usize;
    let mut rewritings = 0;
    loop {
        let error = match attempt(&current, &shifts) {
            Ok(value) => return Ok(value),
            Err(Failure::Yaml(error)) => return Err(error),
            Err(Failure::Scan(error)) => error,
        };
        read = read.saturating_add(error.marker().index());
        // The next reading, of the whole rewritten text at worst, must fit in the allowance.
        let edits = edits_for(&current, &error, &mut fixed).filter(|edits| {
            let next = current.len().saturating_add(edits.iter().map(Edit::added).sum());
            rewritings < MAX_REWRITINGS && read.saturating_add(next) <= allowance
        });
        let Some(edits) = edits else { return Err(syntax_error(&error, &shifts)) };
        current = Cow::Owned(apply(&current, &edits, &mut shifts));
        rewritings += 1;
    }
}

/// One line's leading whitespace (`length` bytes from `start`) replaced by `spaces` spaces.
struct Edit {
    line: usize,
    start: usize,
    length: usize,
    spaces: usize,
}

impl Edit {
    fn added(&self) -> usize {
        self.spaces.saturating_sub(self.length)
    }
}

/// The rewriting that gets past `error`, if it is one of the two this module knows and the
/// rewriting changes something.
fn edits_for(text: &str, error: &ScanError, fixed: &mut HashSet<(usize, usize)>) -> Option<Vec<Edit>> {
    let marker = error.marker();
    let starts = line_starts(text);
    match error.info() {
        QUOTED_INDENTATION if fixed.insert((marker.line(), marker.col())) => {
            continuation_edits(text, &starts, marker.line(), marker.col())
        }
        // The scalar's start is not known here: one space instead of the whitespace leaves the
        // line's text where libyaml has it (a `---` after a tab is no document marker), and the
        // next reading fails on the scalar's indentation, which names the start, unless one
        // space is indentation enough.
        QUOTED_TAB => {
            let start = *starts.get(marker.line().checked_sub(1)?)?;
            let length = leading_blanks(&text.as_bytes()[start..]);
            Some(vec![Edit { line: marker.line(), start, length, spaces: 1 }])
        }
        _ => None,
    }
}

/// The rewriting of the continuation lines of the quoted scalar whose opening quote is at `line`
/// (1-based) and `column` (0-based, in characters): each line with text indented to one past the
/// quote, tabs made spaces; a document marker line is left as it is, for the scanner to refuse.
fn continuation_edits(text: &str, starts: &[usize], line: usize, column: usize) -> Option<Vec<Edit>> {
    let first = *starts.get(line.checked_sub(1)?)?;
    let (offset, quote) = text[first..].char_indices().nth(column)?;
    let quote_at = first + offset;
    if quote != '"' && quote != '\'' {
        return None;
    }
    let closing = closing_quote(text.as_bytes(), quote_at)?;
    let last = starts.partition_point(|start| *start <= closing);
    let target = column + 1;
    let mut edits = Vec::new();
    for number in line + 1..=last {
        let start = starts[number - 1];
        let rest = &text.as_bytes()[start..];
        let length = leading_blanks(rest);
        let after = rest.get(length).copied();
        let has_text = !matches!(after, None | Some(b'\n' | b'\r'));
        let tabs = rest[..length].contains(&b'\t');
        if length == 0 && is_document_marker(rest) {
            continue;
        }
        let spaces = if has_text { length.max(target) } else { length };
        if spaces != length || tabs {
            edits.push(Edit { line: number, start, length, spaces });
        }
    }
    (!edits.is_empty()).then_some(edits)
}

/// The byte offset of the quote closing the scalar opened at `open`, escapes (`\"` in double
/// quotes, `''` in single ones) skipped.
fn closing_quote(bytes: &[u8], open: usize) -> Option<usize> {
    let quote = *bytes.get(open)?;
    let mut at = open + 1;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            // An escaped character (one byte is enough: no byte of a longer UTF-8 character is
            // a quote, a backslash or a line break).
            b'\\' if quote == b'"' => at += 2,
            b'\'' if quote == b'\'' && bytes.get(at + 1) == Some(&b'\'') => at += 2,
            _ if byte == quote => return Some(at),
            _ => at += 1,
        }
    }
    None
}

/// The byte offset where each line starts; a line ends at `\r\n`, `\n` or `\r` (yaml-rust2's
/// line breaks, so its line numbers index this).
fn line_starts(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut starts = vec![0];
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'\r' if bytes.get(at + 1) == Some(&b'\n') => at += 2,
            b'\r' | b'\n' => at += 1,
            _ => {
                at += 1;
                continue;
            }
        }
        starts.push(at);
    }
    starts
}

fn leading_blanks(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|byte| matches!(byte, b' ' | b'\t')).count()
}

/// `---` or `...` then a blank, a line break or the end: what ends a quoted scalar with an error
/// in libyaml and yaml-rust2 alike.
fn is_document_marker(line: &[u8]) -> bool {
    (line.starts_with(b"---") || line.starts_with(b"..."))
        && matches!(line.get(3), None | Some(b' ' | b'\t' | b'\r' | b'\n'))
}

/// The text with the edits made (in line order), and their shifts added to `shifts`.
fn apply(text: &str, edits: &[Edit], shifts: &mut Shifts) -> String {
    let added: usize = edits.iter().map(Edit::added).sum();
    let mut rewritten = String::with_capacity(text.len() + added);
    let mut copied = 0;
    for edit in edits {
        rewritten.push_str(&text[copied..edit.start]);
        rewritten.extend(std::iter::repeat_n(' ', edit.spaces));
        copied = edit.start + edit.length;
        // Both counts are of one-byte characters, so columns and bytes agree.
        let shift = edit.spaces as isize - edit.length as isize;
        *shifts.0.entry(edit.line).or_default() += shift;
    }
    rewritten.push_str(&text[copied..]);
    rewritten
}
