//! Inline flags as Python's `_parse_flags` reads them: `(?aiLmsux)` at the start (global),
//! `(?aiLmsux-imsx:...)` scoped; `L` is refused for a `str` pattern, `a` and `u` exclude each
//! other, and a scoped type flag replaces the other (`_combine_flags`).

use super::{Flags, Parsed, Parser, SyntaxError};

impl Parser {
    /// `(?aiLmsux)`, `(?aiLmsux-imsx:`: Python's `_parse_flags`.
    pub(super) fn flags(&mut self, mut this: char, flags: Flags) -> Parsed<FlagGroup> {
        let mut added = Flags::default();
        let mut kinds = 0;
        if this != '-' {
            loop {
                if this == 'L' {
                    return Err(self.error("bad inline flags: cannot use 'L' flag with a str pattern", self.pos));
                }
                if this == 't' {
                    // re.TEMPLATE: deprecated, and it refuses every repeat; not worth its own reading.
                    return Err(SyntaxError::Anneal("the 't' (TEMPLATE) flag".into()));
                }
                set_flag(&mut added, this, true);
                kinds += usize::from(matches!(this, 'a' | 'u'));
                if kinds > 1 && !(added.ascii ^ added.unicode) {
                    return Err(self.error("bad inline flags: flags 'a', 'u' and 'L' are incompatible", self.pos));
                }
                match self.next() {
                    None => return Err(self.error("missing -, : or )", self.pos)),
                    Some(next @ (')' | '-' | ':')) => {
                        this = next;
                        break;
                    }
                    Some(next) if FLAG_CHARS.contains(next) => this = next,
                    Some(next) => {
                        let message = if next.is_alphabetic() { "unknown flag" } else { "missing -, : or )" };
                        return Err(self.error(message, self.pos - 1));
                    }
                }
            }
        }
        if this == ')' {
            // Global flags add up: `(?a)(?u)` is refused once the whole pattern is read.
            let mut global = merge(self.global, added, Flags::default());
            global.ascii = self.global.ascii || added.ascii;
            global.unicode = self.global.unicode || added.unicode;
            return Ok(FlagGroup::Global(global));
        }
        let mut removed = Flags::default();
        if this == '-' {
            self.removed_flags(&mut removed)?;
        }
        let clash = (added.ignore_case && removed.ignore_case)
            || (added.multiline && removed.multiline)
            || (added.dotall && removed.dotall)
            || (added.verbose && removed.verbose);
        if clash {
            return Err(self.error("bad inline flags: flag turned on and off", self.pos));
        }
        Ok(FlagGroup::Scoped(merge(flags, added, removed)))
    }

    /// After `-` in `(?x-y:`: the flags turned off, up to the `:`.
    fn removed_flags(&mut self, removed: &mut Flags) -> Parsed<()> {
        let mut this = match self.next() {
            None => return Err(self.error("missing flag", self.pos)),
            Some(flag) if FLAG_CHARS.contains(flag) => flag,
            Some(other) => {
                let message = if other.is_alphabetic() { "unknown flag" } else { "missing flag" };
                return Err(self.error(message, self.pos - 1));
            }
        };
        loop {
            if matches!(this, 'a' | 'u' | 'L') {
                return Err(self.error("bad inline flags: cannot turn off flags 'a', 'u' and 'L'", self.pos));
            }
            if this == 't' {
                return Err(self.error("bad inline flags: cannot turn off global flag", self.pos));
            }
            set_flag(removed, this, true);
            match self.next() {
                None => return Err(self.error("missing :", self.pos)),
                Some(':') => return Ok(()),
                Some(next) if FLAG_CHARS.contains(next) => this = next,
                Some(next) => {
                    let message = if next.is_alphabetic() { "unknown flag" } else { "missing :" };
                    return Err(self.error(message, self.pos - 1));
                }
            }
        }
    }
}

pub(super) enum FlagGroup {
    Global(Flags),
    Scoped(Flags),
}

pub(super) const FLAG_CHARS: &str = "iLmsxatu";

fn set_flag(flags: &mut Flags, flag: char, on: bool) {
    match flag {
        'i' => flags.ignore_case = on,
        'm' => flags.multiline = on,
        's' => flags.dotall = on,
        'x' => flags.verbose = on,
        'a' => flags.ascii = on,
        'u' => flags.unicode = on,
        _ => {}
    }
}

/// `base` with `added` turned on and `removed` off (`_combine_flags`: a type flag, `a` or `u`,
/// replaces the other).
fn merge(base: Flags, added: Flags, removed: Flags) -> Flags {
    let typed = added.ascii || added.unicode;
    Flags {
        ignore_case: (base.ignore_case || added.ignore_case) && !removed.ignore_case,
        multiline: (base.multiline || added.multiline) && !removed.multiline,
        dotall: (base.dotall || added.dotall) && !removed.dotall,
        verbose: (base.verbose || added.verbose) && !removed.verbose,
        ascii: if typed { added.ascii } else { base.ascii },
        unicode: if typed { added.unicode } else { base.unicode },
    }
}
