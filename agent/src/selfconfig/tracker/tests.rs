use std::fs;
use std::path::Path;

use serde_json::json;

use super::*;
use crate::selfconfig::{file_path, load, store};

const BOOT: &str = "source[0] heat-local";
const SHIM: &str = "source[1] http";
const OPTED_IN: &str = "source[2] http";
const LOCAL: &str = "source[3] local";
const DERIVED: &str = "os-collect-config request";

/// An image's heat-local, the shim (a plain http source), an http source that opts in with
/// `self_configure` when `opted_in`, and a plain local dir.
fn config(state_dir: &Path, opted_in: bool) -> Config {
    let text = format!(
        "[agent]\nstate_dir = {:?}\n\
         [[source]]\nkind = \"heat-local\"\npath = \"/nonexistent/cfn-init-data\"\n\
         [[source]]\nkind = \"http\"\nurl = \"http://127.0.0.1:8080/v1/servers/vm/metadata\"\n\
         [[source]]\nkind = \"http\"\nurl = \"http://127.0.0.1:8081/v1/AUTH_t/c/o\"\nself_configure = {opted_in}\n\
         [[source]]\nkind = \"local\"\npath = \"/nonexistent/local.d\"\n",
        state_dir.display().to_string()
    );
    crate::config::parse(&text, Path::new("/etc/anneal/agent.toml")).unwrap()
}

fn request_key(url: &str) -> Value {
    json!({"collectors": ["ec2", "request", "local"], "request": {"metadata_url": url}})
}

/// The view of documents: (source, the key its document carries).
fn view(entries: &[(&str, Option<&Value>)]) -> Vec<CarriedKey> {
    entries.iter().map(|(source, key)| CarriedKey { source: source.to_string(), key: key.cloned() }).collect()
}

fn persisted(state_dir: &Path) -> Option<Persisted> {
    load(state_dir).unwrap()
}

fn supplied_by(state_dir: &Path) -> Supplier {
    persisted(state_dir).expect("the sources are persisted").supplier
}

fn file_text(state_dir: &Path) -> String {
    fs::read_to_string(file_path(state_dir)).unwrap()
}

#[test]
fn the_tracker_follows_changes_and_ignores_the_rest() {
    let state = tempfile::tempdir().unwrap();
    let path = file_path(state.path());
    let mut tracker = Tracker::load(state.path(), &config(state.path(), false));
    assert!(tracker.current().is_none());
    let first = request_key("http://127.0.0.1:1/first");
    assert!(tracker.observe(&view(&[(BOOT, Some(&first))])), "a first key configures");
    assert_eq!(supplied_by(state.path()), Supplier::Source(BOOT.to_string()));
    fs::remove_file(&path).unwrap();
    assert!(!tracker.observe(&view(&[(BOOT, Some(&first))])), "the same key changes nothing");
    assert!(!tracker.observe(&[]), "nor does a view of sources without documents");
    let same_from_derived = view(&[(BOOT, Some(&first)), (DERIVED, Some(&first))]);
    assert!(!tracker.observe(&same_from_derived), "the same sources from another document: nothing to do");
    assert!(!tracker.observe(&view(&[(BOOT, Some(&first)), (DERIVED, None)])), "a derived document without it");
    assert!(!path.exists(), "and no rewrite");

    let second = request_key("http://127.0.0.1:1/second");
    let updated = view(&[(BOOT, Some(&first)), (DERIVED, Some(&second))]);
    assert!(tracker.observe(&updated), "a changed key switches");
    assert!(file_text(state.path()).contains("/second"));
    assert!(!tracker.observe(&updated));

    let mut broken = second.clone();
    broken["request"]["metadata_url"] = json!(7);
    assert!(!tracker.observe(&view(&[(BOOT, Some(&first)), (DERIVED, Some(&broken))])));
    assert!(file_text(state.path()).contains("/second"), "an invalid key keeps the sources in use");
    assert_eq!(tracker.current().unwrap().source_names(), [DERIVED]);
}

/// The finding: the shim's document (or a local dir) redirected polling. Only the kinds that
/// read Heat's server metadata, and an http or local source that opts in, may configure.
#[test]
fn a_key_counts_only_from_a_source_that_may_configure() {
    let state = tempfile::tempdir().unwrap();
    let elsewhere = request_key("http://192.0.2.66:8080/v1/AUTH_evil/c/o");
    let mut tracker = Tracker::load(state.path(), &config(state.path(), true));
    assert!(!tracker.observe(&view(&[(SHIM, Some(&elsewhere))])), "a plain http source's key is ignored");
    assert!(!tracker.observe(&view(&[(LOCAL, Some(&elsewhere))])), "so is a plain local dir's");
    assert!(!tracker.observe(&view(&[("source[9] http", Some(&elsewhere))])), "and a source no config names");
    assert!(tracker.current().is_none() && persisted(state.path()).is_none(), "nothing is configured");

    let swift = request_key("http://127.0.0.1:8081/v1/AUTH_t/c/server");
    assert!(tracker.observe(&view(&[(SHIM, Some(&elsewhere)), (OPTED_IN, Some(&swift))])), "one that opts in may");
    assert_eq!(supplied_by(state.path()), Supplier::Source(OPTED_IN.to_string()));
    assert!(file_text(state.path()).contains("/c/server"), "its key, not the shim's");
    let boot = request_key("http://127.0.0.1:8082/boot");
    assert!(tracker.observe(&view(&[(BOOT, Some(&boot)), (SHIM, Some(&elsewhere))])), "and a heat-local source");
    assert_eq!(supplied_by(state.path()), Supplier::Source(BOOT.to_string()));
    let mut shim_key_changed = elsewhere.clone();
    shim_key_changed["polling_interval"] = json!(5);
    assert!(!tracker.observe(&view(&[(BOOT, Some(&boot)), (SHIM, Some(&shim_key_changed))])), "never the shim's");
}

/// The redirect does not outlive the repair: the supplier's document without the key drops the
/// sources and the file; a different key replaces them; the key back configures again.
#[test]
fn the_sources_go_when_their_supplier_drops_the_key() {
    let state = tempfile::tempdir().unwrap();
    let settings = config(state.path(), true);
    let mut tracker = Tracker::load(state.path(), &settings);
    let first = request_key("http://127.0.0.1:8081/v1/AUTH_t/c/first");
    let second = request_key("http://127.0.0.1:8081/v1/AUTH_t/c/second");
    assert!(tracker.observe(&view(&[(OPTED_IN, Some(&first)), (DERIVED, None)])));
    assert!(tracker.observe(&view(&[(OPTED_IN, Some(&second)), (DERIVED, None)])), "a different key replaces");
    assert!(file_text(state.path()).contains("/c/second"));

    assert!(tracker.observe(&view(&[(OPTED_IN, None), (DERIVED, Some(&second))])), "its document lost the key");
    assert!(tracker.current().is_none(), "the sources are dropped");
    assert!(!file_path(state.path()).exists(), "and the file is removed");
    assert!(Tracker::load(state.path(), &settings).current().is_none(), "also for the next start");
    assert!(!tracker.observe(&view(&[(OPTED_IN, None)])), "nothing more to drop");

    assert!(tracker.observe(&view(&[(OPTED_IN, Some(&second))])), "the key back configures again");
    assert_eq!(supplied_by(state.path()), Supplier::Source(OPTED_IN.to_string()));
}

/// A supplier that is down keeps its cached document (listed with its key) or has none (not
/// listed): either way the sources stay.
#[test]
fn a_supplier_that_is_down_keeps_its_sources() {
    let state = tempfile::tempdir().unwrap();
    let mut tracker = Tracker::load(state.path(), &config(state.path(), true));
    let key = request_key("http://127.0.0.1:8081/v1/AUTH_t/c/o");
    assert!(tracker.observe(&view(&[(OPTED_IN, Some(&key))])));
    assert!(!tracker.observe(&view(&[(DERIVED, None)])), "no document from the supplier tells nothing");
    assert!(!tracker.observe(&view(&[(OPTED_IN, Some(&key)), (DERIVED, None)])), "its cached one still has it");
    assert!(tracker.current().is_some() && file_path(state.path()).exists());
}

/// A self-configured source's newer key (credentials rotated, another transport) replaces the
/// sources but keeps their root: the config's source that started the chain. Its repair ends
/// the whole chain; a derived document without the key does not.
#[test]
fn a_chain_of_keys_keeps_its_root() {
    let state = tempfile::tempdir().unwrap();
    let mut tracker = Tracker::load(state.path(), &config(state.path(), true));
    let first = request_key("http://127.0.0.1:8081/v1/AUTH_t/c/first");
    let rotated = request_key("http://127.0.0.1:8081/v1/AUTH_t/c/rotated");
    assert!(tracker.observe(&view(&[(OPTED_IN, Some(&first))])));
    assert!(tracker.observe(&view(&[(OPTED_IN, Some(&first)), (DERIVED, Some(&rotated))])));
    assert!(file_text(state.path()).contains("/c/rotated"));
    assert_eq!(supplied_by(state.path()), Supplier::Source(OPTED_IN.to_string()), "the root stays");
    assert!(!tracker.observe(&view(&[(OPTED_IN, Some(&first)), (DERIVED, None)])), "a derived document");
    assert!(tracker.observe(&view(&[(OPTED_IN, None), (DERIVED, Some(&rotated))])), "the root's repair");
    assert!(!file_path(state.path()).exists());
    assert!(!tracker.observe(&view(&[(OPTED_IN, None), (DERIVED, Some(&rotated))])), "its key no longer counts");
}

/// After a drop, the config's own keys are looked at as on a first start: the boot key applies.
#[test]
fn after_a_drop_the_configs_own_keys_count_as_on_a_first_start() {
    let state = tempfile::tempdir().unwrap();
    let mut tracker = Tracker::load(state.path(), &config(state.path(), true));
    let boot = request_key("http://127.0.0.1:8082/boot");
    let swift = request_key("http://127.0.0.1:8081/v1/AUTH_t/c/o");
    assert!(tracker.observe(&view(&[(BOOT, Some(&boot)), (OPTED_IN, Some(&swift))])), "the last source's key");
    assert!(file_text(state.path()).contains("/c/o"));
    assert!(tracker.observe(&view(&[(BOOT, Some(&boot)), (OPTED_IN, None), (DERIVED, None)])));
    assert_eq!(supplied_by(state.path()), Supplier::Source(BOOT.to_string()));
    assert!(file_text(state.path()).contains("/boot"));
}

/// Across a restart: a supplier that may no longer configure (its opt-in removed, or gone from
/// the config) drops the sources at load; one whose cached document lost the key drops them
/// before anything is polled; one whose cached document has it keeps them.
#[test]
fn a_restart_drops_sources_their_supplier_no_longer_backs() {
    let state = tempfile::tempdir().unwrap();
    let key = request_key("http://127.0.0.1:8081/v1/AUTH_t/c/o");
    let derived = derive(&key).unwrap();
    let from = |supplier: &str| Persisted { config: derived.clone(), supplier: Supplier::Source(supplier.to_string()) };
    for gone in [OPTED_IN, "source[7] http", SHIM] {
        store(state.path(), &from(gone)).unwrap();
        assert!(Tracker::load(state.path(), &config(state.path(), false)).current().is_none(), "{gone}");
        assert!(!file_path(state.path()).exists(), "{gone}: removed");
    }

    let settings = config(state.path(), true);
    store(state.path(), &from(OPTED_IN)).unwrap();
    let mut tracker = Tracker::load(state.path(), &settings);
    assert!(tracker.current().is_some());
    assert!(tracker.start(&view(&[(OPTED_IN, None), (DERIVED, None)])), "the cached document lost it");
    assert!(tracker.current().is_none() && !file_path(state.path()).exists());

    store(state.path(), &from(OPTED_IN)).unwrap();
    let mut tracker = Tracker::load(state.path(), &settings);
    assert!(!tracker.start(&view(&[(OPTED_IN, Some(&key))])));
    assert!(!tracker.observe(&view(&[(OPTED_IN, Some(&key))])), "a key already applied");
    assert_eq!(tracker.current(), Some(&derived));
}

/// A file an earlier version wrote names no supplier: once every config source has a document,
/// the config source carrying its key becomes the supplier, a source that may not configure
/// drops it, and none leaves it to the operator as a bootstrap.
#[test]
fn an_unrecorded_supplier_is_found_from_the_documents() {
    let state = tempfile::tempdir().unwrap();
    let settings = config(state.path(), true);
    let key = request_key("http://127.0.0.1:8081/v1/AUTH_t/c/o");
    let other = request_key("http://127.0.0.1:8081/v1/AUTH_t/c/other");
    let unrecorded = Persisted { config: derive(&key).unwrap(), supplier: Supplier::Unrecorded };
    let all = |shim: Option<&Value>, opted_in: Option<&Value>| {
        view(&[(BOOT, Some(&other)), (SHIM, shim), (OPTED_IN, opted_in), (LOCAL, None), (DERIVED, Some(&key))])
    };

    store(state.path(), &unrecorded).unwrap();
    let mut tracker = Tracker::load(state.path(), &settings);
    assert!(!tracker.observe(&view(&[(BOOT, Some(&other)), (SHIM, Some(&key))])), "not every source answered");
    assert_eq!(supplied_by(state.path()), Supplier::Unrecorded);
    assert!(tracker.observe(&all(Some(&key), None)), "the shim's key made them: dropped");
    assert_eq!(supplied_by(state.path()), Supplier::Source(BOOT.to_string()), "then the boot key applies");
    assert!(file_text(state.path()).contains("/c/other"));

    store(state.path(), &unrecorded).unwrap();
    let mut tracker = Tracker::load(state.path(), &settings);
    assert!(!tracker.observe(&all(None, Some(&key))));
    assert_eq!(supplied_by(state.path()), Supplier::Source(OPTED_IN.to_string()));

    store(state.path(), &unrecorded).unwrap();
    let mut tracker = Tracker::load(state.path(), &settings);
    assert!(!tracker.observe(&all(None, None)), "only a derived source carries it");
    assert_eq!(supplied_by(state.path()), Supplier::Bootstrap);
}

#[test]
fn a_stale_boot_key_does_not_switch_back_after_a_restart() {
    let state = tempfile::tempdir().unwrap();
    let boot = request_key("http://127.0.0.1:1/boot");
    let newer = request_key("http://127.0.0.1:1/newer");
    let chained = Persisted { config: derive(&newer).unwrap(), supplier: Supplier::Source(BOOT.to_string()) };
    store(state.path(), &chained).unwrap();
    let mut tracker = Tracker::load(state.path(), &config(state.path(), false));
    assert_eq!(tracker.current(), Some(&derive(&newer).unwrap()));
    // The cached documents at start: the boot file still holds the first key, and the derived
    // source's cache is gone (its identity changed with its URL).
    assert!(!tracker.start(&view(&[(BOOT, Some(&boot))])));
    assert!(!tracker.observe(&view(&[(BOOT, Some(&boot))])));
    assert!(file_text(state.path()).contains("/newer"));
}

#[test]
fn a_stale_boot_key_does_not_undo_a_bootstrap() {
    let state = tempfile::tempdir().unwrap();
    let boot = request_key("http://127.0.0.1:1/boot");
    let bootstrapped = derive(&request_key("http://127.0.0.1:1/bootstrapped")).unwrap();
    store(state.path(), &Persisted { config: bootstrapped, supplier: Supplier::Bootstrap }).unwrap();
    let mut tracker = Tracker::load(state.path(), &config(state.path(), false));
    // No cached documents: the first keys are taken as applied.
    assert!(!tracker.observe(&view(&[(BOOT, Some(&boot))])));
    assert!(file_text(state.path()).contains("/bootstrapped"));
    assert!(!tracker.observe(&view(&[(BOOT, None)])), "no source can drop a bootstrap");
    // A later change of that document's key does act.
    let changed = request_key("http://127.0.0.1:1/changed");
    assert!(tracker.observe(&view(&[(BOOT, Some(&changed))])));
    assert!(file_text(state.path()).contains("/changed"));
}

#[test]
fn a_redirect_names_each_new_host_without_path_query_or_user() {
    let state = tempfile::tempdir().unwrap();
    let mut tracker = Tracker::load(state.path(), &config(state.path(), true));
    let host = |url: &str| tracker.new_hosts(&derive(&request_key(url)).unwrap());
    assert_eq!(host("http://127.0.0.1:8081/v1/AUTH_t/c/o?temp_url_sig=s"), [], "a config source's host and port");
    let expected = |host: &str| vec![NewHost { source: DERIVED.to_string(), kind: "http", host: host.to_string() }];
    assert_eq!(host("http://127.0.0.1:9999/v1/AUTH_t/c/o?temp_url_sig=s"), expected("127.0.0.1:9999"));
    assert_eq!(host("https://user:pw@swift.example/v1/AUTH_t/c/o?sig=s"), expected("swift.example:443"));
    assert_eq!(host("http://[::1]/o"), expected("[::1]:80"));
    let heat = json!({"collectors": ["heat"], "heat": {"user_id": "u", "password": "p", "project_id": "p",
        "auth_url": "http://keystone.example:5000/v3", "stack_id": "s/1", "resource_name": "server"}});
    let found = tracker.new_hosts(&derive(&heat).unwrap());
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].kind, found[0].host.as_str()), ("heat", "keystone.example:5000"), "Keystone's host");
    // The sources in use count as polled.
    let swift = request_key("http://127.0.0.1:9999/v1/AUTH_t/c/o");
    assert!(tracker.observe(&view(&[(OPTED_IN, Some(&swift))])));
    let rotated = derive(&request_key("http://127.0.0.1:9999/v1/AUTH_t/c/rotated")).unwrap();
    assert_eq!(tracker.new_hosts(&rotated), []);
}
