use std::time::Duration;

use super::*;

fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name_and_labels).and_then(|rest| rest.strip_prefix(' ')))
        .map(|value| value.parse().expect("a number"))
}

#[test]
fn a_scrape_reports_the_snapshot_and_what_was_counted() {
    let metrics = Metrics::new();
    metrics.signal("deployment", "applied");
    metrics.signal("deployment", "applied");
    metrics.signal("wait_condition", "unknown_token");
    metrics.transaction(Duration::from_millis(3));
    metrics.wakeup(Duration::from_millis(40));
    metrics.sweeper_fired(2);
    let held = metrics.hold_long_poll();
    let snapshot = Snapshot {
        stacks: vec![("CREATE_IN_PROGRESS".into(), 2)],
        resources: vec![("deployment".into(), "complete".into(), 5)],
        servers: vec![("vm1".into(), Some(1.5)), ("vm2".into(), None)],
    };
    let text = metrics.render(&snapshot);
    assert_eq!(sample(&text, "anneal_shim_stacks{status=\"CREATE_IN_PROGRESS\"}"), Some(2.0), "{text}");
    assert_eq!(sample(&text, "anneal_shim_resources{kind=\"deployment\",phase=\"complete\"}"), Some(5.0));
    assert_eq!(sample(&text, "anneal_shim_server_last_seen_age_seconds{server=\"vm1\"}"), Some(1.5));
    assert_eq!(sample(&text, "anneal_shim_servers_never_seen"), Some(1.0));
    assert_eq!(sample(&text, "anneal_shim_signals_total{route=\"deployment\",outcome=\"applied\"}"), Some(2.0));
    assert_eq!(
        sample(&text, "anneal_shim_signals_total{route=\"wait_condition\",outcome=\"unknown_token\"}"),
        Some(1.0)
    );
    assert_eq!(sample(&text, "anneal_shim_long_polls_held"), Some(1.0));
    assert_eq!(sample(&text, "anneal_shim_store_transaction_seconds_count"), Some(1.0));
    assert_eq!(sample(&text, "anneal_shim_wakeup_seconds_bucket{le=\"0.064\"}"), Some(1.0));
    assert_eq!(sample(&text, "anneal_shim_wakeup_seconds_bucket{le=\"0.032\"}"), Some(0.0));
    assert_eq!(sample(&text, "anneal_shim_sweeper_firings_total"), Some(2.0));
    assert!(text.ends_with("# EOF\n"));
    drop(held);
    let later = metrics.render(&Snapshot::default());
    assert_eq!(sample(&later, "anneal_shim_long_polls_held"), Some(0.0));
    assert!(!later.contains("CREATE_IN_PROGRESS"), "a status no stack has any more is gone: {later}");
    assert!(!later.contains("server=\"vm1\""));
}

#[test]
fn hostile_label_values_are_escaped() {
    let metrics = Metrics::new();
    let snapshot = Snapshot { servers: vec![("vm\"1\n} 9".into(), Some(1.0))], ..Snapshot::default() };
    let text = metrics.render(&snapshot);
    let line =
        text.lines().find(|line| line.starts_with("anneal_shim_server_last_seen_age_seconds{")).expect("a sample");
    assert_eq!(line, "anneal_shim_server_last_seen_age_seconds{server=\"vm\\\"1\\n} 9\"} 1.0", "{text}");
}
