//! `Engine`: the shared state behind every operation (the store, the token key, the document
//! cache and its long-poll watchers, the web view's followers of stacks) and `transact`, which
//! runs one operation as one store transaction on the blocking pool. The servers whose
//! deployment entries it changed get a new document version in that same transaction, and only
//! after the commit is the rendered document placed in the cache and its watchers woken (and
//! the followers of the stacks it wrote). All truth is in the store: the cache is rebuilt
//! from it on demand after a restart.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::context::{Context, now_millis};
use super::document::{self, Rendered};
use super::error::EngineError;
use super::limits::{Limits, MaxDeploymentBytes, StackActionTimeout};
use super::secrets::TokenKey;
use super::stack_watchers::StackWatchers;
use crate::model::MetadataDocument;
use crate::store::Store;
use crate::template::{EVALUATION_BUDGET, MaxResources};

/// Where agents and operators reach this shim (the base of every URL it hands out).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub public_url: String,
    /// The public URLs of the other replicas sharing this one's database, listed after
    /// `public_url` in the agent configs `server add` prints (the agent fails over between them).
    pub replica_urls: Vec<String>,
    /// How many members of a deployment group one transaction writes and publishes; the rest
    /// follow in later transactions (`RELEASE_CHUNK`).
    pub release_chunk: usize,
    /// The most resources a stack may have, group members included (Heat's
    /// max_resources_per_stack).
    pub max_resources: MaxResources,
    /// What one evaluation of a stack may produce (`template::EVALUATION_BUDGET`; tests lower it).
    pub evaluation_budget: usize,
    /// Bytes of deployment group members' entries one transaction publishes (`RELEASE_BYTES`).
    pub release_bytes: usize,
    /// The most bytes a stack's deployments may publish to servers' documents.
    pub max_deployment_bytes: MaxDeploymentBytes,
    /// How long a create or update without a timeout of its own, and a delete, may take
    /// (Heat's stack_action_timeout; tests lower it).
    pub stack_action_timeout: StackActionTimeout,
}

/// Members of a deployment group written per transaction: 150-350 ms of store work on the
/// bench machine, so a group over 10,000 servers neither holds the store for seconds nor keeps
/// every poll waiting for the last member. Below the row cache's 2,048 rows (`store::cache`):
/// a chunk never re-reads what it wrote, and 2,000 came out faster in all than 1,000 or 4,000
/// (`group_create`, 3 runs each).
pub const RELEASE_CHUNK: usize = 2000;

/// Bytes of deployment group members' entries (each a copy of the group's config and inputs)
/// written per transaction: a group of 16 MiB configs is published four members at a time, not
/// 2,000 (32 GB in one transaction); the fleet's 19 KB scripts still go 2,000 at a time.
pub const RELEASE_BYTES: usize = 64 << 20;

impl EngineConfig {
    /// One shim, reached at `public_url`.
    pub fn new(public_url: impl Into<String>) -> EngineConfig {
        EngineConfig {
            public_url: public_url.into(),
            replica_urls: Vec::new(),
            release_chunk: RELEASE_CHUNK,
            max_resources: MaxResources::default(),
            evaluation_budget: EVALUATION_BUDGET,
            release_bytes: RELEASE_BYTES,
            max_deployment_bytes: MaxDeploymentBytes::default(),
            stack_action_timeout: StackActionTimeout::default(),
        }
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
    pub(super) key: TokenKey,
    pub(super) public_url: String,
    pub(super) replica_urls: Vec<String>,
    release_chunk: usize,
    release_bytes: usize,
    pub(super) limits: Limits,
    /// Woken after a commit that queued group members, so the sweeper releases them at once.
    pub(super) continuation: tokio::sync::Notify,
    pub(super) documents: Mutex<HashMap<String, Cached>>,
    /// Last poll per server, kept in memory: a poll must not cost a store write.
    pub(super) last_seen: Mutex<HashMap<String, u64>>,
    /// With a store only this process writes: the bytes each stack's entries held as the last
    /// call that published for it counted them (`Context::published`), so the next call need
    /// not sum them again (a sum over every entry of the stack: 10,000 deployments' entries
    /// summed at each signal made a large graph's signals three times slower). It may only
    /// overstate (an entry removed, a call rolled back after it counted): the limit's check
    /// sums exactly before it refuses anything. `None` with replicas, which write too.
    pub(super) entry_bytes: Option<Mutex<HashMap<String, u64>>>,
    pub(super) metrics: crate::metrics::Metrics,
    /// The web view's followers of stacks, woken after each commit that changed their graph.
    pub(super) stack_watchers: StackWatchers,
}

pub(super) struct Cached {
    rendered: Rendered,
    sender: watch::Sender<u64>,
}

/// A document version made in a transaction, to cache and announce after the commit.
struct Published {
    server: String,
    rendered: Rendered,
}

impl<S: Store> Engine<S> {
    pub fn new(store: S, key: TokenKey, config: EngineConfig) -> Engine<S> {
        let public_url = config.public_url.trim_end_matches('/').to_string();
        let replica_urls = config.replica_urls.iter().map(|url| url.trim_end_matches('/').to_string()).collect();
        let single_writer = store.single_writer();
        let inner = Inner {
            store,
            key,
            public_url,
            replica_urls,
            release_chunk: config.release_chunk.max(1),
            release_bytes: config.release_bytes.max(1),
            limits: Limits {
                evaluation_budget: config.evaluation_budget,
                max_resources: config.max_resources,
                max_deployment_bytes: config.max_deployment_bytes,
                stack_action_timeout: config.stack_action_timeout,
            },
            continuation: tokio::sync::Notify::new(),
            documents: Mutex::default(),
            last_seen: Mutex::default(),
            entry_bytes: single_writer.then(Mutex::default),
            metrics: crate::metrics::Metrics::new(),
            stack_watchers: StackWatchers::default(),
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
        let engine = self.clone();
        tokio::task::spawn_blocking(move || engine.transact_blocking(work))
            .await
            .map_err(|error| EngineError::Worker { detail: error.to_string() })?
    }

    /// `transact` on the calling thread, which may block (a blocking-pool thread): the sweeper
    /// releases a large group's chunks one after the other this way, each announced at its
    /// commit while the runtime answers the polls the previous one woke.
    pub(crate) fn transact_blocking<T>(
        &self,
        work: impl FnOnce(&mut Context<'_>) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let inner = &self.inner;
        let started = std::time::Instant::now();
        let (value, published, continued, stacks, revoked) = inner.store.transaction(|tx| {
            let mut ctx = self.context(tx);
            let value = work(&mut ctx)?;
            ctx.write_usage()?;
            self.remember_entry_bytes(&ctx.published);
            let published = publish_documents(&mut ctx, &inner.documents)?;
            let revoked = std::mem::take(&mut ctx.revoked_servers);
            Ok::<_, EngineError>((value, published, ctx.continued, ctx.tx.changed_stacks(), revoked))
        })?;
        inner.metrics.transaction(started.elapsed());
        self.announce(published);
        for server in &revoked {
            self.forget_server(server);
        }
        inner.stack_watchers.changed(&stacks);
        if continued {
            inner.continuation.notify_one();
        }
        Ok(value)
    }

    /// Runs `work` in one transaction that is always rolled back, on the blocking pool: what it
    /// computed from the writes it made is kept, never the writes (a plan: `plan`). Nothing is
    /// announced and no document changes.
    pub(crate) async fn transact_discarded<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Context<'_>) -> Result<T, EngineError> + Send + 'static,
    ) -> Result<T, EngineError> {
        let engine = self.clone();
        let worker = tokio::task::spawn_blocking(move || {
            let mut kept = None;
            let outcome = engine.inner.store.transaction(|tx| {
                let mut ctx = engine.context(tx);
                kept = Some(work(&mut ctx)?);
                Err::<(), EngineError>(EngineError::Discarded)
            });
            match (outcome, kept) {
                (Err(EngineError::Discarded), Some(value)) => Ok(value),
                (Err(error), _) => Err(error),
                (Ok(()), _) => Err(EngineError::Discarded),
            }
        });
        worker.await.map_err(|error| EngineError::Worker { detail: error.to_string() })?
    }

    /// Keeps what a call that succeeded counted of its stacks' entries (`Inner::entry_bytes`).
    /// Within a SQLite group commit the next call sees it before the commit, as it sees the
    /// writes; a batch rolled back after it leaves an overstatement, which is safe.
    fn remember_entry_bytes(&self, published: &BTreeMap<String, u64>) {
        if let Some(Ok(mut known)) = self.inner.entry_bytes.as_ref().map(Mutex::lock) {
            known.extend(published.iter().map(|(stack, bytes)| (stack.clone(), *bytes)));
        }
    }

    /// A fresh context for one transaction over `tx`.
    fn context<'a>(&'a self, tx: &'a mut dyn crate::store::Tx) -> Context<'a> {
        let inner = &self.inner;
        Context {
            tx,
            key: &inner.key,
            public_url: &inner.public_url,
            now: now_millis(),
            changed_entries: BTreeMap::new(),
            placed_handles: BTreeSet::new(),
            release_budget: inner.release_chunk,
            release_bytes: inner.release_bytes,
            continued: false,
            limits: inner.limits,
            usage: BTreeMap::new(),
            published: BTreeMap::new(),
            known_entry_bytes: inner.entry_bytes.as_ref(),
            refuse_over_budget: false,
            revoked_servers: Vec::new(),
            publications: None,
        }
    }

    /// Drops what memory holds for a server that is gone (removed, or revoked by its stack):
    /// its cached document (dropping the watch sender ends the long-polls held on it) and its
    /// last poll time.
    pub(super) fn forget_server(&self, name: &str) {
        if let Ok(mut documents) = self.inner.documents.lock() {
            documents.remove(name);
        }
        if let Ok(mut seen) = self.inner.last_seen.lock() {
            seen.remove(name);
        }
    }

    /// Runs a lookup with `Store::read` on the blocking pool: no write transaction, no group commit.
    pub(super) async fn read<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut dyn crate::store::Tx) -> Result<T, crate::store::StoreError> + Send + 'static,
    ) -> Result<T, EngineError> {
        let engine = self.clone();
        tokio::task::spawn_blocking(move || engine.store().read(work))
            .await
            .map_err(|error| EngineError::Worker { detail: error.to_string() })?
            .map_err(EngineError::from)
    }

    fn announce(&self, published: Vec<Published>) {
        let Ok(mut documents) = self.inner.documents.lock() else { return };
        let now = std::time::Instant::now();
        for Published { server, mut rendered } in published {
            rendered.document.announced_at = Some(now);
            let version = rendered.document.version;
            match documents.get_mut(&server) {
                Some(cached) if cached.rendered.document.version < version => {
                    cached.rendered = rendered;
                    cached.sender.send_replace(version);
                }
                Some(_) => {}
                None => {
                    let (sender, _) = watch::channel(version);
                    documents.insert(server, Cached { rendered, sender });
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
                    .filter_map(|name| documents.get(&name).map(|cached| (name, cached.rendered.document.version)))
                    .collect(),
                None => {
                    documents.iter().map(|(name, cached)| (name.clone(), cached.rendered.document.version)).collect()
                }
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
                            let rendered = document::render_full(tx, &inner.key, &inner.public_url, &row)?;
                            published.push(Published { server: name, rendered });
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

    /// Wakes the web view's followers of `stacks` (`None`: of every stack), after other
    /// replicas' commits.
    pub(super) fn stacks_changed(&self, stacks: Option<&[String]>) {
        match stacks {
            Some(stacks) => self.inner.stack_watchers.changed(stacks),
            None => self.inner.stack_watchers.changed_all(),
        }
    }

    /// A receiver that changes whenever `stack`'s graph may have changed (see `stack_watchers`).
    pub(super) fn follow_stack(&self, stack: &str) -> watch::Receiver<u64> {
        self.inner.stack_watchers.subscribe(stack)
    }

    fn cached(&self, server: &str) -> Option<(MetadataDocument, watch::Receiver<u64>)> {
        let documents = self.inner.documents.lock().ok()?;
        documents.get(server).map(|cached| (cached.rendered.document.clone(), cached.sender.subscribe()))
    }

    pub(super) async fn load_document(
        &self,
        server: &str,
    ) -> Result<(MetadataDocument, watch::Receiver<u64>), EngineError> {
        if let Some(found) = self.cached(server) {
            return Ok(found);
        }
        // A read (one snapshot, waiting for no writer): a poll after a restart is not held
        // behind a large create either. A document of an older version than one announced
        // meanwhile is not announced over it.
        let (engine, name) = (self.clone(), server.to_string());
        let rendered = tokio::task::spawn_blocking(move || {
            let inner = &engine.inner;
            inner.store.read(|tx| {
                let Some(row) = tx.server(&name)? else {
                    return Err(EngineError::NotFound { what: format!("server {name}") });
                };
                document::render_full(tx, &inner.key, &inner.public_url, &row)
            })
        })
        .await
        .map_err(|error| EngineError::Worker { detail: error.to_string() })??;
        self.announce(vec![Published { server: server.to_string(), rendered }]);
        self.cached(server).ok_or_else(|| EngineError::NotFound { what: format!("server {server}") })
    }
}

/// Gives every server whose entries this transaction changed a new document version: rendered
/// from the cached document of the version before and this transaction's changes when memory
/// holds it, with no read, and in full otherwise (after a restart, when another replica or an
/// earlier transaction of the same commit moved the version on, or the server was registered
/// again since).
fn publish_documents(
    ctx: &mut Context<'_>,
    documents: &Mutex<HashMap<String, Cached>>,
) -> Result<Vec<Published>, EngineError> {
    let changed = std::mem::take(&mut ctx.changed_entries);
    let mut published = Vec::with_capacity(changed.len());
    for (server, changes) in changed {
        let Some(mut row) = ctx.tx.server(&server)? else { continue };
        let previous = documents
            .lock()
            .ok()
            .and_then(|documents| documents.get(&server).map(|cached| cached.rendered.clone()))
            .filter(|previous| {
                previous.document.version == row.metadata_version
                    && *previous.document.server_token_hash == row.token_hash
            });
        row.metadata_version += 1;
        row.published_at = ctx.now;
        // The stored body stays empty: the rendered one carries tokens, which never go to disk.
        ctx.tx.set_server_document(&server, row.metadata_version, "", ctx.now)?;
        let rendered = match previous {
            Some(previous) => document::render_changed(ctx.key, ctx.public_url, &row, &previous, &changes),
            None => document::render_full(ctx.tx, ctx.key, ctx.public_url, &row)?,
        };
        published.push(Published { server, rendered });
    }
    Ok(published)
}
