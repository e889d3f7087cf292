//! The SQLite schema and its versioned migrations. Migration N runs once, in its own immediate
//! transaction, and records itself in `schema_version` in that same transaction, so a crash
//! mid-migration leaves the previous version intact and a concurrent opener waits instead of
//! running it twice. Migrations are append-only: a shipped one is never edited.

use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, TransactionBehavior};

use crate::store::StoreError;

pub(crate) struct Migration {
    pub(crate) version: u32,
    pub(crate) sql: &'static str,
}

/// Every migration this build knows, in version order.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration { version: 1, sql: SCHEMA_V1 },
    Migration { version: 2, sql: RETIRED_SIGNALS_V2 },
    Migration { version: 3, sql: STACK_TEMPLATES_V3 },
    Migration { version: 4, sql: TYPED_ENGINE_STATE_V4 },
    Migration { version: 5, sql: ENTRY_TOKENS_V5 },
    Migration { version: 6, sql: PREVIOUS_SERVER_TOKENS_V6 },
    Migration { version: 7, sql: RETIRED_AT_V7 },
    Migration { version: 8, sql: SERVER_ADDRESSES_V8 },
    Migration { version: 9, sql: STACK_USAGE_V9 },
    Migration { version: 10, sql: UI_SESSIONS_V10 },
    Migration { version: 11, sql: ROLLBACK_V11 },
];

/// Rollback: the stack's setting (Heat's `disable_rollback`; a stack stored before has Heat's
/// default, disabled) and the requests it was created and updated with, as sent, beside its
/// template (the current one and the one before it, what a rollback converges back to, and
/// what `stack template` prints). A stack stored before has none: it cannot roll back an
/// update until it is updated once more.
const ROLLBACK_V11: &str = "
ALTER TABLE stacks ADD COLUMN rollback TEXT NOT NULL DEFAULT 'disabled'
    CHECK (rollback IN ('disabled', 'enabled', 'due'));
ALTER TABLE stack_templates ADD COLUMN request TEXT;
ALTER TABLE stack_templates ADD COLUMN previous_request TEXT;
";

/// What a stack's current traversal has used of its limits: the bytes its evaluations produced
/// (the evaluation budget, docs/templates.md "Limits") and its resources with group members
/// (max_resources_per_stack). A stack stored before starts at none used.
const STACK_USAGE_V9: &str = "
ALTER TABLE stacks ADD COLUMN evaluated_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stacks ADD COLUMN resource_count INTEGER NOT NULL DEFAULT 0;
";

/// The web view's sessions (`POST /ui/login`), so that a logout revokes one for good, on every
/// process sharing the database. A session is known by a keyed hash of the random id its cookie
/// carries (the id is never stored); the index serves retention's pruning of expired ones. A
/// table of its own: no earlier table changes.
const UI_SESSIONS_V10: &str = "
CREATE TABLE ui_sessions (
    key TEXT NOT NULL PRIMARY KEY,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
CREATE INDEX ui_sessions_expires_at ON ui_sessions (expires_at);
";

/// What `server add --address/--network` registered, for the address attributes of an
/// `OS::Heat::DeployedServer` (docs/templates.md); a server registered before has none.
const SERVER_ADDRESSES_V8: &str = "
ALTER TABLE servers ADD COLUMN addresses TEXT NOT NULL DEFAULT '{}';
";

/// Each entry lists the token placeholders the engine placed in it; rendering substitutes only
/// those (see docs/security.md), so a placeholder that reached an entry inside a value (a hook's
/// output, a handle's data) stays text. An existing entry gets what it could have held: its own
/// signal and the handles of its stack.
const ENTRY_TOKENS_V5: &str = "
ALTER TABLE entries ADD COLUMN tokens TEXT NOT NULL DEFAULT '[]';
UPDATE entries SET tokens = (
    SELECT json_group_array(token) FROM (
        SELECT 'signal:' || json_extract(entries.entry, '$.id') AS token
        UNION ALL
        SELECT 'handle:' || json_extract(nodes.record, '$.id') FROM nodes
        WHERE nodes.stack = entries.stack AND nodes.resource_type = 'OS::Heat::WaitConditionHandle'
    ) WHERE token IS NOT NULL
);
";

/// A server's token before its last rotation (`server rotate-token`): valid until
/// `expires_at`, then kept so that its holder is told to re-read its token file (401) rather
/// than refused as a stranger (403). Gone with the server.
const PREVIOUS_SERVER_TOKENS_V6: &str = "
CREATE TABLE server_previous_tokens (
    name TEXT NOT NULL PRIMARY KEY REFERENCES servers (name) ON DELETE CASCADE,
    token_hash TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX server_previous_tokens_hash ON server_previous_tokens (token_hash);
";

/// When each signal token hash was retired (Unix ms), so retention can let the oldest go; the
/// hashes retired before this version count as retired now. The index serves that pruning.
const RETIRED_AT_V7: &str = "
ALTER TABLE retired_signals ADD COLUMN retired_at INTEGER NOT NULL DEFAULT 0;
UPDATE retired_signals SET retired_at = CAST(strftime('%s', 'now') AS INTEGER) * 1000;
CREATE INDEX retired_signals_retired_at ON retired_signals (retired_at);
";

/// The engine's private node state leaves the attribute JSON (where `_`-prefixed keys stood
/// beside what `get_attr` shows) for a `record` column of its own, keys without the `_`; and a
/// deadline's generation, which was the last `/`-separated part of its text key
/// (`stack/<stack>/<generation>`, `wait/<stack>/<node>/<generation>`), becomes a column of the
/// deadline's key (stack, node, generation), with `''` as the node of a stack's own deadline.
/// (`json_each` gives booleans and null as SQL values, so they are turned back into JSON.)
const TYPED_ENGINE_STATE_V4: &str = "
ALTER TABLE nodes ADD COLUMN record TEXT NOT NULL DEFAULT '{}';
UPDATE nodes SET
    record = (SELECT json_group_object(substr(key, 2), CASE WHEN type IN ('true', 'false', 'null', 'object',
                  'array') THEN json(CASE type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'
                  WHEN 'null' THEN 'null' ELSE value END) ELSE value END)
              FROM json_each(nodes.attributes) WHERE substr(key, 1, 1) = '_'),
    attributes = (SELECT json_group_object(key, CASE WHEN type IN ('true', 'false', 'null', 'object',
                      'array') THEN json(CASE type WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'
                      WHEN 'null' THEN 'null' ELSE value END) ELSE value END)
                  FROM json_each(nodes.attributes) WHERE substr(key, 1, 1) <> '_');

CREATE TABLE deadlines_v4 (
    stack TEXT NOT NULL REFERENCES stacks (name) ON DELETE CASCADE,
    node TEXT NOT NULL,
    generation INTEGER NOT NULL,
    due_at INTEGER NOT NULL,
    PRIMARY KEY (stack, node, generation)
) STRICT, WITHOUT ROWID;
INSERT OR REPLACE INTO deadlines_v4 (stack, node, generation, due_at)
    SELECT stack, COALESCE(node, ''),
           CAST(substr(key, length(stack) + COALESCE(length(node), 0) + 8) AS INTEGER), due_at
    FROM deadlines;
DROP TABLE deadlines;
ALTER TABLE deadlines_v4 RENAME TO deadlines;
CREATE INDEX deadlines_due_at ON deadlines (due_at);
";

/// A stack's template text in a table of its own. In the `stacks` row it made every read of the
/// columns after it walk the text's overflow pages, and every `UPDATE stacks` (one per signal:
/// the pending count) rewrite them: a signal cost grew with the template's size. The old column
/// stays (SQLite keeps it) but is emptied.
const STACK_TEMPLATES_V3: &str = "
CREATE TABLE stack_templates (
    stack TEXT NOT NULL PRIMARY KEY REFERENCES stacks (name) ON DELETE CASCADE,
    template TEXT NOT NULL
) STRICT;
INSERT INTO stack_templates (stack, template) SELECT name, template FROM stacks;
UPDATE stacks SET template = '';
";

/// Signal token hashes of superseded publications: a late signal for one is stale (2xx, no
/// change), not unknown (404). Kept when the stack is deleted, for the same reason.
const RETIRED_SIGNALS_V2: &str = "
CREATE TABLE retired_signals (
    hash TEXT NOT NULL PRIMARY KEY,
    stack TEXT NOT NULL,
    node TEXT NOT NULL
) STRICT, WITHOUT ROWID;
";

/// Child tables reference their stack by name, so parents must be written first. The foreign
/// keys are checked per statement, not deferred to COMMIT: a COMMIT is shared by a batch of
/// calls (see `batch`), and one call's violation must fail that call, not its neighbours.
/// `ON DELETE CASCADE` is a safety net behind `delete_stack`'s explicit deletes. Events have no foreign key: they outlive stacks.
/// STRICT tables make SQLite reject a value of the wrong type instead of storing it.
const SCHEMA_V1: &str = "
CREATE TABLE servers (
    name TEXT NOT NULL PRIMARY KEY,
    token_hash TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    metadata_version INTEGER NOT NULL,
    metadata_body TEXT NOT NULL,
    published_at INTEGER NOT NULL,
    last_seen INTEGER
) STRICT;
CREATE UNIQUE INDEX servers_token_hash ON servers (token_hash);

CREATE TABLE stacks (
    name TEXT NOT NULL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    action TEXT NOT NULL,
    state TEXT NOT NULL,
    status_reason TEXT NOT NULL,
    template TEXT NOT NULL,
    parameters TEXT NOT NULL,
    hidden_parameters TEXT NOT NULL,
    generation INTEGER NOT NULL,
    pending INTEGER NOT NULL,
    deadline INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE nodes (
    seq INTEGER PRIMARY KEY,
    stack TEXT NOT NULL REFERENCES stacks (name) ON DELETE CASCADE,
    name TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    generation INTEGER NOT NULL,
    action TEXT NOT NULL,
    state TEXT NOT NULL,
    status_reason TEXT NOT NULL,
    remaining INTEGER NOT NULL,
    definition TEXT NOT NULL,
    attributes TEXT NOT NULL,
    derived_config_id TEXT,
    signal_token_hash TEXT,
    server TEXT,
    updated_at INTEGER NOT NULL,
    UNIQUE (stack, name)
) STRICT;
CREATE INDEX nodes_signal_token_hash ON nodes (signal_token_hash) WHERE signal_token_hash IS NOT NULL;

CREATE TABLE edges (
    stack TEXT NOT NULL REFERENCES stacks (name) ON DELETE CASCADE,
    from_node TEXT NOT NULL,
    to_node TEXT NOT NULL,
    PRIMARY KEY (stack, from_node, to_node)
) STRICT, WITHOUT ROWID;

CREATE TABLE entries (
    server TEXT NOT NULL REFERENCES servers (name),
    stack TEXT NOT NULL REFERENCES stacks (name) ON DELETE CASCADE,
    node TEXT NOT NULL,
    sort_key TEXT NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (server, stack, node)
) STRICT;
CREATE INDEX entries_server_sort_key ON entries (server, sort_key, stack, node);
CREATE INDEX entries_stack ON entries (stack);

CREATE TABLE wait_signals (
    seq INTEGER PRIMARY KEY,
    stack TEXT NOT NULL REFERENCES stacks (name) ON DELETE CASCADE,
    handle TEXT NOT NULL,
    signal_id TEXT NOT NULL,
    success INTEGER NOT NULL,
    reason TEXT NOT NULL,
    data TEXT NOT NULL,
    received_at INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX wait_signals_signal_id ON wait_signals (stack, handle, signal_id);

CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    stack TEXT NOT NULL,
    time INTEGER NOT NULL,
    resource TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT NOT NULL
) STRICT;
CREATE INDEX events_stack ON events (stack, id);

CREATE TABLE deadlines (
    key TEXT NOT NULL PRIMARY KEY,
    stack TEXT NOT NULL REFERENCES stacks (name) ON DELETE CASCADE,
    node TEXT,
    due_at INTEGER NOT NULL
) STRICT;
CREATE INDEX deadlines_due_at ON deadlines (due_at);
CREATE INDEX deadlines_stack ON deadlines (stack);
";

/// Brings the database up to the last of `migrations`, each in its own transaction.
pub(crate) fn migrate(connection: &mut Connection, migrations: &[Migration]) -> Result<(), StoreError> {
    let sql_error = |action| move |source: rusqlite::Error| StoreError::Query { action, source: Box::new(source) };
    connection
        .execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_version (
                 version INTEGER NOT NULL PRIMARY KEY,
                 applied_at INTEGER NOT NULL
             ) STRICT",
        )
        .map_err(sql_error("create the schema_version table"))?;
    let supported = migrations.last().map_or(0, |migration| migration.version);
    for migration in migrations {
        let transaction = connection
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_error("begin a migration transaction"))?;
        // Read inside the write lock: another process may have migrated since we looked.
        let current: u32 = transaction
            .query_row("SELECT COALESCE(MAX(version), 0) FROM schema_version", [], |row| row.get(0))
            .map_err(sql_error("read the schema version"))?;
        if current > supported {
            return Err(StoreError::SchemaTooNew { found: current, supported });
        }
        if migration.version <= current {
            continue;
        }
        let failed =
            |source: rusqlite::Error| StoreError::Migration { version: migration.version, source: Box::new(source) };
        transaction.execute_batch(migration.sql).map_err(failed)?;
        transaction
            .execute("INSERT INTO schema_version (version, applied_at) VALUES (?1, ?2)", (migration.version, now()))
            .map_err(failed)?;
        transaction.commit().map_err(failed)?;
    }
    Ok(())
}

/// Applied-at time in unix milliseconds; a clock before 1970 records 0 (it is informational).
fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
}
