use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use super::*;
use crate::config::{CfnSourceConfig, HeatSourceConfig, HttpSourceConfig, ZaqarSourceConfig};

const PASSWORD: &str = "s3cret-from-metadata";

/// The key as Heat's server resource writes it for POLL_SERVER_HEAT (server_base.py).
fn heat_key() -> Value {
    json!({
        "collectors": ["ec2", "heat", "local"],
        "heat": {
            "user_id": "0123abcd", "password": PASSWORD, "auth_url": "http://127.0.0.1:5000/v3",
            "project_id": "p1", "stack_id": "stack/5b8f", "resource_name": "server", "region_name": null
        }
    })
}

fn cfn_key() -> Value {
    json!({
        "collectors": ["ec2", "cfn", "local"],
        "cfn": {
            "metadata_url": "http://127.0.0.1:8000/v1/", "access_key_id": "AK1", "secret_access_key": PASSWORD,
            "stack_name": "stack", "path": "server.Metadata"
        }
    })
}

fn request_key(url: &str) -> Value {
    json!({"collectors": ["ec2", "request", "local"], "request": {"metadata_url": url}})
}

fn error_text(key: &Value) -> String {
    let error = derive(key).expect_err("the key is refused");
    let text = crate::error_chain(&error);
    assert!(!text.contains(PASSWORD), "no error quotes a value: {text}");
    text
}

#[test]
fn heat_section_becomes_a_heat_source() {
    let derived = derive(&heat_key()).unwrap();
    assert_eq!(derived.source_names(), ["os-collect-config heat"]);
    let (collector, SourceConfig::Heat(heat)) = &derived.sources[0] else { panic!("{derived:?}") };
    assert_eq!(*collector, Collector::Heat);
    let HeatSourceConfig { keystone, stack_id, resource_name, .. } = heat;
    assert_eq!(keystone.auth_url, "http://127.0.0.1:5000/v3");
    assert_eq!(keystone.user_id, "0123abcd");
    assert_eq!(keystone.password.expose(), PASSWORD);
    assert_eq!(keystone.project_id, "p1");
    assert_eq!(keystone.region_name, None);
    assert_eq!((stack_id.as_str(), resource_name.as_str()), ("stack/5b8f", "server"));
    assert_eq!(derived.poll_interval, None);
    let debug = format!("{derived:?}");
    assert!(!debug.contains(PASSWORD), "Debug never shows the password: {debug}");
}

#[test]
fn cfn_zaqar_and_request_sections() {
    let derived = derive(&cfn_key()).unwrap();
    let SourceConfig::Cfn(CfnSourceConfig { metadata_url, stack_name, path, access_key_id, secret_access_key, .. }) =
        &derived.sources[0].1
    else {
        panic!("{derived:?}")
    };
    assert_eq!((metadata_url.as_str(), stack_name.as_str()), ("http://127.0.0.1:8000/v1/", "stack"));
    assert_eq!((path.as_str(), access_key_id.as_str()), ("server.Metadata", "AK1"));
    assert_eq!(secret_access_key.expose(), PASSWORD);

    let zaqar = json!({"collectors": ["zaqar"], "zaqar": {
        "user_id": "u", "password": PASSWORD, "auth_url": "http://127.0.0.1:5000", "project_id": "p",
        "queue_id": "q1", "region_name": "RegionOne"}});
    let derived = derive(&zaqar).unwrap();
    let SourceConfig::Zaqar(ZaqarSourceConfig { keystone, queue_id, .. }) = &derived.sources[0].1 else {
        panic!("{derived:?}")
    };
    assert_eq!((queue_id.as_str(), keystone.region_name.as_deref()), ("q1", Some("RegionOne")));

    let url = "http://127.0.0.1:8080/v1/AUTH_x/c/o?temp_url_sig=abc&temp_url_expires=2147483647";
    let derived = derive(&request_key(url)).unwrap();
    assert_eq!(derived.source_names(), ["os-collect-config request"]);
    let SourceConfig::Http(HttpSourceConfig { urls: derived_urls, long_poll, token_file, .. }) = &derived.sources[0].1
    else {
        panic!("{derived:?}")
    };
    assert_eq!(derived_urls, &[url]);
    assert_eq!(*long_poll, Duration::ZERO, "a temp URL does not long-poll");
    assert_eq!(*token_file, None);
}

#[test]
fn collector_order_and_defaults() {
    let mut key = cfn_key();
    key["heat"] = heat_key()["heat"].clone();
    key["collectors"] = json!("heat_local, heat,cfn,config_drive");
    let names = derive(&key).unwrap().source_names();
    assert_eq!(names, ["os-collect-config heat", "os-collect-config cfn"], "the listed order, a string splits on ','");
    key.as_object_mut().unwrap().remove("collectors");
    let names = derive(&key).unwrap().source_names();
    assert_eq!(names, ["os-collect-config cfn", "os-collect-config heat"], "os-collect-config's default order");
    key["collectors"] = json!(["heat", "heat", "cfn"]);
    assert_eq!(derive(&key).unwrap().sources.len(), 2, "a collector named twice is one source");
    // Keys os-apply-config's template does not render are ignored, as there.
    key["cfn"]["heat_metadata_hint"] = json!("/var/lib/heat-cfntools/cfn-metadata-server");
    key["command"] = json!("os-refresh-config");
    assert_eq!(derive(&key).unwrap().sources.len(), 2);
}

#[test]
fn polling_interval_sets_the_derived_sources_interval() {
    let mut key = request_key("http://127.0.0.1:1/m");
    for (value, secs) in [(json!(10), 10), (json!("20"), 20), (json!(2.5), 3), (json!(86400), 86400)] {
        key["polling_interval"] = value.clone();
        assert_eq!(derive(&key).unwrap().poll_interval, Some(Duration::from_secs(secs)), "{value}");
    }
    for value in [json!(0), json!(-5), json!(86401), json!("abc"), json!(true), json!([1]), json!(1e300)] {
        key["polling_interval"] = value.clone();
        assert!(error_text(&key).starts_with("os-collect-config.polling_interval: must be a number"), "{value}");
    }
}

#[test]
fn hostile_keys_are_refused_with_a_clear_message() {
    let cases: Vec<(Value, &str)> = vec![
        (json!(["heat"]), "the os-collect-config key is a JSON list, not an object"),
        (json!({"collectors": ["heat", "nova"], "heat": heat_key()["heat"]}), "collectors: unknown collector \"nova\""),
        (json!({"collectors": 5}), "collectors: must be a list, got a number"),
        (json!({"collectors": [5]}), "collectors: every entry must be a string"),
        (json!({"collectors": vec!["ec2"; 17]}), "collectors: more than 16 entries"),
        (json!({"collectors": ["heat"]}), "collectors: names heat but there is no heat section"),
        (json!({"collectors": ["cfn"], "cfn": "x"}), "os-collect-config.cfn: must be an object, got a string"),
        (json!({"collectors": ["ec2", "local"]}), "names no collector anneal-agent configures itself"),
        (json!({}), "names no collector"),
    ];
    for (key, expected) in cases {
        let text = error_text(&key);
        assert!(text.contains(expected), "{key}: {text}");
    }
    let mut key = heat_key();
    key["heat"]["password"] = json!(12345);
    assert_eq!(error_text(&key), "os-collect-config.heat.password: must be a string, got a number");
    key["heat"]["password"] = json!(format!("{PASSWORD}{}", "x".repeat(5000)));
    assert_eq!(error_text(&key), "os-collect-config.heat.password: is longer than 4096 characters");
    key["heat"].as_object_mut().unwrap().remove("password");
    assert_eq!(error_text(&key), "os-collect-config.heat.password: is missing");
    let mut key = heat_key();
    key["heat"]["auth_url"] = json!("ftp://127.0.0.1/");
    assert!(error_text(&key).starts_with("os-collect-config.heat.auth_url: scheme must be http or https"));
    let mut key = cfn_key();
    key["cfn"]["path"] = json!("no-metadata");
    assert!(error_text(&key).starts_with("os-collect-config.cfn.path: must be RESOURCE.Metadata"));
}

#[test]
fn values_cannot_inject_keys_or_tables() {
    // A newline would start a new line of TOML: refused outright.
    let mut key = heat_key();
    key["heat"]["password"] = json!(format!("{PASSWORD}\"\n[[source]]\nkind = \"local\"\npath = \"/etc\""));
    assert_eq!(error_text(&key), "os-collect-config.heat.password: must not contain control characters");
    let mut key = request_key("http://127.0.0.1:1/m\n[agent]\nstate_dir = \"/\"");
    assert!(error_text(&key).contains("request.metadata_url: must not contain control characters"));
    // Quotes and brackets on one line stay inside the string: the serialiser escapes them.
    let hostile = format!("{PASSWORD}\", kind = \"local\", path = \"/etc\" }} [[source]] #");
    key = heat_key();
    key["heat"]["password"] = json!(hostile);
    let derived = derive(&key).unwrap();
    assert_eq!(derived.sources.len(), 1);
    let SourceConfig::Heat(heat) = &derived.sources[0].1 else { panic!("{derived:?}") };
    assert_eq!(heat.keystone.password.expose(), &hostile, "the value round-trips literally");
    let persisted = file::from_text(&derived.text).unwrap();
    assert_eq!(persisted.config, derived, "and survives the file");
    // A key named like a source key inside a section is not copied.
    let mut key = request_key("http://127.0.0.1:1/m");
    key["request"]["token_file"] = json!("/etc/shadow");
    key["request"]["kind"] = json!("local");
    let derived = derive(&key).unwrap();
    let SourceConfig::Http(http) = &derived.sources[0].1 else { panic!("{derived:?}") };
    assert_eq!(http.token_file, None);
}

#[test]
fn store_and_load_round_trip_privately() {
    let state = tempfile::tempdir().unwrap();
    assert_eq!(load(state.path()).unwrap(), None, "no file, no sources");
    let mut key = heat_key();
    key["polling_interval"] = json!(7);
    let derived = derive(&key).unwrap();
    let persisted = Persisted { config: derived.clone(), supplier: Supplier::Source("source[0] heat-local".into()) };
    store(state.path(), &persisted).unwrap();
    let path = file_path(state.path());
    assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("# Written by anneal-agent"), "{text}");
    assert!(text.contains("supplied_by = \"source[0] heat-local\""), "{text}");
    assert!(text.contains("[[source]]") && text.contains("kind = \"heat\"") && text.contains("poll_interval_secs = 7"));
    let loaded = load(state.path()).unwrap().unwrap();
    assert_eq!(loaded, persisted);
    assert_eq!(loaded.config.poll_interval, Some(Duration::from_secs(7)));
    // Its tables are agent.toml's format: the config parser reads them as they are.
    assert_eq!(config::parse(&derived.text, &path).unwrap().sources.len(), 1);
    let bootstrapped = Persisted { config: derived, supplier: Supplier::Bootstrap };
    store(state.path(), &bootstrapped).unwrap();
    assert!(fs::read_to_string(&path).unwrap().contains("supplied_by = \"bootstrap\""));
    assert_eq!(load(state.path()).unwrap().unwrap(), bootstrapped);
}

/// A file an earlier version wrote has no `supplied_by`: its sources load, their supplier
/// unrecorded (the tracker finds it), and they compare equal to the same key derived now.
#[test]
fn a_file_without_a_supplier_loads_as_unrecorded() {
    let state = tempfile::tempdir().unwrap();
    let derived = derive(&request_key("http://127.0.0.1:1/m")).unwrap();
    let earlier = format!("# Written by anneal-agent from the os-collect-config key.\n\n{}", derived.text);
    fs::write(file_path(state.path()), earlier).unwrap();
    fs::set_permissions(file_path(state.path()), fs::Permissions::from_mode(0o600)).unwrap();
    let loaded = load(state.path()).unwrap().unwrap();
    assert_eq!(loaded, Persisted { config: derived, supplier: Supplier::Unrecorded });
    for (line, expected) in [
        ("supplied_by = 5\n", "supplied_by must be a string"),
        (&format!("supplied_by = \"{}\"\n", "x".repeat(65)), "supplied_by must be a source name (at most 64"),
        ("supplied_by = \"a\\nb\"\n", "supplied_by must be a source name"),
    ] {
        let text = format!("{line}{}", loaded.config.text);
        fs::write(file_path(state.path()), text).unwrap();
        let error = load(state.path()).unwrap_err().to_string();
        assert!(error.contains(expected), "{line}: {error}");
    }
}

#[test]
fn a_file_others_could_read_or_that_was_edited_is_refused() {
    let state = tempfile::tempdir().unwrap();
    store(state.path(), &Persisted { config: derive(&heat_key()).unwrap(), supplier: Supplier::Bootstrap }).unwrap();
    let path = file_path(state.path());
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    let error = load(state.path()).unwrap_err().to_string();
    assert!(error.contains("readable by it only (0600)"), "{error}");
    fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", &path).unwrap();
    assert!(load(state.path()).unwrap_err().to_string().ends_with("not a regular file"));
    fs::remove_file(&path).unwrap();
    for (text, expected) in [
        ("[[source]]\nkind = \"local\"\npath = \"/etc\"\n", "each [[source]] must be a different one of"),
        (
            "[agent]\nstate_dir = \"/\"\n[[source]]\nkind = \"http\"\nurl = \"http://h/\"\n",
            "may only set poll_interval",
        ),
        (&format!("[[source]]\nkind = \"heat\"\npassword = \"{PASSWORD}\n"), "not valid TOML"),
        (
            "[[source]]\nkind = \"http\"\nurl = \"http://h/\"\n[[source]]\nkind = \"http\"\nurl = \"http://i/\"\n",
            "different one",
        ),
        ("[[source]]\nkind = \"http\"\nurl = 5\n", "request.url: must be a URL or a list of URLs, got an integer"),
        (
            "[[source]]\nkind = \"http\"\nurl = \"http://h/\"\nport = 5\n",
            "[[source]]: the tables do not parse as agent.toml",
        ),
    ] {
        fs::write(&path, text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let error = load(state.path()).unwrap_err().to_string();
        assert!(error.contains(expected), "{text}: {error}");
        assert!(!error.contains(PASSWORD), "{error}");
    }
}

#[test]
fn metadata_may_be_bare_or_wrapped() {
    let key = request_key("http://127.0.0.1:1/m");
    assert_eq!(key_of_metadata(&json!({"os-collect-config": key.clone()})), Some(&key));
    assert_eq!(key_of_metadata(&json!({"metadata": {"os-collect-config": key.clone()}})), Some(&key));
    assert_eq!(key_of_metadata(&json!({"deployments": []})), None);
}

#[test]
fn the_packaged_config_is_the_heat_image_default() {
    let text = include_str!("../../../packaging/agent.toml.example");
    let config = config::parse(text, Path::new("agent.toml.example")).unwrap();
    let kinds: Vec<&str> = config.sources.iter().map(SourceConfig::kind).collect();
    assert_eq!(kinds, ["heat-local", "local", "config-drive"], "no per-server source");
    assert!(!config.sources.iter().any(SourceConfig::holds_secret), "and no credential");
    // Each may configure the agent: os-collect-config's local-data dir opts in, as TripleO's
    // deployed servers write the key there.
    assert!(config.sources.iter().all(SourceConfig::self_configure));
}

#[test]
fn heats_published_metadata_configures_a_cfn_source() {
    let metadata: Value =
        serde_json::from_str(include_str!("../../../tests/fixtures/heat/server-metadata-cfn.json")).unwrap();
    let derived = derive(key_of_metadata(&metadata).unwrap()).unwrap();
    assert_eq!(derived.source_names(), ["os-collect-config cfn"], "ec2 and local are the image's own sources");
    let SourceConfig::Cfn(cfn) = &derived.sources[0].1 else { panic!("{derived:?}") };
    assert_eq!(cfn.metadata_url, "http://192.0.2.10:8000/v1/");
    assert_eq!((cfn.stack_name.as_str(), cfn.path.as_str()), ("mystack", "server.Metadata"));
    assert_eq!(cfn.access_key_id, "4e3f2a1b");
    assert_eq!(cfn.secret_access_key.expose(), "c2VjcmV0");
}
