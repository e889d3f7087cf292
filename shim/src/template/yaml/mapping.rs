//! A mapping built as PyYAML 6.0.4's constructor builds a dict (Heat's loader is PyYAML's
//! `SafeConstructor` over libyaml): a key written twice keeps the place of its first writing and
//! the value of its last (Python's dict), each repetition noted as a `DuplicateKey` warning; the
//! `<<` merge keys' mappings come first, in the order written (a list's mappings in list order,
//! not reversed), then the mapping's own keys, which win over merged ones. Among merged keys,
//! PyYAML (`flatten_mapping`) drops a pair whose key is the very string object of an earlier one:
//! CPython shares the empty string and each one-character string up to U+00FF, so such a key
//! keeps its first merged value while a longer one keeps its last.

use std::collections::{HashMap, HashSet};

use super::{Body, DuplicateKey, Entry, Node, YamlError};

/// Mappings up to this size are searched linearly for a key.
const SMALL_MAPPING: usize = 16;
/// Duplicate keys listed in the warnings of one document; the rest are counted.
pub(super) const LISTED_DUPLICATES: usize = 100;

/// The duplicate keys of one document, at most `LISTED_DUPLICATES` of them listed.
#[derive(Debug, Default)]
pub(super) struct Duplicates {
    pub(super) listed: Vec<DuplicateKey>,
    pub(super) unlisted: usize,
}

impl Duplicates {
    fn note(&mut self, duplicate: DuplicateKey) {
        if self.listed.len() < LISTED_DUPLICATES {
            self.listed.push(duplicate);
        } else {
            self.unlisted += 1;
        }
    }
}

/// Entries with unique keys in the order of their first writing; `index` holds the keys' places
/// once the mapping is large, so a template with thousands of resources stays linear.
#[derive(Default)]
struct Keyed {
    entries: Vec<Entry>,
    index: Option<HashMap<String, usize>>,
}

impl Keyed {
    fn place(&mut self, key: &str) -> Option<usize> {
        if let Some(index) = &self.index {
            return index.get(key).copied();
        }
        let place = self.entries.iter().position(|entry| entry.key == key);
        if place.is_none() && self.entries.len() >= SMALL_MAPPING {
            let places = self.entries.iter().enumerate().map(|(place, entry)| (entry.key.clone(), place));
            self.index = Some(places.collect());
        }
        place
    }

    /// Adds `entry`, or gives its value (and its key's position) to the entry of the same key,
    /// returning what that entry held.
    fn put(&mut self, entry: Entry) -> Option<Entry> {
        match self.place(&entry.key) {
            Some(place) => Some(std::mem::replace(&mut self.entries[place], entry)),
            None => {
                if let Some(index) = &mut self.index {
                    index.insert(entry.key.clone(), self.entries.len());
                }
                self.entries.push(entry);
                None
            }
        }
    }
}

/// What a mapping waits for next.
enum Pending {
    Key,
    Value { key: String, line: usize, column: usize },
    Merge { line: usize, column: usize },
}

/// What a mapping's merge keys brought in.
#[derive(Default)]
struct Merged {
    keyed: Keyed,
    /// The shared-string keys (`is_shared_string`) already merged: PyYAML keeps their first value.
    shared: HashSet<String>,
}

/// A mapping being filled.
pub(super) struct MappingFrame {
    own: Keyed,
    /// Boxed: few mappings merge, and every open collection holds a frame.
    merged: Option<Box<Merged>>,
    pending: Pending,
}

impl MappingFrame {
    pub(super) fn new() -> MappingFrame {
        MappingFrame { own: Keyed::default(), merged: None, pending: Pending::Key }
    }

    /// Takes the next node: a key (`merge` when it is a plain `<<`, PyYAML's merge key) or the
    /// value of the key before it.
    pub(super) fn take(&mut self, node: Node, merge: bool, duplicates: &mut Duplicates) -> Result<(), YamlError> {
        match std::mem::replace(&mut self.pending, Pending::Key) {
            Pending::Key => {
                let (line, column) = (node.line, node.column);
                self.pending = match node.body {
                    Body::Scalar(serde_json::Value::String(_)) if merge => Pending::Merge { line, column },
                    Body::Scalar(serde_json::Value::String(key)) => Pending::Value { key, line, column },
                    _ => return Err(YamlError::NonStringKey { line, column }),
                };
                Ok(())
            }
            Pending::Value { key, line, column } => {
                if let Some(earlier) = self.own.put(Entry { key, line, column, value: node }) {
                    duplicates.note(DuplicateKey { key: earlier.key, line, column, earlier_line: earlier.line });
                }
                Ok(())
            }
            Pending::Merge { line, column } => self.merge(node, line, column),
        }
    }

    /// Merges a `<<` key's value: a mapping, or a list of mappings.
    fn merge(&mut self, node: Node, line: usize, column: usize) -> Result<(), YamlError> {
        let refused = |what: &str, at: &Node| YamlError::Merge {
            line: at.line,
            column: at.column,
            message: format!("the merge key at line {line} column {column} needs {what}"),
        };
        match node.body {
            Body::Mapping(entries) => self.merge_entries(entries),
            Body::Sequence(items) => {
                for item in items {
                    match item.body {
                        Body::Mapping(entries) => self.merge_entries(entries),
                        _ => return Err(refused("a list of mappings, and this item is not one", &item)),
                    }
                }
            }
            Body::Scalar(_) => return Err(refused("a mapping or a list of mappings, not a scalar", &node)),
        }
        Ok(())
    }

    fn merge_entries(&mut self, entries: Vec<Entry>) {
        let merged = self.merged.get_or_insert_with(Box::default);
        for entry in entries {
            if is_shared_string(&entry.key) && !merged.shared.insert(entry.key.clone()) {
                continue;
            }
            merged.keyed.put(entry);
        }
    }

    /// The entries: the merged ones first, the mapping's own keys replacing or following them.
    pub(super) fn finish(self) -> Vec<Entry> {
        let Some(merged) = self.merged else { return self.own.entries };
        let mut all = merged.keyed;
        for entry in self.own.entries {
            all.put(entry);
        }
        all.entries
    }
}

/// Whether CPython hands out one shared object for this string (the empty string and the
/// one-character strings of Latin-1), so PyYAML's identity test sees two such keys as one.
fn is_shared_string(key: &str) -> bool {
    let mut chars = key.chars();
    match (chars.next(), chars.next()) {
        (None, _) => true,
        (Some(only), None) => u32::from(only) <= 0xff,
        _ => false,
    }
}
