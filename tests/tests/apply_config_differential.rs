//! apply-config's native os-apply-config against the real one (os-apply-config 14.1.0 from the
//! peers venv): the same templates tree and metadata rendered by both, the output trees compared
//! path by path (mode and bytes). The native side runs as `anneal-agent hook-test apply-config`
//! with no os-apply-config on PATH, so the built-in falls back to rendering itself.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anneal_tests::binaries::agent_binary;
use serde_json::{Value, json};

const TEMPLATES: &[(&str, &str)] = &[
    (
        "etc/app/values.conf",
        "string={{name}}\nescaped={{html}} {{{html}}} {{&html}}\nint={{port}} float={{ratio}} big={{big}}\n\
         bools={{on}} {{off}} null=[{{nothing}}] missing=[{{missing}}] [{{missing.deeper}}]\n\
         map={{db}}\nlist={{hosts}}\nunicode={{unicode}} {{nested}}\n\
         dotted={{db.host}}:{{db.port}} [{{db.nope}}] [{{name.x}}] {{db.opts.ssl}}\n",
    ),
    (
        "etc/app/sections.conf",
        "{{#servers}}\nserver {{name}} {{ip}} ({{region}})\n{{/servers}}\n\
         {{#hosts}}host={{.}};{{/hosts}}\n\
         {{#db}}db at {{host}} in {{region}}; whole {{.}}\n{{/db}}\
         {{^empty_list}}no list{{/empty_list}} {{^zero}}zero{{/zero}} {{^missing}}none{{/missing}} \
         {{^on}}hidden{{/on}}{{#off}}hidden{{/off}}{{#zero}}hidden{{/zero}}{{#empty_map}}hidden{{/empty_map}}\n\
         {{#name}}name is {{.}}{{/name}}\n  {{! a comment }}\n  indented {{name}}\n\
         {{=<% %>=}}\n<% name %> {{name}}\n<%={{ }}=%>\n{{#db.opts}}ssl={{ssl}}{{/db.opts}}\r\nend\r\n",
    ),
    ("etc/app/secret.conf", "password={{db.password}}\n"),
    ("etc/app/secret.conf.oac", "mode: 0600\n"),
    ("etc/gone.conf", "{{missing}}"),
    ("etc/gone.conf.oac", "allow_empty: false\n"),
    ("etc/never.conf", "{{#off}}x{{/off}}"),
    ("etc/never.conf.oac", "allow_empty: false\nmode: 0640\n"),
    ("etc/empty-allowed.conf", "{{nothing}}"),
    ("var/lib/deep/a/b/c/nested.txt", "{{region}}/{{servers}}\n"),
    ("usr/local/bin/from-script", "#!/bin/sh\nprintf 'stdin was: '\ncat\necho\n"),
];

fn metadata() -> Value {
    json!({
        "name": "web-1", "html": "<a href=\"x\">&amp;</a>", "port": 8080, "ratio": 0.25,
        "big": 12345678901234567890u64, "on": true, "off": false, "nothing": null, "zero": 0,
        "region": "top", "unicode": "café ☃", "nested": {"é": ["ü", 1.5, null, true]},
        "db": {"host": "db.example", "port": 5432, "password": "s3cr3t", "opts": {"ssl": true}},
        "hosts": ["a", "b", "c"], "empty_list": [], "empty_map": {},
        "servers": [{"name": "s1", "ip": "10.0.0.1"}, {"name": "s2", "ip": "10.0.0.2", "region": "inner"}]
    })
}

/// Second metadata file: deep-merged over the first.
fn overlay() -> Value {
    json!({"db": {"port": 6432, "extra": [1, 2]}, "name": "web-2", "added": "yes"})
}

/// `path → (mode, bytes)` of every file under `root`.
fn tree(root: &Path) -> BTreeMap<PathBuf, (u32, Vec<u8>)> {
    let mut files = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("list output") {
            let path = entry.expect("entry").path();
            let meta = std::fs::symlink_metadata(&path).expect("stat output");
            if meta.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(root).expect("under root").to_path_buf();
                files.insert(relative, (meta.permissions().mode() & 0o7777, std::fs::read(&path).expect("read")));
            }
        }
    }
    files
}

fn setup(root: &Path) -> (PathBuf, Vec<PathBuf>) {
    let templates = root.join("templates");
    for (relative, body) in TEMPLATES {
        let path = templates.join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("template dir");
        std::fs::write(&path, body).expect("write template");
    }
    let script = templates.join("usr/local/bin/from-script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod script");
    let metadata_files = vec![root.join("meta.json"), root.join("overlay.json")];
    std::fs::write(&metadata_files[0], metadata().to_string()).expect("metadata");
    std::fs::write(&metadata_files[1], overlay().to_string()).expect("overlay");
    for side in ["out-python", "out-native"] {
        std::fs::create_dir_all(root.join(side).join("etc")).expect("output dir");
        std::fs::write(root.join(side).join("etc/gone.conf"), "to be removed").expect("old file");
    }
    (templates, metadata_files)
}

fn run_python(root: &Path, templates: &Path, metadata: &[PathBuf]) {
    let cache = anneal_tests::peers::cache(&["venv/bin/os-apply-config"]);
    std::fs::create_dir_all(root.join("sandbox")).expect("sandbox");
    let output = Command::new(cache.join("venv/bin/os-apply-config"))
        .arg("--templates")
        .arg(templates)
        .arg("--output")
        .arg(root.join("out-python"))
        .arg("--metadata")
        .args(metadata)
        .env("ANNEAL_PEER_SANDBOX", root.join("sandbox"))
        .output()
        .expect("run os-apply-config");
    assert!(output.status.success(), "os-apply-config failed: {}", String::from_utf8_lossy(&output.stderr));
}

fn run_native(root: &Path, templates: &Path, metadata: &[PathBuf]) -> Value {
    for dir in ["state", "hooks", "tmp", "home"] {
        std::fs::create_dir_all(root.join(dir)).expect("agent dir");
    }
    let files: Vec<String> = metadata.iter().map(|path| path.display().to_string()).collect();
    let config = format!(
        "[agent]\nstate_dir = {:?}\nhooks_dirs = [{:?}]\nhook_timeout_secs = 60\n\n[agent.hook_env]\n\
         OS_CONFIG_APPLIER_TEMPLATES = {:?}\nANNEAL_APPLY_CONFIG_OUTPUT = {:?}\nOS_CONFIG_FILES = {:?}\n\n\
         [[source]]\nkind = \"local\"\npath = {:?}\n",
        root.join("state").display().to_string(),
        root.join("hooks").display().to_string(),
        templates.display().to_string(),
        root.join("out-native").display().to_string(),
        files.join(":"),
        root.join("tmp").display().to_string(),
    );
    let config_path = root.join("state/agent.toml");
    std::fs::write(&config_path, config).expect("agent config");
    let deployment =
        json!({"id": "oac1", "name": "apply", "group": "apply-config", "config": {}, "inputs": [], "outputs": []});
    let mut child = Command::new(agent_binary())
        .args(["hook-test", "apply-config", "--config"])
        .arg(&config_path)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .env("HOME", root.join("home"))
        .env("TMPDIR", root.join("tmp"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start anneal-agent hook-test");
    child.stdin.take().expect("stdin").write_all(deployment.to_string().as_bytes()).expect("deployment");
    let output = child.wait_with_output().expect("hook-test ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|_| {
        panic!("hook-test printed no signal: {stdout}\nstderr: {}", String::from_utf8_lossy(&output.stderr))
    })
}

#[test]
fn native_rendering_writes_what_os_apply_config_writes() {
    assert!(
        !["/usr/bin/os-apply-config", "/bin/os-apply-config"].iter().any(|path| Path::new(path).exists()),
        "os-apply-config is on the native side's PATH: the built-in would run it instead of rendering"
    );
    let root = tempfile::Builder::new().prefix("anneal-oac-differential-").tempdir().expect("temp dir");
    let (templates, metadata) = setup(root.path());
    run_python(root.path(), &templates, &metadata);
    let signal = run_native(root.path(), &templates, &metadata);
    assert_eq!(signal["deploy_status_code"], 0, "{signal}");
    assert!(signal["deploy_stderr"].as_str().unwrap_or("").contains("[INFO] success"), "{signal}");
    let python = tree(&root.path().join("out-python"));
    let native = tree(&root.path().join("out-native"));
    assert!(python.contains_key(Path::new("etc/app/values.conf")) && !python.contains_key(Path::new("etc/gone.conf")));
    let show = |files: &BTreeMap<PathBuf, (u32, Vec<u8>)>| {
        files
            .iter()
            .map(|(path, (mode, bytes))| format!("{} {mode:o}\n{}", path.display(), String::from_utf8_lossy(bytes)))
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    assert!(
        python == native,
        "output trees differ\n=== os-apply-config:\n{}\n=== native:\n{}",
        show(&python),
        show(&native)
    );
}
