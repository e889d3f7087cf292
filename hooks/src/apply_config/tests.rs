//! apply-config: os-apply-config when it starts, the native renderer when it does not (temp dirs
//! only, through a recording tool runner), and the Mustache semantics of os-apply-config's
//! `JsonRenderer` case by case.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use super::control::{self, Control};
use super::native::deep_merge;
use super::render::{RenderError, render};
use crate::testing::{Answer, Recorder, deployment, output};
use crate::{Builtin, Context, HookEnv, Response};

struct Case {
    root: tempfile::TempDir,
}

impl Case {
    fn new() -> Case {
        let case = Case { root: tempfile::tempdir().unwrap() };
        fs::create_dir_all(case.templates()).unwrap();
        fs::create_dir_all(case.out()).unwrap();
        case
    }

    fn templates(&self) -> std::path::PathBuf {
        self.root.path().join("templates")
    }

    fn out(&self) -> std::path::PathBuf {
        self.root.path().join("out")
    }

    fn template(&self, relative: &str, body: &str) {
        let path = self.templates().join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, body).unwrap();
    }

    fn env(&self, extra: &[(&str, &str)]) -> HookEnv {
        let mut variables = vec![
            ("OS_CONFIG_APPLIER_TEMPLATES".to_string(), self.templates().display().to_string()),
            ("ANNEAL_APPLY_CONFIG_OUTPUT".to_string(), self.out().display().to_string()),
        ];
        variables.extend(extra.iter().map(|(key, value)| (key.to_string(), value.to_string())));
        HookEnv::new(variables)
    }

    async fn run(
        &self,
        env: &HookEnv,
        metadata: Option<&Value>,
        tools: &mut Recorder,
    ) -> serde_json::Map<String, Value> {
        let context =
            Context { env, cwd: self.root.path(), outputs_dir: self.root.path(), max_output_bytes: 1 << 20, metadata };
        let deployment = deployment(json!({"id": "d1", "group": "apply-config", "config": ""}));
        match Builtin::ApplyConfig.run(&deployment, &context, tools).await.unwrap() {
            Response::Printed(response) => response,
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn missing() -> Recorder {
    Recorder::answering(vec![Answer::Missing])
}

#[tokio::test]
async fn os_apply_config_runs_when_it_starts() {
    let case = Case::new();
    case.template("etc/a", "{{x}}");
    let mut tools = Recorder::answering(vec![output("out", "err", 0)]);
    let response = case.run(&case.env(&[]), Some(&json!({"x": 1})), &mut tools).await;
    assert_eq!(tools.invocations.len(), 1);
    assert_eq!(tools.invocations[0].program, "os-apply-config");
    assert_eq!(
        Value::Object(response),
        json!({"deploy_stdout": "out", "deploy_stderr": "err", "deploy_status_code": 0})
    );
    assert!(!case.out().join("etc/a").exists());
}

#[tokio::test]
async fn a_configured_command_that_cannot_start_is_an_error() {
    let case = Case::new();
    let env = case.env(&[("HEAT_APPLY_CONFIG_CMD", "/nowhere/os-apply-config")]);
    let context = Context {
        env: &env,
        cwd: case.root.path(),
        outputs_dir: case.root.path(),
        max_output_bytes: 1024,
        metadata: None,
    };
    let deployment = deployment(json!({"id": "d1", "group": "apply-config"}));
    assert!(Builtin::ApplyConfig.run(&deployment, &context, &mut missing()).await.is_err());
}

#[tokio::test]
async fn renders_natively_from_the_agents_metadata() {
    let case = Case::new();
    case.template("etc/app/app.conf", "name={{name}}\nport={{port}}\n{{#on}}on\n{{/on}}");
    case.template("etc/app/app.conf.oac", "mode: 0600\n");
    let mut tools = missing();
    let metadata = json!({"name": "<web&db>", "port": 8080, "on": true});
    let response = case.run(&case.env(&[]), Some(&metadata), &mut tools).await;
    assert_eq!(response["deploy_status_code"], json!(0), "{response:?}");
    let written = case.out().join("etc/app/app.conf");
    assert_eq!(fs::read_to_string(&written).unwrap(), "name=<web&db>\nport=8080\non\n");
    assert_eq!(fs::metadata(&written).unwrap().permissions().mode() & 0o777, 0o600);
    let log = response["deploy_stderr"].as_str().unwrap();
    assert!(log.contains(&format!("[INFO] writing {}", written.display())), "{log}");
    assert!(!case.out().join("etc/app/app.conf.oac").exists());
}

#[tokio::test]
async fn os_config_files_are_read_and_deep_merged() {
    let case = Case::new();
    case.template("f", "{{a.b}} {{a.c}} {{d}}");
    let first = case.root.path().join("1.json");
    let second = case.root.path().join("2.json");
    fs::write(&first, r#"{"a": {"b": 1, "c": 2}, "d": "x"}"#).unwrap();
    fs::write(&second, r#"{"a": {"c": 3}}"#).unwrap();
    let files = format!("{}:{}:{}", first.display(), case.root.path().join("absent.json").display(), second.display());
    let env = case.env(&[("OS_CONFIG_FILES", &files)]);
    let response = case.run(&env, Some(&json!({"d": "ignored"})), &mut missing()).await;
    assert_eq!(response["deploy_status_code"], json!(0), "{response:?}");
    assert_eq!(fs::read_to_string(case.out().join("f")).unwrap(), "1 3 x");
}

#[tokio::test]
async fn failures_answer_status_1_and_write_nothing() {
    let case = Case::new();
    case.template("a", "fine");
    let response = case.run(&case.env(&[]), None, &mut missing()).await;
    assert_eq!(response["deploy_status_code"], json!(1));
    assert!(response["deploy_stderr"].as_str().unwrap().contains("no metadata"));

    case.template("b", "{{#x}}unbalanced{{/y}}");
    let response = case.run(&case.env(&[]), Some(&json!({})), &mut missing()).await;
    assert_eq!(response["deploy_status_code"], json!(1));
    assert!(response["deploy_stderr"].as_str().unwrap().contains("could not render moustache template"));
    assert!(!case.out().join("a").exists());

    let broken = case.root.path().join("broken.json");
    fs::write(&broken, "{not json").unwrap();
    let env = case.env(&[("OS_CONFIG_FILES", &broken.display().to_string())]);
    let response = case.run(&env, None, &mut missing()).await;
    assert!(response["deploy_stderr"].as_str().unwrap().contains("Could not parse metadata file"));
}

#[tokio::test]
async fn executable_templates_run_through_the_tools() {
    let case = Case::new();
    case.template("bin/script", "#!/bin/sh\n");
    let script = case.templates().join("bin/script");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let mut tools = Recorder::answering(vec![Answer::Missing, output("generated\n", "", 0)]);
    let response = case.run(&case.env(&[]), Some(&json!({"k": "é"})), &mut tools).await;
    assert_eq!(response["deploy_status_code"], json!(0), "{response:?}");
    assert_eq!(tools.invocations[1].program, script.display().to_string());
    assert_eq!(tools.stdins[1], br#"{"k": "\u00e9"}"#);
    assert_eq!(fs::read_to_string(case.out().join("bin/script")).unwrap(), "generated\n");
    // Written with the default mode, not the template's.
    assert_eq!(fs::metadata(case.out().join("bin/script")).unwrap().permissions().mode() & 0o777, 0o644);

    let mut tools = Recorder::answering(vec![Answer::Missing, output("so", "se", 3)]);
    let response = case.run(&case.env(&[]), Some(&json!({})), &mut tools).await;
    assert_eq!(response["deploy_status_code"], json!(1));
    let log = response["deploy_stderr"].as_str().unwrap();
    assert!(log.contains(&format!("config script failed: {}", script.display())) && log.contains("sose"), "{log}");
}

#[tokio::test]
async fn empty_bodies_without_allow_empty_remove_the_file() {
    let case = Case::new();
    case.template("gone", "{{missing}}");
    case.template("gone.oac", "allow_empty: false\n");
    case.template("kept", "");
    fs::write(case.out().join("gone"), "old").unwrap();
    let response = case.run(&case.env(&[]), Some(&json!({})), &mut missing()).await;
    assert_eq!(response["deploy_status_code"], json!(0), "{response:?}");
    assert!(!case.out().join("gone").exists());
    assert_eq!(fs::read(case.out().join("kept")).unwrap(), b"");
    assert!(response["deploy_stderr"].as_str().unwrap().contains("[INFO] deleting"));
}

#[test]
fn an_existing_file_keeps_its_mode_unless_the_control_file_sets_one() {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("sub/f");
    control::write(&path, b"one", &Control::default()).unwrap();
    assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
    control::write(&path, b"two", &Control::default()).unwrap();
    assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o640);
    control::write(&path, b"three", &Control { mode: Some(0o700), ..Control::default() }).unwrap();
    assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(fs::read(&path).unwrap(), b"three");
    assert_eq!(fs::read_dir(root.path().join("sub")).unwrap().count(), 1, "no temporary file left");
}

fn control_of(text: &str) -> Result<Control, String> {
    let root = tempfile::tempdir().unwrap();
    let template = root.path().join("t");
    fs::write(root.path().join("t.oac"), text).unwrap();
    control::load(&template)
}

#[test]
fn control_files_are_validated_as_oac_file_does() {
    assert_eq!(control_of("").unwrap(), Control::default());
    assert_eq!(control_of("# nothing\n").unwrap(), Control::default());
    assert_eq!(control_of("mode: 0755\nallow_empty: no\n").unwrap().mode, Some(0o755));
    assert!(!control_of("allow_empty: false").unwrap().allow_empty);
    assert_eq!(control_of("owner: root\ngroup: 0\n").unwrap().owner, Some(0));
    assert_eq!(control_of("mode: '0644'").unwrap_err(), "mode '0644' is not numeric");
    assert_eq!(control_of("mode: 01000").unwrap_err(), "mode '0o1000' out of range");
    assert_eq!(control_of("allow_empty: 1").unwrap_err(), "allow_empty requires Boolean, got: '1'");
    assert_eq!(control_of("colour: red").unwrap_err(), "unrecognised file control key 'colour'");
    assert_eq!(control_of("- a").unwrap_err().split(':').next(), Some("header is not a dict"));
    assert_eq!(
        control_of("owner: no-such-user-here").unwrap_err(),
        "owner 'no-such-user-here' not found in passwd database"
    );
    assert_eq!(control_of("group: [1]").unwrap_err(), "group '[1]' must be a string or int");
}

#[test]
fn merging_keeps_key_order_and_replaces_non_maps() {
    let mut base = json!({"a": {"x": 1, "y": 2}, "b": 1}).as_object().unwrap().clone();
    deep_merge(&mut base, json!({"a": {"y": 3, "z": 4}, "b": {"n": 1}, "c": 5}).as_object().unwrap().clone());
    assert_eq!(serde_json::to_string(&base).unwrap(), r#"{"a":{"x":1,"y":3,"z":4},"b":{"n":1},"c":5}"#);
}

#[test]
fn interpolation_follows_json_renderer() {
    let config = json!({
        "s": "a<b>&\"c\"", "i": 3, "f": 1.5, "t": true, "n": null, "m": {"k": "v", "a": [1, "é"]},
        "l": [1, 2], "e": ""
    });
    let cases = [
        ("{{s}}|{{{s}}}|{{&s}}", "a<b>&\"c\"|a<b>&\"c\"|a<b>&\"c\""),
        ("{{i}} {{f}} {{t}} [{{n}}] [{{missing}}] [{{e}}]", "3 1.5 true [] [] []"),
        ("{{m}}", r#"{"k": "v", "a": [1, "\u00e9"]}"#),
        ("{{l}} {{m.k}} {{m.a}} {{m.nope}} {{s.x}}", r#"[1, 2] v [1, "\u00e9"]  "#),
        ("{{ s }}{{! comment }}", "a<b>&\"c\""),
    ];
    for (template, expected) in cases {
        assert_eq!(render(template, &config).unwrap(), expected, "{template}");
    }
}

#[test]
fn sections_follow_pystache() {
    let config = json!({
        "list": [{"n": "a"}, {"n": "b"}], "scalars": [1, "x", null], "map": {"k": "v"}, "zero": 0,
        "empty": [], "emptymap": {}, "str": "text", "top": "T", "f": false
    });
    let cases = [
        ("{{#list}}{{n}}{{top}},{{/list}}", "aT,bT,"),
        ("{{#scalars}}<{{.}}>{{/scalars}}", "<1><x><>"),
        ("{{#map}}{{k}} {{.}}{{/map}}", r#"v {"k": "v"}"#),
        ("{{#zero}}z{{/zero}}{{#empty}}e{{/empty}}{{#emptymap}}m{{/emptymap}}{{#f}}f{{/f}}", ""),
        ("{{^zero}}z{{/zero}}{{^empty}}e{{/empty}}{{^missing}}m{{/missing}}{{^str}}s{{/str}}", "zem"),
        ("{{#str}}{{.}}{{/str}}", "text"),
        ("{{#list.n}}x{{/list.n}}", ""),
        ("{{#map.k}}{{.}}{{/map.k}}", "v"),
    ];
    for (template, expected) in cases {
        assert_eq!(render(template, &config).unwrap(), expected, "{template}");
    }
}

#[test]
fn standalone_lines_and_delimiters_follow_pystache() {
    let config = json!({"items": ["a", "b"], "x": "X"});
    let cases = [
        ("start\n{{#items}}\n- {{.}}\n{{/items}}\nend\n", "start\n- a\n- b\nend\n"),
        ("  {{#items}}\n  {{.}}\n  {{/items}}\n", "  a\n  b\n"),
        ("a {{x}} b\n  {{x}}\n", "a X b\n  X\n"),
        ("{{! standalone comment }}\r\nline\n", "line\n"),
        ("{{=<% %>=}}\n<% x %> {{x}}\n<%={{ }}=%>{{x}}", "X {{x}}\nX"),
        // pystache renders the unclosed section's body alone, against the whole metadata.
        ("{{#items}}unclosed {{.}}", r#"unclosed {"items": ["a", "b"], "x": "X"}"#),
    ];
    for (template, expected) in cases {
        assert_eq!(render(template, &config).unwrap(), expected, "{template:?}");
    }
    assert!(matches!(render("{{/x}}", &config), Err(RenderError::Mismatch { .. })));
    assert!(matches!(render("{{=x=}}", &config), Err(RenderError::Delimiters(_))));
}
