//! The agent config formats: the TOML is valid and uses only keys the agent accepts, strings are
//! escaped, and the cloud-config is YAML that installs the same config and the token.

use yaml_rust2::{Yaml, YamlLoader};

use crate::client::formats::{
    AGENT_CA_PATH, AGENT_TOKEN_PATH, TrustedCa, agent_config, agent_config_with_token_note, cloud_init,
};
use crate::model::ServerCredentials;
use toml::{Table, Value as TomlValue};

/// The keys anneal-agent's config accepts (agent/src/config.rs; unknown keys are rejected there).
const AGENT_KEYS: [&str; 7] = [
    "state_dir",
    "hooks_dirs",
    "poll_interval_secs",
    "hook_timeout_secs",
    "hook_kill_grace_secs",
    "parallel",
    "hook_env",
];
const HTTP_SOURCE_KEYS: [&str; 7] =
    ["kind", "url", "token_file", "ca_file", "connect_timeout_secs", "read_timeout_secs", "long_poll_secs"];

fn credentials(metadata_url: &str) -> ServerCredentials {
    ServerCredentials {
        name: "web1".to_string(),
        token: "srv_tok-123".to_string(),
        metadata_url: metadata_url.to_string(),
        request_url: "http://shim:8080/v1/metadata/srv_tok-123".to_string(),
        metadata_urls: Vec::new(),
    }
}

fn string(table: &Table, key: &str) -> String {
    match table.get(key) {
        Some(TomlValue::String(text)) => text.clone(),
        other => panic!("{key}: {other:?}"),
    }
}

/// Parses the config with a real TOML parser and checks it the way the agent would; returns its
/// http source.
fn check_agent_config(text: &str) -> Table {
    let document: Table = text.parse().unwrap_or_else(|error| panic!("{error}\n{text}"));
    for key in document.keys() {
        assert!(key == "agent" || key == "source", "unexpected top-level key {key}");
    }
    let Some(TomlValue::Table(agent)) = document.get("agent") else { panic!("[agent]") };
    for key in agent.keys() {
        assert!(AGENT_KEYS.contains(&key.as_str()), "unknown [agent] key {key}");
    }
    assert_eq!(string(agent, "state_dir"), "/var/lib/anneal");
    let Some(TomlValue::Array(hooks_dirs)) = agent.get("hooks_dirs") else { panic!("hooks_dirs") };
    assert_eq!(hooks_dirs.len(), 3);
    assert_eq!(agent.get("parallel"), Some(&TomlValue::Integer(1)));
    let Some(TomlValue::Array(sources)) = document.get("source") else {
        panic!("[[source]] must be an array of tables")
    };
    assert_eq!(sources.len(), 1);
    let Some(TomlValue::Table(source)) = sources.first() else { panic!("[[source]] entry") };
    for key in source.keys() {
        assert!(HTTP_SOURCE_KEYS.contains(&key.as_str()), "unknown http source key {key}");
    }
    assert_eq!(string(source, "kind"), "http");
    assert_eq!(string(source, "token_file"), AGENT_TOKEN_PATH);
    source.clone()
}

#[test]
fn toml_is_a_complete_agent_config_then_the_token_note() {
    let text = agent_config_with_token_note(&credentials("http://shim:8080/v1/servers/web1/metadata"), None);
    let source = check_agent_config(&text);
    assert_eq!(string(&source, "url"), "http://shim:8080/v1/servers/web1/metadata");
    assert!(text.ends_with("\n# token: write srv_tok-123 to /etc/anneal/token (mode 0600)\n"), "{text}");
    assert_eq!(text.matches("srv_tok-123").count(), 1, "the token appears only in the note");
}

#[test]
fn replicas_are_listed_in_order_as_the_sources_url_list() {
    let mut credentials = credentials("http://a:8080/v1/servers/web1/metadata");
    credentials.metadata_urls =
        vec![credentials.metadata_url.clone(), "http://b:8080/v1/servers/web1/metadata\"x".to_string()];
    let source = check_agent_config(&agent_config(&credentials, None));
    let Some(TomlValue::Array(urls)) = source.get("url") else { panic!("url is not a list: {source:?}") };
    let urls: Vec<&str> = urls.iter().filter_map(TomlValue::as_str).collect();
    assert_eq!(urls, ["http://a:8080/v1/servers/web1/metadata", "http://b:8080/v1/servers/web1/metadata\"x"]);
}

#[test]
fn toml_strings_are_escaped() {
    let url = "http://shim:8080/v1/servers/we\"b\\1/metadata\u{7}";
    let source = check_agent_config(&agent_config(&credentials(url), None));
    assert_eq!(string(&source, "url"), url);
}

#[test]
fn cloud_init_writes_config_and_token_and_starts_the_agent() {
    let credentials = credentials("http://shim:8080/v1/servers/web1/metadata");
    let text = cloud_init(&credentials, None);
    assert!(text.starts_with("#cloud-config\n"), "{text}");
    let documents = YamlLoader::load_from_str(&text).unwrap_or_else(|error| panic!("{error}\n{text}"));
    let document = &documents[0];
    let files = document["write_files"].as_vec().expect("write_files");
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["path"].as_str(), Some("/etc/anneal/agent.toml"));
    assert_eq!(files[0]["permissions"].as_str(), Some("0600"));
    let config = files[0]["content"].as_str().expect("config content");
    assert_eq!(config, agent_config(&credentials, None));
    check_agent_config(config);
    assert_eq!(files[1]["path"].as_str(), Some(AGENT_TOKEN_PATH));
    assert_eq!(files[1]["permissions"].as_str(), Some("0600"));
    assert_eq!(files[1]["content"].as_str(), Some("srv_tok-123\n"));
    let command: Vec<&str> = document["runcmd"][0].as_vec().expect("runcmd").iter().filter_map(Yaml::as_str).collect();
    assert_eq!(command, ["systemctl", "enable", "--now", "anneal-agent.service"]);
}

#[test]
fn cloud_init_survives_odd_strings() {
    let mut credentials = credentials("http://shim:8080/v1/servers/x/metadata?a=\"b\"#: - [c]");
    credentials.token = "to\"ken: #1".to_string();
    let documents = YamlLoader::load_from_str(&cloud_init(&credentials, None)).unwrap();
    let files = documents[0]["write_files"].as_vec().unwrap();
    let source = check_agent_config(files[0]["content"].as_str().unwrap());
    assert_eq!(string(&source, "url"), credentials.metadata_url);
    assert_eq!(files[1]["content"].as_str(), Some("to\"ken: #1\n"));
}

#[test]
fn a_ca_goes_into_the_source_and_the_cloud_config() {
    let credentials = credentials("https://shim:8443/v1/servers/web1/metadata");
    let ca = TrustedCa {
        path: "/srv/pki/ca.pem".to_string(),
        pem: "-----BEGIN CERTIFICATE-----\nAB==\n-----END CERTIFICATE-----\n".to_string(),
    };
    let text = agent_config_with_token_note(&credentials, Some(&ca));
    assert_eq!(string(&check_agent_config(&text), "ca_file"), AGENT_CA_PATH);
    assert!(text.contains("# ca: copy /srv/pki/ca.pem to /etc/anneal/ca.pem"), "{text}");
    let documents = YamlLoader::load_from_str(&cloud_init(&credentials, Some(&ca))).unwrap();
    let files = documents[0]["write_files"].as_vec().unwrap();
    assert_eq!(string(&check_agent_config(files[0]["content"].as_str().unwrap()), "ca_file"), AGENT_CA_PATH);
    assert_eq!(files[2]["path"].as_str(), Some(AGENT_CA_PATH));
    assert_eq!(files[2]["content"].as_str(), Some(ca.pem.as_str()));
}
