//! The salt hook against a recording tool runner: the state file, the config dir salt-call
//! reads, its command line, and heat-agents' response for each kind of salt return.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::testing::{Answer, Recorder, context, deployment, output, printed};
use crate::{Builtin, HookEnv, HookError, Invocation, Response};

fn variables(root: &Path) -> Vec<(String, String)> {
    let working = root.join("salt").to_string_lossy().into_owned();
    let minion = root.join("etc/minion").to_string_lossy().into_owned();
    [("PATH", "/usr/bin:/bin"), ("HEAT_SALT_WORKING", working.as_str()), ("SALT_MINION_CONFIG", minion.as_str())]
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .to_vec()
}

async fn run(root: &Path, document: Value, tools: &mut Recorder) -> Result<Response, HookError> {
    let env = HookEnv::new(variables(root));
    let context = context(&env, root);
    Builtin::Salt.run(&deployment(document), &context, tools).await
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// test_hook_salt.py's deployment, with `config`.
fn document(config: Value) -> Value {
    json!({"id": "fake_stack", "name": "fake_resource_name", "group": "salt",
        "inputs": [{"name": "fooval", "value": "bar"}, {"name": "barval", "value": "foo"}, {"name": "n"}],
        "outputs": [{"name": "first_output"}, {"name": "retcode"}, {"name": "return"}],
        "config": config})
}

const STATE_ID: &str = "environ_|-testit_|-does_not_matter_|-setenv";

fn salt_output(result: bool, retcode: i64) -> Answer {
    let ret = json!({"local": {STATE_ID: {"__id__": "testit", "__run_num__": 0, "changes": {"bar": "foo"},
        "comment": "Environ values were set", "duration": 1.5, "name": "does_not_matter", "result": result,
        "start_time": "10:20:30.123456"}}});
    output(&serde_json::to_string_pretty(&ret).unwrap(), "[WARNING] noise", retcode)
}

const RETURN_YAML: &str = "environ_|-testit_|-does_not_matter_|-setenv:\n  __id__: testit\n  __run_num__: 0\n  \
    changes:\n    bar: foo\n  comment: Environ values were set\n  duration: 1.5\n  name: does_not_matter\n  \
    result: true\n  start_time: '10:20:30.123456'\n";

#[tokio::test]
async fn salt_writes_the_state_and_config_dir_and_runs_salt_call() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    fs::create_dir_all(root.join("etc")).unwrap();
    fs::write(root.join("etc/grains"), "roles: [web]\n").unwrap();
    let config = json!({"testit": {"environ.setenv": [{"name": "does_not_matter"},
        {"value": {"foo": "{{ opts['fooval'] }}", "bar": "{{ opts['barval'] }}"}}]}});
    let mut tools = Recorder::answering(vec![salt_output(true, 0)]);
    let answer = printed(run(root, document(config), &mut tools).await.unwrap());

    let working = root.join("salt");
    let state = working.join("fake_stack.sls");
    assert_eq!(
        fs::read_to_string(&state).unwrap(),
        "testit:\n  environ.setenv:\n  - name: does_not_matter\n  - value:\n      bar: '{{ opts[''barval''] }}'\n      \
         foo: '{{ opts[''fooval''] }}'\n"
    );
    assert_eq!((mode(&state), mode(&working)), (0o700, 0o700));
    let dir = working.join("fake_stack.minion");
    let include = format!(
        "include:\n- {}\n- {}\n- {}\n",
        root.join("etc/minion").display(),
        root.join("etc/minion.d/*.conf").display(),
        dir.join("inputs.conf").display()
    );
    assert_eq!(fs::read_to_string(dir.join("minion")).unwrap(), include);
    assert_eq!(fs::read_to_string(dir.join("inputs.conf")).unwrap(), "barval: foo\nfooval: bar\nn: ''\n");
    assert_eq!(mode(&dir.join("inputs.conf")), 0o600);
    assert_eq!(fs::read_link(dir.join("grains")).unwrap(), root.join("etc/grains"));
    assert!(dir.join("minion_id").symlink_metadata().is_err());

    let expected = Invocation {
        program: "salt-call".into(),
        args: [
            "--local".to_string(),
            format!("--config-dir={}", dir.display()),
            format!("--file-root={}", working.display()),
            "--out=json".into(),
            "--retcode-passthrough".into(),
            "state.sls".into(),
            "fake_stack".into(),
        ]
        .to_vec(),
        env: variables(root),
        cwd: working.clone(),
    };
    assert_eq!(tools.invocations, [expected]);
    let ret: Value = serde_json::from_slice::<Value>(&salt_stdout()).unwrap()["local"].clone();
    assert_eq!(
        answer,
        json!({"first_output": null, "retcode": 0, "return": ret,
            "deploy_stdout": RETURN_YAML, "deploy_stderr": null, "deploy_status_code": 0})
    );
    let keys: Vec<&String> = answer.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["first_output", "retcode", "return", "deploy_stdout", "deploy_stderr", "deploy_status_code"]);
}

fn salt_stdout() -> Vec<u8> {
    match salt_output(true, 0) {
        Answer::Output(output) => output.stdout,
        Answer::Missing => unreachable!(),
    }
}

#[tokio::test]
async fn a_failed_state_goes_to_stderr_and_a_false_retcode_is_forced_to_0() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let mut tools = Recorder::answering(vec![salt_output(false, 2), salt_output(true, 2)]);
    let answer = printed(run(root, document(json!("failure:\n  test.echo: []\n")), &mut tools).await.unwrap());
    assert_eq!(answer["deploy_stdout"], Value::Null);
    assert_eq!(answer["deploy_stderr"], RETURN_YAML.replace("result: true", "result: false"));
    assert_eq!((&answer["deploy_status_code"], &answer["retcode"]), (&json!(2), &json!(2)));
    assert_eq!(fs::read_to_string(root.join("salt/fake_stack.sls")).unwrap(), "failure:\n  test.echo: []\n");

    let answer = printed(run(root, document(Value::Null), &mut tools).await.unwrap());
    assert_eq!((&answer["deploy_stdout"], &answer["deploy_stderr"]), (&json!(RETURN_YAML), &Value::Null));
    assert_eq!((&answer["deploy_status_code"], &answer["retcode"]), (&json!(0), &json!(0)));
    assert_eq!(fs::read_to_string(root.join("salt/fake_stack.sls")).unwrap(), "");
}

#[tokio::test]
async fn render_errors_fail_and_no_result_is_the_hooks_error() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let errors = r#"{"local": ["Rendering SLS 'base:fake_stack' failed: mapping values are not allowed here"]}"#;
    let mut tools = Recorder::answering(vec![
        output(errors, "", 1),
        output("", "Usage: salt-call [options]\nsalt-call: error: no such option", 2),
        Answer::Missing,
    ]);
    let answer = printed(run(root, document(json!("x: y: z")), &mut tools).await.unwrap());
    assert_eq!(answer["deploy_stdout"], Value::Null);
    assert_eq!(
        answer["deploy_stderr"],
        "- 'Rendering SLS ''base:fake_stack'' failed: mapping values are not allowed here'\n"
    );
    assert_eq!(answer["deploy_status_code"], 1);

    let error = run(root, document(json!("x")), &mut tools).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "salt-call exited 2 without a JSON result: Usage: salt-call [options]\nsalt-call: error: no such option"
    );
    let error = run(root, document(json!("x")), &mut tools).await.unwrap_err();
    assert_eq!(error.to_string(), "cannot start salt-call");
    let error = run(root, document(json!(["x"])), &mut tools).await.unwrap_err();
    assert_eq!(error.to_string(), r#"config must be a Salt state (a string or a map), not ["x"]"#);
}
