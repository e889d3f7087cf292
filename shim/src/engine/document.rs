//! Rendering a server's metadata document from its stored entries: in full (every entry read
//! and its placed tokens substituted), or incrementally from the document before it: the
//! unchanged entries are copied from the previous body as they were rendered, and only the
//! entries the transaction wrote are rendered, from the texts it wrote. A signal that publishes
//! one deployment on a server holding hundreds thus reads nothing back and renders one entry.
//!
//! Both ways give the same bytes: entries in `(sort_key, stack, node)` order (bytewise, as both
//! stores sort: SQLite's BINARY collation, PostgreSQL's "C"), joined as stored.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;

use serde_json::json;

use super::context::{Changes, http_date};
use super::error::EngineError;
use super::secrets::TokenKey;
use crate::model::MetadataDocument;
use crate::store::{EntryText, ServerRow, Tx};

const HEAD: &str = "{\"deployments\":[";

/// Where one entry's rendered text lies in a document's body, under the key that orders it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct EntrySpan {
    sort_key: String,
    stack: String,
    node: String,
    span: Range<usize>,
}

/// A rendered document and where each of its entries is in the body.
#[derive(Clone)]
pub(super) struct Rendered {
    pub document: MetadataDocument,
    pub spans: Arc<[EntrySpan]>,
}

/// One entry of the document being built: copied from the previous body, or rendered now.
enum Piece {
    Kept(Range<usize>),
    Fresh(String),
}

/// The served document of `row` at its current version, every entry read and rendered.
pub(super) fn render_full(
    tx: &mut dyn Tx,
    key: &TokenKey,
    base_url: &str,
    row: &ServerRow,
) -> Result<Rendered, EngineError> {
    let entries = tx.entry_texts(&row.name)?;
    let pieces = entries.into_iter().map(|entry| fresh(key, base_url, entry)).collect();
    Ok(assemble(row, "", pieces))
}

/// The same document as `render_full` gives, built from `previous` (the document of this server
/// at the version before `row`'s) and the entries this transaction wrote or removed, without
/// reading the store: the unchanged entries are copied from the previous body.
pub(super) fn render_changed(
    key: &TokenKey,
    base_url: &str,
    row: &ServerRow,
    previous: &Rendered,
    changes: &Changes,
) -> Rendered {
    let changed: HashSet<(&str, &str)> = changes.keys().map(|(stack, node)| (stack.as_str(), node.as_str())).collect();
    let mut pieces: Vec<(EntrySpan, Piece)> = previous
        .spans
        .iter()
        .filter(|span| !changed.contains(&(span.stack.as_str(), span.node.as_str())))
        .map(|span| (span.clone(), Piece::Kept(span.span.clone())))
        .collect();
    pieces.extend(changes.values().flatten().map(|entry| fresh(key, base_url, entry.clone())));
    // Stable, and the kept spans are in order already: a few fresh ones find their place.
    pieces.sort_by(|(left, _), (right, _)| order(left).cmp(&order(right)));
    assemble(row, &previous.document.body, pieces)
}

fn order(span: &EntrySpan) -> (&str, &str, &str) {
    (&span.sort_key, &span.stack, &span.node)
}

/// A stored entry rendered: only the tokens the engine placed in it are substituted (a
/// placeholder that arrived inside a value stays text, see docs/security.md).
fn fresh(key: &TokenKey, base_url: &str, entry: EntryText) -> (EntrySpan, Piece) {
    let text = key.render_at(&entry.entry, &entry.tokens, Some(base_url));
    let span = EntrySpan { sort_key: entry.sort_key, stack: entry.stack, node: entry.node, span: 0..0 };
    (span, Piece::Fresh(text))
}

/// The body from its pieces in order (kept ones copied out of `previous_body`), with the
/// trailer naming the server and version.
fn assemble(row: &ServerRow, previous_body: &str, pieces: Vec<(EntrySpan, Piece)>) -> Rendered {
    let trailer = json!({"server": row.name, "version": row.metadata_version}).to_string();
    let size: usize = pieces
        .iter()
        .map(|(_, piece)| match piece {
            Piece::Kept(range) => range.len() + 1,
            Piece::Fresh(text) => text.len() + 1,
        })
        .sum();
    let mut body = String::with_capacity(HEAD.len() + size + trailer.len() + 16);
    body.push_str(HEAD);
    let mut spans = Vec::with_capacity(pieces.len());
    for (index, (mut span, piece)) in pieces.into_iter().enumerate() {
        if index > 0 {
            body.push(',');
        }
        let start = body.len();
        match piece {
            Piece::Kept(range) => body.push_str(&previous_body[range]),
            Piece::Fresh(text) => body.push_str(&text),
        }
        span.span = start..body.len();
        spans.push(span);
    }
    body.push_str("],\"anneal\":");
    body.push_str(&trailer);
    body.push('}');
    let document = MetadataDocument {
        version: row.metadata_version,
        body: Arc::from(body),
        last_modified: http_date(row.published_at.max(row.created_at)),
        announced_at: None,
        server_token_hash: Arc::from(row.token_hash.as_str()),
    };
    Rendered { document, spans: Arc::from(spans) }
}
