use super::*;

const MINIMAL: &str = "[[source]]\nkind = \"local\"\npath = \"/var/lib/anneal/local.d\"\n";

fn parse_text(text: &str) -> Result<Config, ConfigError> {
    parse(text, Path::new("/etc/anneal/agent.toml"))
}

fn error_text(text: &str) -> String {
    parse_text(text).unwrap_err().to_string()
}

#[test]
fn defaults_apply() {
    let config = parse_text(MINIMAL).unwrap();
    assert_eq!(config.path, Path::new("/etc/anneal/agent.toml"));
    let agent = &config.agent;
    assert_eq!(agent.state_dir, Path::new("/var/lib/anneal"));
    let expected: Vec<PathBuf> = DEFAULT_HOOKS_DIRS.iter().map(PathBuf::from).collect();
    assert_eq!(agent.hooks_dirs, expected);
    assert_eq!(agent.poll_interval, Duration::from_secs(30));
    assert!(agent.fast_follow, "fast-follow is on unless turned off");
    assert_eq!(agent.hook_timeout, Duration::from_secs(3600));
    assert_eq!(agent.hook_kill_grace, Duration::from_secs(10));
    assert_eq!(agent.parallel, 1);
    assert!(agent.hook_env.is_empty());
    assert_eq!(agent.journal_retention, Some(Duration::from_secs(7 * 86_400)));
    let local = LocalSourceConfig { path: PathBuf::from("/var/lib/anneal/local.d"), self_configure: false };
    assert_eq!(config.sources, vec![SourceConfig::Local(local)]);
}

#[test]
fn full_config_parses_in_order() {
    let text = r#"
        [agent]
        state_dir = "/srv/anneal"
        hooks_dirs = ["/opt/hooks"]
        poll_interval_secs = 5
        fast_follow = false
        hook_timeout_secs = 60
        hook_kill_grace_secs = 0
        parallel = 64
        journal_retention_secs = 3600
        [agent.hook_env]
        http_proxy = "http://proxy:3128"

        [[source]]
        kind = "http"
        url = "https://shim.example:8080/v1/servers/web1/metadata"
        token_file = "/etc/anneal/token"
        ca_file = "/etc/anneal/ca.pem"
        connect_timeout_secs = 3
        read_timeout_secs = 7
        long_poll_secs = 0

        [[source]]
        kind = "heat-local"

        [[source]]
        kind = "heat-local"
        path = "/run/cfn-init-data"
    "#;
    let config = parse_text(text).unwrap();
    assert_eq!(config.agent.state_dir, Path::new("/srv/anneal"));
    assert_eq!(config.agent.hooks_dirs, vec![PathBuf::from("/opt/hooks")]);
    assert_eq!(config.agent.poll_interval, Duration::from_secs(5));
    assert!(!config.agent.fast_follow);
    assert_eq!(config.agent.hook_timeout, Duration::from_secs(60));
    assert_eq!(config.agent.hook_kill_grace, Duration::ZERO);
    assert_eq!(config.agent.parallel, 64);
    assert_eq!(config.agent.journal_retention, Some(Duration::from_secs(3600)));
    let keep_all = parse_text(&format!("[agent]\njournal_retention_secs = 0\n{MINIMAL}")).unwrap();
    assert_eq!(keep_all.agent.journal_retention, None, "0 keeps every entry");
    assert_eq!(config.agent.hook_env.get("http_proxy").map(String::as_str), Some("http://proxy:3128"));
    let http = HttpSourceConfig {
        urls: vec!["https://shim.example:8080/v1/servers/web1/metadata".to_string()],
        token_file: Some(PathBuf::from("/etc/anneal/token")),
        ca_file: Some(PathBuf::from("/etc/anneal/ca.pem")),
        connect_timeout: Duration::from_secs(3),
        read_timeout: Duration::from_secs(7),
        long_poll: Duration::ZERO,
        self_configure: false,
    };
    let default_heat = HeatLocalSourceConfig { path: PathBuf::from(DEFAULT_HEAT_LOCAL_PATH) };
    let custom_heat = HeatLocalSourceConfig { path: PathBuf::from("/run/cfn-init-data") };
    assert_eq!(
        config.sources,
        vec![SourceConfig::Http(http), SourceConfig::HeatLocal(default_heat), SourceConfig::HeatLocal(custom_heat)]
    );
    assert_eq!(config.sources[1].kind(), "heat-local");
}

#[test]
fn http_defaults() {
    let config = parse_text("[[source]]\nkind = \"http\"\nurl = \"http://127.0.0.1:1/m?sig=x\"\n").unwrap();
    let SourceConfig::Http(http) = &config.sources[0] else { panic!("not http") };
    assert_eq!(http.connect_timeout, Duration::from_secs(10));
    assert_eq!(http.read_timeout, Duration::from_secs(30));
    assert_eq!(http.long_poll, Duration::from_secs(60));
    assert_eq!(http.token_file, None);
    assert_eq!(http.ca_file, None);
}

/// Whose `os-collect-config` key may configure the agent (docs/openstack.md): the kinds that
/// read the server's Heat or Nova metadata always; an http URL or a local dir only when it opts
/// in with `self_configure = true`, which no other kind takes.
#[test]
fn self_configure_is_an_opt_in_of_http_and_local_sources() {
    let may_configure = |table: &str| parse_text(&format!("[[source]]\n{table}")).unwrap().sources[0].self_configure();
    assert!(!may_configure("kind = \"http\"\nurl = \"http://127.0.0.1:1/m\"\n"), "the shim, a web server");
    assert!(!may_configure("kind = \"local\"\npath = \"/x\"\n"));
    assert!(may_configure("kind = \"http\"\nurl = \"http://127.0.0.1:1/m\"\nself_configure = true\n"));
    assert!(may_configure("kind = \"local\"\npath = \"/x\"\nself_configure = true\n"));
    assert!(!may_configure("kind = \"local\"\npath = \"/x\"\nself_configure = false\n"));
    assert!(may_configure("kind = \"heat-local\"\n"));
    assert!(may_configure("kind = \"config-drive\"\n"));
    assert!(may_configure("kind = \"ec2\"\nmetadata_url = \"http://127.0.0.1:1/\"\n"));
    let message = error_text("[[source]]\nkind = \"http\"\nurl = \"http://h/\"\nself_configure = \"yes\"\n");
    assert!(message.ends_with("source[0] (http) self_configure: must be true or false, got a string"), "{message}");
    let message = error_text("[[source]]\nkind = \"local\"\npath = \"/x\"\nself_configure = 1\n");
    assert!(message.ends_with("source[0] (local) self_configure: must be true or false, got an integer"), "{message}");
    let message = error_text("[[source]]\nkind = \"heat-local\"\nself_configure = false\n");
    assert!(message.contains("unknown field `self_configure`"), "{message}");
}

#[test]
fn unknown_keys_are_named() {
    let message = error_text(&format!("[agent]\npolll_interval_secs = 3\n{MINIMAL}"));
    assert!(message.starts_with("/etc/anneal/agent.toml: "), "{message}");
    assert!(message.contains("unknown field `polll_interval_secs`"), "{message}");
    assert!(message.contains("line 2"), "{message}");
    let message = error_text("[[source]]\nkind = \"local\"\npath = \"/x\"\npaht = \"/y\"\n");
    assert!(message.contains("unknown field `paht`"), "{message}");
    let message = error_text(&format!("[agnet]\n{MINIMAL}"));
    assert!(message.contains("unknown field `agnet`"), "{message}");
}

#[test]
fn syntax_and_type_errors_use_toml_messages() {
    let message = error_text("[agent\n");
    assert!(message.starts_with("/etc/anneal/agent.toml: "), "{message}");
    assert!(message.contains("line 1"), "{message}");
    let message = error_text(&format!("[agent]\nparallel = \"two\"\n{MINIMAL}"));
    assert!(message.contains("parallel") && message.contains("line 2"), "{message}");
    let message = error_text(&format!("[agent]\npoll_interval_secs = -1\n{MINIMAL}"));
    assert!(message.contains("poll_interval_secs"), "{message}");
    let message = error_text(&format!("[agent]\nfast_follow = \"no\"\n{MINIMAL}"));
    assert!(message.contains("fast_follow") && message.contains("line 2"), "{message}");
}

#[test]
fn unknown_or_missing_kind_is_rejected() {
    let message = error_text("[[source]]\nkind = \"swift\"\n");
    assert!(message.contains("unknown variant `swift`"), "{message}");
    assert!(message.contains("heat-local"), "{message}");
    let message = error_text("[[source]]\npath = \"/x\"\n");
    assert!(message.contains("kind"), "{message}");
    let message = error_text("[[source]]\nkind = \"local\"\n");
    assert!(message.contains("missing field `path`"), "{message}");
    let message = error_text("[[source]]\nkind = \"http\"\n");
    assert!(message.contains("missing field `url`"), "{message}");
}

fn check_invalid(text: &str, expected_key: &str, reason_part: &str) {
    match parse_text(text) {
        Err(ConfigError::Invalid { path, key, reason }) => {
            assert_eq!(path, Path::new("/etc/anneal/agent.toml"));
            assert_eq!(key, expected_key, "reason: {reason}");
            assert!(reason.contains(reason_part), "{reason:?} should contain {reason_part:?}");
        }
        other => panic!("expected Invalid for {expected_key}, got {other:?}"),
    }
}

#[test]
fn agent_values_are_validated() {
    let with = |agent: &str| format!("[agent]\n{agent}\n{MINIMAL}");
    check_invalid(&with("parallel = 0"), "[agent] parallel", "must be between 1 and 64, got 0");
    check_invalid(&with("parallel = 65"), "[agent] parallel", "got 65");
    check_invalid(&with("poll_interval_secs = 0"), "[agent] poll_interval_secs", "at least 1");
    check_invalid(&with("hook_timeout_secs = 0"), "[agent] hook_timeout_secs", "at least 1");
    // A grace the clock cannot add to now would crash the first kill.
    check_invalid(
        &with("hook_kill_grace_secs = 18446744073709551615"),
        "[agent] hook_kill_grace_secs",
        "must be at most 86400, got 18446744073709551615",
    );
    check_invalid(&with("state_dir = \"var/lib\""), "[agent] state_dir", "absolute");
    check_invalid(&with("metrics_textfile = \"anneal.prom\""), "[agent] metrics_textfile", "absolute");
    check_invalid(&with("metrics_textfile = \"/var/lib/anneal.txt\""), "[agent] metrics_textfile", "must end in .prom");
    let valid = parse_text(&with("metrics_textfile = \"/var/lib/node-exporter/anneal.prom\"")).expect("valid");
    assert_eq!(
        valid.agent.metrics_textfile.as_deref(),
        Some(std::path::Path::new("/var/lib/node-exporter/anneal.prom"))
    );
    check_invalid(&with("hooks_dirs = [\"/a\", \"b\"]"), "[agent] hooks_dirs[1]", "absolute");
    check_invalid(&with("hook_env = { \"\" = \"x\" }"), "[agent] hook_env.", "environment variable name");
    check_invalid(&with("hook_env = { \"A=B\" = \"x\" }"), "[agent] hook_env.A=B", "environment variable name");
    check_invalid(&with("hook_env = { GOOD = \"a\\u0000b\" }"), "[agent] hook_env.GOOD", "NUL");
}

#[test]
fn sources_are_validated() {
    check_invalid("[agent]\nparallel = 2\n", "[[source]]", "at least one");
    let http = |url: &str| {
        format!("[[source]]\nkind = \"local\"\npath = \"/l\"\n[[source]]\nkind = \"http\"\nurl = \"{url}\"\n")
    };
    check_invalid(&http("not a url"), "source[1] (http) url", "not a valid URL");
    check_invalid(&http("ftp://host/x"), "source[1] (http) url", "scheme must be http or https");
    check_invalid(&http("file:///etc/passwd"), "source[1] (http) url", "scheme");
    let relative_token = "[[source]]\nkind = \"http\"\nurl = \"http://h/\"\ntoken_file = \"token\"\n";
    check_invalid(relative_token, "source[0] (http) token_file", "absolute");
    let relative_ca = "[[source]]\nkind = \"http\"\nurl = \"http://h/\"\nca_file = \"ca.pem\"\n";
    check_invalid(relative_ca, "source[0] (http) ca_file", "absolute");
    let zero_connect = "[[source]]\nkind = \"http\"\nurl = \"http://h/\"\nconnect_timeout_secs = 0\n";
    check_invalid(zero_connect, "source[0] (http) connect_timeout_secs", "at least 1");
    let zero_read = "[[source]]\nkind = \"http\"\nurl = \"http://h/\"\nread_timeout_secs = 0\n";
    check_invalid(zero_read, "source[0] (http) read_timeout_secs", "at least 1");
    check_invalid("[[source]]\nkind = \"local\"\npath = \"rel\"\n", "source[0] (local) path", "absolute");
    check_invalid("[[source]]\nkind = \"heat-local\"\npath = \"rel\"\n", "source[0] (heat-local) path", "absolute");
}

#[test]
fn url_reasons_never_quote_the_query() {
    let message = error_text("[[source]]\nkind = \"http\"\nurl = \"gopher://h/x?sig=SECRET\"\n");
    assert!(!message.contains("SECRET"), "{message}");
}

#[test]
fn error_display_names_file_and_key() {
    let message = error_text(&format!("[agent]\nparallel = 0\n{MINIMAL}"));
    assert_eq!(message, "/etc/anneal/agent.toml: [agent] parallel: must be between 1 and 64, got 0");
}

#[test]
fn load_reads_and_refuses_world_writable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.toml");
    fs::write(&path, MINIMAL).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(load(&path).unwrap().path, path);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).unwrap();
    match load(&path) {
        Err(ConfigError::Unsafe { path: unsafe_path, reason }) => {
            assert_eq!(unsafe_path, path);
            assert!(reason.contains("world-writable"));
        }
        other => panic!("expected Unsafe, got {other:?}"),
    }
}

#[test]
fn load_reports_a_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing.toml");
    let error = load(&path).unwrap_err();
    assert!(matches!(&error, ConfigError::Read { path: p, .. } if *p == path));
    assert!(error.to_string().contains("missing.toml"));
}

const HEAT_SOURCE: &str = r#"
    [[source]]
    kind = "heat"
    auth_url = "http://127.0.0.1:5000/v3"
    user_id = "u1"
    password = "pw"
    project_id = "p1"
    stack_id = "stack/0123"
    resource_name = "server"
    region_name = ""
"#;

#[test]
fn openstack_sources_take_os_collect_config_keys() {
    let text = format!(
        "{HEAT_SOURCE}{}",
        r#"
        [[source]]
        kind = "cfn"
        metadata_url = "http://127.0.0.1:8000/v1/"
        stack_name = "s"
        path = "server.Metadata"
        access_key_id = "ak"
        secret_access_key = "sk"
        ca_certificate = "/etc/ca.pem"

        [[source]]
        kind = "zaqar"
        auth_url = "http://127.0.0.1:5000"
        user_id = "u"
        password = "pw"
        project_id = "p"
        queue_id = "q"
        region_name = "RegionOne"

        [[source]]
        kind = "ec2"
        metadata_url = "http://127.0.0.1:9/latest/meta-data/"

        [[source]]
        kind = "config-drive"
    "#
    );
    let config = parse_text(&text).unwrap();
    let kinds: Vec<&str> = config.sources.iter().map(SourceConfig::kind).collect();
    assert_eq!(kinds, ["heat", "cfn", "zaqar", "ec2", "config-drive"]);
    let SourceConfig::Heat(heat) = &config.sources[0] else { panic!("not heat") };
    assert_eq!(heat.keystone.region_name, None, "an empty region means any");
    assert_eq!(heat.keystone.password.expose(), "pw");
    assert!(!format!("{config:?}").contains("\"pw\""), "passwords never print: {config:?}");
    assert_eq!(config.sources[1].ca_file(), Some(("ca_certificate", Path::new("/etc/ca.pem"))));
    let SourceConfig::ConfigDrive(drive) = &config.sources[4] else { panic!("not config-drive") };
    assert_eq!((drive.path.as_deref(), drive.label.as_str()), (None, "config-2"));
}

#[test]
fn openstack_sources_name_the_bad_key() {
    let missing = HEAT_SOURCE.replace("password = \"pw\"", "");
    assert!(error_text(&missing).contains("missing field `password`"), "{}", error_text(&missing));
    let empty = HEAT_SOURCE.replace("user_id = \"u1\"", "user_id = \"\"");
    assert!(error_text(&empty).contains("source[0] (heat) user_id: must not be empty"), "{}", error_text(&empty));
    let cfn = "[[source]]\nkind = \"cfn\"\nmetadata_url = \"http://h/\"\nstack_name = \"s\"\npath = \"server\"\naccess_key_id = \"a\"\nsecret_access_key = \"s\"\n";
    assert!(error_text(cfn).contains("source[0] (cfn) path: must be RESOURCE.Metadata"), "{}", error_text(cfn));
    let drive = "[[source]]\nkind = \"config-drive\"\nlabel = \"a b\"\n";
    assert!(error_text(drive).contains("source[0] (config-drive) label"), "{}", error_text(drive));
}

#[test]
fn a_config_holding_a_password_must_be_private() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.toml");
    fs::write(&path, HEAT_SOURCE).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    let error = load(&path).unwrap_err().to_string();
    assert!(error.contains("holds a password or secret key") && error.contains("chmod 600"), "{error}");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    load(&path).unwrap();
}

fn http_source(keys: &str) -> String {
    format!("[[source]]\nkind = \"local\"\npath = \"/l\"\n[[source]]\nkind = \"http\"\n{keys}\n")
}

fn http_urls(keys: &str) -> Vec<String> {
    let config = parse_text(&http_source(keys)).unwrap();
    let SourceConfig::Http(http) = &config.sources[1] else { panic!("not http") };
    http.urls.clone()
}

#[test]
fn http_url_is_a_string_or_a_list_and_urls_is_a_list() {
    let (a, b) = ("http://a.example:8080/v1/servers/vm/metadata", "https://b.example/v1/servers/vm/metadata");
    assert_eq!(http_urls(&format!("url = \"{a}\"")), [a]);
    assert_eq!(http_urls(&format!("url = [\"{a}\", \"{b}\"]")), [a, b], "in the order given");
    assert_eq!(http_urls(&format!("urls = [\"{b}\", \"{a}\"]")), [b, a]);
    assert_eq!(http_urls(&format!("url = [\"{a}\"]")), [a], "a list of one is one URL");
    let many: Vec<String> = (0..MAX_HTTP_URLS).map(|port| format!("\"http://h:{}/m\"", port + 1)).collect();
    assert_eq!(http_urls(&format!("urls = [{}]", many.join(", "))).len(), MAX_HTTP_URLS);
}

#[test]
fn http_url_lists_are_validated() {
    let both = http_source("url = \"http://a/m\"\nurls = [\"http://b/m\"]");
    check_invalid(&both, "source[1] (http) url", "`url` and `urls` are both given");
    check_invalid(&http_source("url = []"), "source[1] (http) url", "the list is empty");
    check_invalid(&http_source("urls = []"), "source[1] (http) urls", "the list is empty");
    let bad = http_source("url = [\"http://a/m\", \"ftp://b/m?sig=SECRET\"]");
    check_invalid(&bad, "source[1] (http) url[1]", "scheme must be http or https");
    assert!(!error_text(&bad).contains("SECRET"), "{}", error_text(&bad));
    check_invalid(&http_source("urls = [\"not a url\"]"), "source[1] (http) urls[0]", "not a valid URL");
    let twice = http_source("url = [\"http://a/m\", \"http://b/m\", \"http://a/m\"]");
    check_invalid(&twice, "source[1] (http) url[2]", "the same URL as url[0]");
    let many: Vec<String> = (0..=MAX_HTTP_URLS).map(|port| format!("\"http://h:{}/m\"", port + 1)).collect();
    check_invalid(
        &http_source(&format!("urls = [{}]", many.join(", "))),
        "source[1] (http) urls",
        "at most 16 URLs, got 17",
    );
    check_invalid(&http_source("token_file = \"/t\""), "source[1] (http) url", "missing field `url`");
}

#[test]
fn http_url_of_the_wrong_kind_names_the_key() {
    check_invalid(&http_source("url = 3"), "source[1] (http) url", "must be a URL or a list of URLs, got an integer");
    check_invalid(&http_source("url = [\"http://a/m\", 3]"), "source[1] (http) url[1]", "must be a URL (a string)");
    check_invalid(
        &http_source("urls = \"http://a/m\""),
        "source[1] (http) urls",
        "must be a list of URLs, got a string",
    );
    check_invalid(&http_source("url = { a = 1 }"), "source[1] (http) url", "got a table");
    let message = error_text(&http_source("url = \"http://a/m\"\nurll = \"x\""));
    assert!(message.contains("unknown field `urll`"), "{message}");
}
