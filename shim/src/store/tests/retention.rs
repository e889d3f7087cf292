//! History retention: `prune_history` keeps `events` and `retired_signals` bounded without
//! removing what `stack events` shows or a retired hash a late signal may still carry.

use super::{MIGRATIONS, Migration, database_path, raw_connection, run, schema_versions, store_with_stack};
use crate::store::*;

const DAY_MS: u64 = 86_400_000;

/// The wall clock, which SQLite's `retired_at` follows.
fn now_millis() -> u64 {
    let elapsed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    u64::try_from(elapsed.as_millis()).unwrap()
}

fn keep_everything() -> HistoryRetention {
    HistoryRetention { max_events_per_stack: None, deleted_stack_events_ms: None, retired_signals_ms: None }
}

fn append(store: &SqliteStore, stack: &str, time: u64, count: usize) -> Vec<u64> {
    run(store, |tx| (0..count).map(|index| tx.append_event(stack, time, "r", "S", &index.to_string())).collect())
}

fn event_ids(store: &SqliteStore, stack: &str) -> Vec<u64> {
    run(store, |tx| tx.events(stack)).into_iter().map(|event| event.id).collect()
}

#[test]
fn events_beyond_the_per_stack_cap_go_oldest_first() {
    let store = store_with_stack();
    let app = append(&store, "app", 2_000, 30);
    let other = append(&store, "other", 2_000, 5);
    let now = 3_000;
    assert_eq!(run(&store, |tx| tx.prune_history(&keep_everything(), now)), HistoryPruned::default());
    let capped = HistoryRetention { max_events_per_stack: Some(10), ..keep_everything() };
    assert_eq!(run(&store, |tx| tx.prune_history(&capped, now)), HistoryPruned { events: 20, retired_signals: 0 });
    assert_eq!(event_ids(&store, "app"), app[20..], "the newest ten are kept");
    assert_eq!(event_ids(&store, "other"), other, "a stack under the cap keeps everything");
    assert_eq!(run(&store, |tx| tx.prune_history(&capped, now)), HistoryPruned::default(), "idempotent");
}

#[test]
fn events_of_deleted_stacks_age_out_and_those_of_an_earlier_stack_of_the_name_go() {
    let store = store_with_stack();
    // `app` was created at 1_000 (see `stack_row`); events before it belong to an earlier `app`,
    // which `stack events` no longer shows.
    let earlier = append(&store, "app", 500, 3);
    let current = append(&store, "app", 1_000, 2);
    let deleted = append(&store, "gone", 2 * DAY_MS, 4);
    let retention = HistoryRetention { deleted_stack_events_ms: Some(DAY_MS), ..keep_everything() };
    let pruned = run(&store, |tx| tx.prune_history(&retention, 3 * DAY_MS - 1));
    assert_eq!(pruned.events, earlier.len(), "the deleted stack's last event is not a day old yet");
    assert_eq!(event_ids(&store, "app"), current);
    assert_eq!(event_ids(&store, "gone"), deleted);
    let pruned = run(&store, |tx| tx.prune_history(&retention, 3 * DAY_MS + 1));
    assert_eq!(pruned.events, deleted.len());
    assert!(event_ids(&store, "gone").is_empty());
    assert_eq!(event_ids(&store, "app"), current, "an existing stack's events never age out");
}

#[test]
fn retired_signal_hashes_are_kept_for_their_retention_then_removed() {
    let store = store_with_stack();
    run(&store, |tx| tx.retire_signal_hash("hash", "app", "deploy"));
    let now = now_millis();
    let retention = HistoryRetention { retired_signals_ms: Some(30 * DAY_MS), ..keep_everything() };
    assert_eq!(run(&store, |tx| tx.prune_history(&retention, now + 29 * DAY_MS)).retired_signals, 0);
    assert!(run(&store, |tx| tx.is_retired_signal_hash("hash")), "a late signal is still known stale");
    assert_eq!(run(&store, |tx| tx.prune_history(&keep_everything(), now + 3_650 * DAY_MS)).retired_signals, 0);
    assert_eq!(run(&store, |tx| tx.prune_history(&retention, now + 31 * DAY_MS)).retired_signals, 1);
    assert!(!run(&store, |tx| tx.is_retired_signal_hash("hash")));
}

/// Version 7 dates the hashes retired before it as retired at the migration, so none is pruned
/// at once.
#[test]
fn version_7_dates_earlier_retired_hashes_now() {
    let directory = tempfile::tempdir().unwrap();
    let path = database_path(directory.path());
    let previous: Vec<Migration> = MIGRATIONS
        .iter()
        .filter(|migration| migration.version < 7)
        .map(|migration| Migration { version: migration.version, sql: migration.sql })
        .collect();
    drop(SqliteStore::open_with_migrations(&path, &previous).unwrap());
    raw_connection(&path)
        .execute_batch("INSERT INTO retired_signals (hash, stack, node) VALUES ('old', 'app', 'deploy')")
        .unwrap();
    let store = SqliteStore::open(&path).unwrap();
    assert!(schema_versions(&path).contains(&7), "version 7 ran");
    let now = now_millis();
    let retention = HistoryRetention { retired_signals_ms: Some(DAY_MS), ..keep_everything() };
    assert_eq!(run(&store, |tx| tx.prune_history(&retention, now)).retired_signals, 0);
    assert_eq!(run(&store, |tx| tx.prune_history(&retention, now + 2 * DAY_MS)).retired_signals, 1);
}
