//! `Engine`: the shared state behind every operation (the store, the token key, the document
//! cache and its long-poll watchers) and `transact`, which runs one operation as one store
//! transaction on the blocking pool. The servers whose deployment entries it changed get a new
//! document version in that same transaction, and only after the commit is the rendered document
//! placed in the cache and its watchers woken. All truth is in the store: the cache is rebuilt
//! from it on demand after a restart.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::sync::watch;

use super::context::{Context, http_date, now_millis};
use super::error::EngineError;
use super::secrets::TokenKey;
use crate::model::MetadataDocument;
use crate::store::{ServerRow, Store, Tx};

/// Where agents and operators reach this shim (the base of every URL it hands out).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub public_url: String,
    /// The public URLs of the other replicas sharing this one's database, listed after
    /// `public_url` in the agent configs `server add` prints (the agent fails over between them).
    pub replica_urls: Vec<String>,
}

impl EngineConfig {
    /// One shim, reached at `public_url`.
    pub fn new(public_url: impl Into<String>) -> EngineConfig {
        EngineConfig { public_url: public_url.into(), replica_urls: Vec::new() }
    }
}

/// The engine; cheap to clone (shared state behind an `Arc`).
pub struct Engine<S: Store> {
    pub(super) inner: Arc<Inner<S>>,
}

impl<S: Store> Clone for Engine<S> {
    fn clone(&self) -> Self {
        Engine { inner: Arc::clone(&self.inner) }
    }
}

pub(super) struct Inner<S> {
    store: S,
    key: TokenKey,
    pub(super) public_url: String,
    pub(super) replica_urls: Vec<String>,
    pub(super) documents: Mutex<HashMap<String, Cached>>,
    /// Last poll per server, kept in memory: a poll must not cost a store write.
    pub(super) last_seen: Mutex<HashMap<String, u64>>,
    pub(super) metrics: crate::metrics::Metrics,
}

pub(super) struct Cached {
    document: MetadataDocument,
    sender: watch::Sender<u64>,
}

/// A document version made in a transaction, to cache and announce after the commit.
struct Published {
    server: String,
    document: MetadataDocument,
}

impl<S: Store> Engine<S> {
    pub fn new(store: S, key: TokenKey, config: EngineConfig) -> Engine<S> {
        let public_url = config.public_url.trim_end_matches('/').to_string();
        let replica_urls = config.replica_urls.iter().map(|url| url.trim_end_matches('/').to_string()).collect();
        let inner = Inner {
            store,
            key,
            public_url,
            replica_urls,
            documents: Mutex::default(),
            last_seen: Mutex::default(),
            metrics: crate::metrics::Metrics::new(),
        };
        Engine { inner: Arc::new(inner) }
    }

    pub fn store(&self) -> &S {
        &self.inner.store
    }

    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.inner.metrics
    }

    /// Runs `work` in one transaction on the blocking pool, then announces the documents it changed.
    pub(crate) async fn transact<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Context<'_>) -> Result<T, EngineError> + Send + 'static,
    ) -> Result<T, EngineError> {
        let inner = Arc::clone(&self.inner);
        let started = std::time::Instant::now();
        let joined = tokio::task::spawn_blocking(move || {
            inner.store.transaction(|tx| {
                let mut ctx = Context {
                    tx,
                    key: &inner.key,
                    public_url: &inner.public_url,
                    now: now_millis(),
                    touched_servers: BTreeSet::new(),
                    placed_handles: BTreeSet::new(),
                };
                let value = work(&mut ctx)?;
                let published = publish_documents(&mut ctx)?;
                Ok::<_, EngineError>((value, published))
            })
        })
        .await;
        let (value, published) = joined.map_err(|error| EngineError::Worker { detail: error.to_string() })??;
        self.inner.metrics.transaction(started.elapsed());
        self.announce(published);
        Ok(value)
    }

    fn announce(&self, published: Vec<Published>) {
        let Ok(mut documents) = self.inner.documents.lock() else { return };
        let now = std::time::Instant::now();
        for Published { server, mut document } in published {
            document.announced_at = Some(now);
            let version = document.version;
            match documents.get_mut(&server) {
                Some(cached) if cached.document.version < version => {
                    cached.document = document;
                    cached.sender.send_replace(version);
                }
                Some(_) => {}
                None => {
                    let (sender, _) = watch::channel(version);
                    documents.insert(server, Cached { document, sender });
                }
            }
        }
    }

    /// Brings cached documents up to what the store holds after other processes' commits (the
    /// replicas sharing a PostgreSQL database): the servers named, or every cached one
    /// (`None`). A newer stored version is rendered and its watchers woken; a server no longer
    /// stored is forgotten (its long-polls end). Returns how many documents changed.
    pub async fn refresh_documents(&self, servers: Option<Vec<String>>) -> Result<usize, EngineError> {
        // Named servers are read one by one (a notification names a few of thousands); a full
        // check reads every version in one statement.
        let named = servers.is_some();
        let cached: HashMap<String, u64> = {
            let Ok(documents) = self.inner.documents.lock() else { return Ok(0) };
            match servers {
                Some(names) => names
                    .into_iter()
                    .filter_map(|name| documents.get(&name).map(|cached| (name, cached.document.version)))
                    .collect(),
                None => documents.iter().map(|(name, cached)| (name.clone(), cached.document.version)).collect(),
            }
        };
        if cached.is_empty() {
            return Ok(0);
        }
        let inner = Arc::clone(&self.inner);
        let joined = tokio::task::spawn_blocking(move || {
            inner.store.read(|tx| {
                let stored: Option<HashMap<String, u64>> =
                    if named { None } else { Some(tx.document_versions()?.into_iter().collect()) };
                let mut published = Vec::new();
                let mut gone = Vec::new();
                for (name, version) in cached {
                    let row = match &stored {
                        Some(stored) => match stored.get(&name) {
                            Some(newer) if *newer > version => tx.server(&name)?,
                            Some(_) => continue,
                            None => None,
                        },
                        None => tx.server(&name)?,
                    };
                    match row {
                        None => gone.push(name),
                        Some(row) if row.metadata_version > version => {
                            let document = render_document(tx, &inner.key, &inner.public_url, &row)?;
                            published.push(Published { server: name, document });
                        }
                        Some(_) => {}
                    }
                }
                Ok::<_, EngineError>((published, gone))
            })
        })
        .await;
        let (published, gone) = joined.map_err(|error| EngineError::Worker { detail: error.to_string() })??;
        for name in &gone {
            self.forget_server(name);
        }
        let changed = published.len() + gone.len();
        self.announce(published);
        Ok(changed)
    }

    fn cached(&self, server: &str) -> Option<(MetadataDocument, watch::Receiver<u64>)> {
        let documents = self.inner.documents.lock().ok()?;
        documents.get(server).map(|cached| (cached.document.clone(), cached.sender.subscribe()))
    }

    pub(super) async fn load_document(
        &self,
        server: &str,
    ) -> Result<(MetadataDocument, watch::Receiver<u64>), EngineError> {
        if let Some(found) = self.cached(server) {
            return Ok(found);
        }
        let name = server.to_string();
        let published = self
            .transact(move |ctx| {
                let Some(row) = ctx.tx.server(&name)? else {
                    return Err(EngineError::NotFound { what: format!("server {name}") });
                };
                render_document(ctx.tx, ctx.key, ctx.public_url, &row)
            })
            .await?;
        self.announce(vec![Published { server: server.to_string(), document: published }]);
        self.cached(server).ok_or_else(|| EngineError::NotFound { what: format!("server {server}") })
    }
}

/// Gives every server touched in this transaction a new document version.
fn publish_documents(ctx: &mut Context<'_>) -> Result<Vec<Published>, EngineError> {
    let servers: Vec<String> = std::mem::take(&mut ctx.touched_servers).into_iter().collect();
    let mut published = Vec::with_capacity(servers.len());
    for server in servers {
        let Some(mut row) = ctx.tx.server(&server)? else { continue };
        row.metadata_version += 1;
        row.published_at = ctx.now;
        // The stored body stays empty: the rendered one carries tokens, which never go to disk.
        ctx.tx.set_server_document(&server, row.metadata_version, "", ctx.now)?;
        published.push(Published {
            server: server.clone(),
            document: render_document(ctx.tx, ctx.key, ctx.public_url, &row)?,
        });
    }
    Ok(published)
}

/// The served document of `row` at its current version, placed tokens substituted. The stored entries
/// are JSON texts written by `put_entry`; they are joined as they are (a document is rendered on
/// every change of its server, and parsing each entry only to print it again was most of that).
fn render_document(
    tx: &mut dyn Tx,
    key: &TokenKey,
    base_url: &str,
    row: &ServerRow,
) -> Result<MetadataDocument, EngineError> {
    let entries = tx.entry_texts(&row.name)?;
    let trailer = json!({"server": row.name, "version": row.metadata_version}).to_string();
    let mut body =
        String::with_capacity(entries.iter().map(|entry| entry.entry.len() + 1).sum::<usize>() + trailer.len() + 32);
    body.push_str("{\"deployments\":[");
    for (index, entry) in entries.iter().enumerate() {
        if index > 0 {
            body.push(',');
        }
        // Only the tokens the engine placed in this entry: a placeholder that arrived inside
        // a value (a hook's output, a handle's data) stays text (see docs/security.md).
        body.push_str(&key.render_at(&entry.entry, &entry.tokens, Some(base_url)));
    }
    body.push_str("],\"anneal\":");
    body.push_str(&trailer);
    body.push('}');
    Ok(MetadataDocument {
        version: row.metadata_version,
        body: Arc::from(body),
        last_modified: http_date(row.published_at.max(row.created_at)),
        announced_at: None,
    })
}
