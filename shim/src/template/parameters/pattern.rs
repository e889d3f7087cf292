//! `allowed_pattern` as Heat checks it: `re.compile(pattern).match(value)` with Python's `re`,
//! accepted when the match found ends at the end of the value (heat/engine/constraints.py,
//! `AllowedPattern._is_valid`). The first match Python's backtracking finds counts: `a|ab`
//! refuses "ab", as in Heat.
//!
//! The pattern is read with Python's syntax (`syntax`) and written for a Rust engine (`emit`).
//! A pattern the `regex` crate can express is matched by it, in time linear in the value (its
//! leftmost-first match is the one Python's backtracking finds). Look-around, back-references,
//! conditionals and atomic groups need backtracking: fancy-regex matches those, bounded so that
//! a hostile pattern (`(a|a)+(?=c)` against "aaaa…ab") cannot stall the shim: at most
//! `BACKTRACK_LIMIT` backtracking steps, values of at most `BACKTRACKING_VALUE_LIMIT` characters,
//! and no backtracking construct inside a look-around (whose inner work fancy-regex does not
//! count). Past a bound the value is refused with an error naming the pattern and the bound;
//! Python's `re` has none of these bounds (Heat would hang instead).

mod emit;
mod syntax;

use emit::Features;
use syntax::SyntaxError;

/// Backtracking steps one value may take (fancy-regex's `backtrack_limit`).
pub const BACKTRACK_LIMIT: usize = 1_000_000;
/// The longest value (in characters) a pattern with look-around or back-references is
/// matched against.
pub const BACKTRACKING_VALUE_LIMIT: usize = 4096;
/// Compiled-size limit of either engine (`a{1000}{1000}` is refused, not built).
const SIZE_LIMIT: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatternError {
    /// Python refuses the pattern (Python's message).
    #[error("allowed_pattern \"{pattern}\" is not a valid regular expression: {reason}")]
    Invalid { pattern: String, reason: String },
    /// Python takes the pattern; anneal refuses it (a construct it lacks, or past a limit).
    #[error("allowed_pattern \"{pattern}\" is refused by anneal's limits on patterns: {reason}")]
    Unsupported { pattern: String, reason: String },
    /// The backtracking engine gave up on this value (fancy-regex's step limit, or its stack of
    /// saved positions, which holds a million).
    #[error(
        "allowed_pattern \"{pattern}\": matching the value took more than {BACKTRACK_LIMIT} backtracking steps \
         or saved positions (anneal's limit for look-around and back-reference patterns), so the value is refused"
    )]
    Steps { pattern: String },
    #[error(
        "allowed_pattern \"{pattern}\": a value longer than {BACKTRACKING_VALUE_LIMIT} characters is not matched \
         against a look-around or back-reference pattern (anneal's limit), so the value is refused"
    )]
    TooLong { pattern: String },
}

/// A compiled `allowed_pattern`.
#[derive(Debug)]
pub struct Pattern {
    source: String,
    features: Features,
    /// The `regex` crate's form, when it can express the pattern.
    linear: Option<regex::Regex>,
    /// The backtracking form, when the pattern needs it or some values need Python's exact `$`
    /// or `\b`.
    exact: Option<fancy_regex::Regex>,
}

impl Pattern {
    /// Reads `pattern` as Python does, refusing what Python refuses (with Python's message).
    pub fn compile(pattern: &str) -> Result<Pattern, PatternError> {
        let unsupported = |reason: String| PatternError::Unsupported { pattern: pattern.to_owned(), reason };
        let node = syntax::parse(pattern).map_err(|error| match error {
            SyntaxError::Python(reason) => PatternError::Invalid { pattern: pattern.to_owned(), reason },
            SyntaxError::Anneal(reason) => unsupported(reason),
        })?;
        let features = Features::of(&node);
        if features.nested_look {
            let reason = "a look-around holding another look-around, back-reference, conditional or atomic group";
            return Err(unsupported(reason.into()));
        }
        let linear = match features.backtracking {
            true => None,
            false => Some(
                regex::RegexBuilder::new(&emit::emit(&node, false))
                    .size_limit(SIZE_LIMIT)
                    .build()
                    .map_err(|error| unsupported(error.to_string()))?,
            ),
        };
        let exact = match features.backtracking || features.dollar || features.boundary {
            false => None,
            true => Some(
                fancy_regex::RegexBuilder::new(&emit::emit(&node, true))
                    .backtrack_limit(BACKTRACK_LIMIT)
                    .delegate_size_limit(SIZE_LIMIT)
                    .delegate_dfa_size_limit(SIZE_LIMIT)
                    .build()
                    .map_err(|error| unsupported(error.to_string()))?,
            ),
        };
        Ok(Pattern { source: pattern.to_owned(), features, linear, exact })
    }

    /// Heat's check: Python's `re.match` finds a match and it ends at the end of `text`.
    /// Errors: a backtracking bound was reached, so the answer is not known.
    pub fn matches(&self, text: &str) -> Result<bool, PatternError> {
        let whole = |end: usize| end == text.len();
        match (&self.linear, &self.exact) {
            (Some(linear), _) if self.features.plain(text) => {
                Ok(linear.find(text).is_some_and(|found| whole(found.end())))
            }
            (_, Some(exact)) => {
                if self.features.backtracking && text.chars().nth(BACKTRACKING_VALUE_LIMIT).is_some() {
                    return Err(PatternError::TooLong { pattern: self.source.clone() });
                }
                match exact.find(text) {
                    Ok(found) => Ok(found.is_some_and(|found| whole(found.end()))),
                    Err(fancy_regex::Error::RuntimeError(_)) => {
                        Err(PatternError::Steps { pattern: self.source.clone() })
                    }
                    Err(other) => {
                        Err(PatternError::Unsupported { pattern: self.source.clone(), reason: other.to_string() })
                    }
                }
            }
            // Not reached: a value that is not plain needs `$` or `\b`, which build `exact`.
            (Some(linear), None) => Ok(linear.find(text).is_some_and(|found| whole(found.end()))),
            (None, None) => Ok(false),
        }
    }
}
