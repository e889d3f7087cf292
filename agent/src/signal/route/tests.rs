//! Tests of the signal's route: origin fail-over over the sources' lists (pure) and the newer
//! document's URL, on journal entries as the outbox holds them.

use anneal_protocol::{Deployment, HookResult, HttpVerb};
use serde_json::{Value, json};

use super::*;
use crate::journal::State;

const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn urls(list: &[&str]) -> Vec<String> {
    list.iter().map(|url| url.to_string()).collect()
}

fn replicas(lists: &[&[&str]]) -> Replicas {
    let owned: Vec<Vec<String>> = lists.iter().map(|list| urls(list)).collect();
    Replicas::new(owned.iter().map(Vec::as_slice))
}

fn entry_with(inputs: Value) -> Entry {
    let deployment: Deployment =
        serde_json::from_value(json!({"id": "d1", "group": "script", "config": "", "inputs": inputs})).unwrap();
    let mut entry = Entry::seen(&deployment, 0);
    entry.started(1).unwrap();
    entry.finished(HookResult::from_process("done", "", 0), 2).unwrap();
    entry
}

fn http_entry(url: &str, action: &str) -> Entry {
    entry_with(json!([
        {"name": "deploy_action", "value": action},
        {"name": "deploy_signal_id", "value": url},
        {"name": "deploy_signal_verb", "value": "PUT"}
    ]))
}

#[test]
fn the_next_origin_of_the_list_gets_the_same_path_and_query() {
    let replicas = replicas(&[&["http://a:8080/v1/servers/vm/metadata", "http://b:8080/v1/servers/vm/metadata"]]);
    let signal = format!("http://a:8080/v1/signals/{TOKEN}?x=a%2Fb&y=%20");
    let next = replicas.next_url(&signal).unwrap();
    assert_eq!(next, format!("http://b:8080/v1/signals/{TOKEN}?x=a%2Fb&y=%20"), "the token is kept exactly");
    assert_eq!(replicas.next_url(&next).unwrap(), signal, "after the last origin comes the first");
}

#[test]
fn lists_cycle_in_order_across_schemes_and_ports() {
    let replicas = replicas(&[&["https://a:8443/m", "https://b/m", "http://c:8080/m"]]);
    let path = "/v1/waitconditions/h?sig=1#f";
    let at = |origin: &str| format!("{origin}{path}");
    assert_eq!(replicas.next_url(&at("https://a:8443")), Some(at("https://b")));
    assert_eq!(replicas.next_url(&at("https://b:443")), Some(at("http://c:8080")), "443 is https's default");
    assert_eq!(replicas.next_url(&at("http://c:8080")), Some(at("https://a:8443")));
    assert_eq!(replicas.next_url(&at("http://a:8443")), None, "another scheme is another origin");
}

#[test]
fn an_origin_no_source_lists_is_left_alone() {
    let replicas = replicas(&[&["http://a:8080/m", "http://b:8080/m"]]);
    assert_eq!(replicas.next_url("http://c:8080/v1/signals/x"), None);
    assert_eq!(replicas.next_url("http://a:8081/v1/signals/x"), None, "another port is another origin");
    assert_eq!(replicas.next_url("http://user:pw@a:8080/s"), None, "credentials never go to another host");
    assert_eq!(replicas.next_url("not a url"), None);
    assert_eq!(replicas.next_url("ftp://a:8080/s"), None);
    let single = replicas_of_one_origin();
    assert_eq!(single.next_url("http://a:8080/s"), None, "one origin offers no other replica");
}

fn replicas_of_one_origin() -> Replicas {
    replicas(&[&["http://a:8080/m"], &["http://a:8080/x", "http://A:8080/y"]])
}

#[test]
fn the_first_list_holding_the_origin_decides_and_hosts_compare_normalised() {
    let replicas = replicas(&[&["http://a/m", "http://b/m"], &["http://a/n", "http://c/n"]]);
    assert_eq!(replicas.next_url("http://A:80/s?q"), Some("http://b/s?q".to_string()));
    let ipv6 = self::replicas(&[&["http://[::1]:8080/m", "http://127.0.0.1:9/m"]]);
    assert_eq!(ipv6.next_url("http://[::1]:8080/s"), Some("http://127.0.0.1:9/s".to_string()));
    assert_eq!(ipv6.next_url("http://127.0.0.1:9"), Some("http://[::1]:8080".to_string()));
}

#[test]
fn from_config_takes_every_http_source() {
    let text = r#"
        [[source]]
        kind = "http"
        url = ["http://a:1/m", "http://b:1/m"]
        [[source]]
        kind = "http"
        url = "http://z:1/m"
        [[source]]
        kind = "local"
        path = "/l"
    "#;
    let config = crate::config::parse(text, std::path::Path::new("/etc/anneal/agent.toml")).unwrap();
    let replicas = Replicas::from_config(&config);
    assert_eq!(replicas.next_url("http://b:1/s"), Some("http://a:1/s".to_string()));
    assert_eq!(replicas.next_url("http://z:1/s"), None);
}

#[test]
fn fail_over_moves_the_target_and_keeps_the_verb() {
    let router = SignalRouter::new(replicas(&[&["http://a:1/m", "http://b:1/m"]]));
    let own = format!("http://a:1/v1/signals/{TOKEN}");
    let mut entry = http_entry(&own, "CREATE");
    assert_eq!(router.fail_over(&mut entry), Some(format!("http://b:1/v1/signals/{TOKEN}")));
    let SignalTransport::Http { url, verb } = transport_of(&entry) else { panic!() };
    assert_eq!((url.as_str(), verb), (format!("http://b:1/v1/signals/{TOKEN}").as_str(), HttpVerb::Put));
    assert_eq!(router.fail_over(&mut entry), Some(own.clone()), "cycling back to the first");
    let mut elsewhere = http_entry("http://c:1/s", "CREATE");
    assert_eq!(router.fail_over(&mut elsewhere), None);
    assert_eq!(elsewhere.signal.as_ref().unwrap().target_url, None, "retried as it is");
    let mut quiet = entry_with(json!([]));
    assert_eq!(quiet.state, State::Signalled);
    assert_eq!(router.fail_over(&mut quiet), None);
}

#[test]
fn a_newer_documents_url_for_the_same_action_is_adopted() {
    let mut entry = http_entry("http://a:1/s/1", "CREATE");
    assert!(!adopt(&mut entry, Some("CREATE"), "http://a:1/s/1"), "the same URL changes nothing");
    assert!(!adopt(&mut entry, Some("UPDATE"), "http://b:1/s/1"), "another action is another signal");
    assert!(!adopt(&mut entry, None, "http://b:1/s/1"));
    assert!(adopt(&mut entry, Some("CREATE"), "http://b:1/s/1"));
    assert_eq!(current_url(&entry).as_deref(), Some("http://b:1/s/1"));
    entry.signal.as_mut().unwrap().target_url = Some("http://c:1/s/1".to_string());
    assert!(
        !adopt(&mut entry, Some("CREATE"), "http://b:1/s/1"),
        "a fail-over is kept while the document says the same"
    );
    assert_eq!(current_url(&entry).as_deref(), Some("http://c:1/s/1"));
    assert!(adopt(&mut entry, Some("CREATE"), "http://a:1/s/1"), "back to the first URL");
    let signal = entry.signal.as_ref().unwrap();
    assert_eq!((signal.document_url.as_deref(), signal.target_url.as_deref()), (None, None));
    assert_eq!(current_url(&entry).as_deref(), Some("http://a:1/s/1"));
    let mut zaqar = entry_with(
        json!([{"name": "deploy_auth_url", "value": "http://k"}, {"name": "deploy_queue_id", "value": "q"}]),
    );
    assert!(!adopt(&mut zaqar, None, "http://b:1/s"));
    assert!(matches!(transport_of(&zaqar), SignalTransport::Zaqar { .. }));
}

#[test]
fn the_router_adopts_what_the_current_document_lists() {
    let router = SignalRouter::default();
    let document = |url: &str| -> Vec<Deployment> {
        let entry = http_entry(url, "CREATE");
        vec![entry.deployment]
    };
    assert!(router.observe(&document("http://a:1/s")));
    assert!(!router.observe(&document("http://a:1/s")), "nothing changed");
    let mut entry = http_entry("http://a:1/s", "CREATE");
    assert!(!router.adopt_current(&mut entry));
    assert!(router.observe(&document("http://b:1/s")));
    assert!(router.adopt_current(&mut entry));
    assert_eq!(current_url(&entry).as_deref(), Some("http://b:1/s"));
    assert!(!router.adopt_current(&mut entry), "adopted once");
    router.observe(&[]);
    assert!(!router.adopt_current(&mut entry), "a deployment the document no longer lists keeps its URL");
}

#[test]
fn entries_written_before_keep_reading_and_the_new_fields_are_optional() {
    let mut entry = http_entry("http://a:1/s", "CREATE");
    let plain = serde_json::to_value(&entry).unwrap();
    let signal = plain["signal"].as_object().unwrap();
    assert!(!signal.contains_key("document_url") && !signal.contains_key("target_url"), "{plain}");
    let back: Entry = serde_json::from_value(plain).unwrap();
    assert_eq!(back, entry, "an entry without the fields reads as one without a route");
    entry.signal.as_mut().unwrap().document_url = Some("http://b:1/s".into());
    entry.signal.as_mut().unwrap().target_url = Some("http://a:1/s".into());
    let back: Entry = serde_json::from_value(serde_json::to_value(&entry).unwrap()).unwrap();
    assert_eq!(back, entry);
}
