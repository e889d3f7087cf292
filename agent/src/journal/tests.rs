//! Tests of the journal against temp directories.

use crate::fsutil::sorted_names as names;
use std::os::unix::fs::PermissionsExt;

use anneal_protocol::{Deployment, HookResult};
use serde_json::json;

use super::*;

fn deployment(id: &str) -> Deployment {
    serde_json::from_value(json!({"id": id, "name": format!("n-{id}"), "group": "script", "config": "x"})).unwrap()
}

#[test]
fn open_creates_a_private_directory() {
    let state = tempfile::tempdir().unwrap();
    let journal = Journal::open(&state.path().join("nested")).unwrap();
    assert_eq!(journal.dir(), state.path().join("nested/journal"));
    assert_eq!(fs::metadata(journal.dir()).unwrap().permissions().mode() & 0o777, 0o700);
    assert!(journal.load_all().unwrap().is_empty());
}

#[test]
fn write_then_load_round_trips_atomically() {
    let state = tempfile::tempdir().unwrap();
    let journal = Journal::open(state.path()).unwrap();
    let mut entry = Entry::seen(&deployment("abc-1"), 5);
    journal.write(&entry).unwrap();
    entry.started(6).unwrap();
    entry.finished(HookResult::from_process("ok", "", 0), 7).unwrap();
    journal.write(&entry).unwrap();
    assert_eq!(journal.load("abc-1").unwrap(), Some(entry));
    let path = journal.dir().join("abc-1.json");
    assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(journal.load("other").unwrap(), None);
    // The durable write left its spare file (the previous version's inode) for the next one,
    // and nothing else; the spare goes with the journal.
    let listed = names(journal.dir());
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed[0].starts_with(fsutil::SPARE_PREFIX) && listed[1] == "abc-1.json", "{listed:?}");
    let dir = journal.dir().to_path_buf();
    drop(journal);
    assert_eq!(names(&dir), ["abc-1.json"], "no temp or spare file is left behind");
}

#[test]
fn unsafe_ids_are_refused() {
    let state = tempfile::tempdir().unwrap();
    let journal = Journal::open(state.path()).unwrap();
    assert!(matches!(journal.load("../etc/passwd"), Err(JournalError::UnsafeId { .. })));
    let mut entry = Entry::seen(&deployment("ok"), 0);
    entry.id = "a/b".into();
    assert!(matches!(journal.write(&entry), Err(JournalError::UnsafeId { .. })));
}

#[test]
fn load_all_orders_skips_temp_files_and_quarantines_corrupt_ones() {
    let state = tempfile::tempdir().unwrap();
    let journal = Journal::open(state.path()).unwrap();
    journal.write(&Entry::seen(&deployment("late"), 20)).unwrap();
    journal.write(&Entry::seen(&deployment("early"), 10)).unwrap();
    let dir = journal.dir();
    fs::write(dir.join(".early.json.tmp.99"), "{half").unwrap();
    fs::write(dir.join("notes.txt"), "hello").unwrap();
    fs::write(dir.join("broken.json"), "{not json").unwrap();
    let misfiled = serde_json::to_vec(&Entry::seen(&deployment("someone-else"), 1)).unwrap();
    fs::write(dir.join("misfiled.json"), misfiled).unwrap();

    let ids: Vec<String> = journal.load_all().unwrap().into_iter().map(|entry| entry.id).collect();
    assert_eq!(ids, ["early", "late"]);
    assert_eq!(
        names(dir),
        [".early.json.tmp.99", "broken.json.corrupt", "early.json", "late.json", "misfiled.json.corrupt", "notes.txt"]
    );
    assert_eq!(journal.load("broken").unwrap(), None, "a quarantined entry is gone");
}

#[test]
fn load_quarantines_a_corrupt_entry() {
    let state = tempfile::tempdir().unwrap();
    let journal = Journal::open(state.path()).unwrap();
    fs::write(journal.dir().join("x.json"), "[]").unwrap();
    assert_eq!(journal.load("x").unwrap(), None);
    assert!(journal.dir().join("x.json.corrupt").exists());
}

#[test]
fn write_failure_names_the_file_and_keeps_nothing_half_written() {
    let state = tempfile::tempdir().unwrap();
    let journal = Journal::open(state.path()).unwrap();
    // Replacing the directory with a file makes every write fail (root ignores permissions).
    fs::remove_dir(journal.dir()).unwrap();
    fs::write(journal.dir(), "").unwrap();
    let error = journal.write(&Entry::seen(&deployment("d9"), 0)).unwrap_err();
    assert!(matches!(error, JournalError::Write { .. }));
    assert!(error.to_string().contains("journal/d9.json"), "{error}");
}

#[test]
fn state_names() {
    assert_eq!(State::Signalled.to_string(), "signalled");
    assert_eq!(serde_json::to_value(State::Waiting).unwrap(), "waiting");
}

#[test]
fn the_undelivered_index_follows_writes_and_removals() {
    let state = tempfile::tempdir().unwrap();
    let journal = Journal::open(state.path()).unwrap();
    let http: Deployment = serde_json::from_value(json!({
        "id": "d1", "group": "script", "config": "x",
        "inputs": [{"name": "deploy_signal_id", "value": "http://127.0.0.1:1/s"}],
    }))
    .unwrap();
    let mut entry = Entry::seen(&http, 5);
    journal.write(&entry).unwrap();
    assert!(journal.load_undelivered(Owed::Signal).unwrap().is_empty(), "seen owes nothing");
    entry.started(6).unwrap();
    entry.finished(HookResult::from_process("ok", "", 0), 7).unwrap();
    journal.write(&entry).unwrap();
    assert_eq!(journal.load_undelivered(Owed::Signal).unwrap(), [entry.clone()]);
    entry.delivery_attempted(crate::signal::outcome::DeliveryOutcome::Permanent { error: "no".into() }, 8);
    journal.write_delivery(&entry).unwrap();
    assert!(journal.load_undelivered(Owed::Signal).unwrap().is_empty());
    assert_eq!(journal.refused_count().unwrap(), 1, "a refusal stays counted");

    fs::write(journal.dir().join("d1.run"), "1 2").unwrap();
    journal.remove("d1").unwrap();
    assert_eq!(names(journal.dir()).iter().filter(|name| name.starts_with("d1")).count(), 0, "entry and marker gone");
    assert_eq!(journal.refused_count().unwrap(), 0);
    journal.remove("d1").unwrap();
    assert!(matches!(journal.remove("../x"), Err(JournalError::UnsafeId { .. })));
}
