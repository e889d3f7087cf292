//! The PostgreSQL schema and its versioned migrations. Version 1 is the SQLite schema at its
//! version 8 (the same tables, columns and keys; BIGINT for integers, BOOLEAN for flags, text
//! keys in the "C" collation so that every `ORDER BY` sorts bytewise as SQLite does). Each
//! migration runs once, in its own transaction, under an advisory lock so that replicas
//! starting together wait for one another instead of racing, and records itself in
//! `schema_version` in that same transaction. Append-only: a shipped migration is never edited.

use postgres::Client;

use super::access::query_error;
use crate::store::StoreError;

pub(crate) struct Migration {
    pub(crate) version: u32,
    pub(crate) sql: &'static str,
}

/// Every migration this build knows, in version order.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration { version: 1, sql: SCHEMA_V1 },
    Migration { version: 2, sql: SHARED_SECRETS_V2 },
    Migration { version: 3, sql: STACK_USAGE_V3 },
    Migration { version: 4, sql: UI_SESSIONS_V4 },
    Migration { version: 5, sql: ROLLBACK_V5 },
];

/// SQLite's version 11: the stack's rollback setting and its requests as sent.
const ROLLBACK_V5: &str = "
ALTER TABLE stacks ADD COLUMN rollback TEXT NOT NULL DEFAULT 'disabled'
    CHECK (rollback IN ('disabled', 'enabled', 'due'));
ALTER TABLE stack_templates ADD COLUMN request TEXT, ADD COLUMN previous_request TEXT;
";

/// The advisory lock migrations hold (any number unique to anneal: "anneal-m").
const MIGRATION_LOCK: i64 = 0x616e_6e65_616c_2d6d;

/// Secrets every replica must share (the key signal tokens are derived with, the admin token's
/// hash): created once by whichever replica starts first, in a transaction (see
/// `PgStore::shared_secret`).
const SHARED_SECRETS_V2: &str = "
CREATE TABLE shared_secrets (
    name TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,
    value TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
";

/// SQLite's version 9: what a stack's current traversal has used of its limits.
const STACK_USAGE_V3: &str = "
ALTER TABLE stacks ADD COLUMN evaluated_bytes BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN resource_count BIGINT NOT NULL DEFAULT 0;
";

/// The web view's sessions, as SQLite's version 10 (see there).
const UI_SESSIONS_V4: &str = "
CREATE TABLE ui_sessions (
    key TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX ui_sessions_expires_at ON ui_sessions (expires_at);
";

/// The tables of the SQLite schema (see the SQLite backend's schema for what each holds).
const SCHEMA_V1: &str = "
CREATE TABLE servers (
    name TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    metadata_version BIGINT NOT NULL,
    metadata_body TEXT NOT NULL,
    published_at BIGINT NOT NULL,
    last_seen BIGINT,
    addresses TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE server_previous_tokens (
    name TEXT COLLATE \"C\" NOT NULL PRIMARY KEY REFERENCES servers (name) ON DELETE CASCADE,
    token_hash TEXT NOT NULL UNIQUE,
    expires_at BIGINT NOT NULL
);

CREATE TABLE stacks (
    name TEXT COLLATE \"C\" NOT NULL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    action TEXT NOT NULL,
    state TEXT NOT NULL,
    status_reason TEXT NOT NULL,
    parameters TEXT NOT NULL,
    hidden_parameters TEXT NOT NULL,
    generation BIGINT NOT NULL,
    pending BIGINT NOT NULL,
    deadline BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE stack_templates (
    stack TEXT COLLATE \"C\" NOT NULL PRIMARY KEY REFERENCES stacks (name) ON DELETE CASCADE,
    template TEXT NOT NULL
);

CREATE TABLE nodes (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stack TEXT COLLATE \"C\" NOT NULL REFERENCES stacks (name) ON DELETE CASCADE,
    name TEXT COLLATE \"C\" NOT NULL,
    resource_type TEXT NOT NULL,
    generation BIGINT NOT NULL,
    action TEXT NOT NULL,
    state TEXT NOT NULL,
    status_reason TEXT NOT NULL,
    remaining BIGINT NOT NULL,
    definition TEXT NOT NULL,
    attributes TEXT NOT NULL,
    record TEXT NOT NULL DEFAULT '{}',
    derived_config_id TEXT,
    signal_token_hash TEXT,
    server TEXT COLLATE \"C\",
    updated_at BIGINT NOT NULL,
    UNIQUE (stack, name)
);
CREATE INDEX nodes_signal_token_hash ON nodes (signal_token_hash) WHERE signal_token_hash IS NOT NULL;

CREATE TABLE edges (
    stack TEXT COLLATE \"C\" NOT NULL REFERENCES stacks (name) ON DELETE CASCADE,
    from_node TEXT COLLATE \"C\" NOT NULL,
    to_node TEXT COLLATE \"C\" NOT NULL,
    PRIMARY KEY (stack, from_node, to_node)
);

CREATE TABLE entries (
    server TEXT COLLATE \"C\" NOT NULL REFERENCES servers (name),
    stack TEXT COLLATE \"C\" NOT NULL REFERENCES stacks (name) ON DELETE CASCADE,
    node TEXT COLLATE \"C\" NOT NULL,
    sort_key TEXT COLLATE \"C\" NOT NULL,
    entry TEXT NOT NULL,
    tokens TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (server, stack, node)
);
CREATE INDEX entries_server_sort_key ON entries (server, sort_key, stack, node);
CREATE INDEX entries_stack ON entries (stack);

CREATE TABLE wait_signals (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stack TEXT COLLATE \"C\" NOT NULL REFERENCES stacks (name) ON DELETE CASCADE,
    handle TEXT NOT NULL,
    signal_id TEXT NOT NULL,
    success BOOLEAN NOT NULL,
    reason TEXT NOT NULL,
    data TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    UNIQUE (stack, handle, signal_id)
);

CREATE TABLE events (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stack TEXT COLLATE \"C\" NOT NULL,
    time BIGINT NOT NULL,
    resource TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT NOT NULL
);
CREATE INDEX events_stack ON events (stack, id);

CREATE TABLE retired_signals (
    hash TEXT NOT NULL PRIMARY KEY,
    stack TEXT NOT NULL,
    node TEXT NOT NULL,
    retired_at BIGINT NOT NULL
);
CREATE INDEX retired_signals_retired_at ON retired_signals (retired_at);

CREATE TABLE deadlines (
    stack TEXT COLLATE \"C\" NOT NULL REFERENCES stacks (name) ON DELETE CASCADE,
    node TEXT COLLATE \"C\" NOT NULL,
    generation BIGINT NOT NULL,
    due_at BIGINT NOT NULL,
    PRIMARY KEY (stack, node, generation)
);
CREATE INDEX deadlines_due_at ON deadlines (due_at);
";

/// Brings the database up to the last of `migrations`, each in its own transaction.
pub(crate) fn migrate(client: &mut Client, migrations: &[Migration]) -> Result<(), StoreError> {
    let supported = migrations.last().map_or(0, |migration| migration.version);
    for migration in migrations {
        let mut transaction = client.transaction().map_err(|error| query_error("begin a migration", error))?;
        // Taken before anything is read: a replica that waited here sees the other's work.
        transaction
            .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .map_err(|error| query_error("lock the schema for migration", error))?;
        transaction
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS schema_version (
                     version INTEGER NOT NULL PRIMARY KEY,
                     applied_at BIGINT NOT NULL
                 )",
            )
            .map_err(|error| query_error("create the schema_version table", error))?;
        let current: i32 = transaction
            .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])
            .and_then(|row| row.try_get(0))
            .map_err(|error| query_error("read the schema version", error))?;
        let current = u32::try_from(current).unwrap_or(0);
        if current > supported {
            return Err(StoreError::SchemaTooNew { found: current, supported });
        }
        if migration.version <= current {
            continue;
        }
        let failed =
            |source: postgres::Error| StoreError::Migration { version: migration.version, source: Box::new(source) };
        transaction.batch_execute(migration.sql).map_err(failed)?;
        let version = i32::try_from(migration.version).unwrap_or(i32::MAX);
        transaction
            .execute(
                "INSERT INTO schema_version (version, applied_at)
                 VALUES ($1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)",
                &[&version],
            )
            .map_err(failed)?;
        transaction.commit().map_err(failed)?;
    }
    Ok(())
}
