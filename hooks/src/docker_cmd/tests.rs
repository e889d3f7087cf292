//! The docker-cmd hook against a recording docker: heat-agents' own cases
//! (tests/test_hook_docker_cmd.py, its os-refresh-config script's cases folded in) with their
//! exact command lines, plus the cases where the built-in has to decide what heat-agents meant.

use serde_json::{Value, json};

use crate::testing::{Answer, Recorder, context, deployment, output, printed};
use crate::{Builtin, HookEnv, HookError, Response};

const DOCKER: &str = "/fake/docker";

struct Case {
    root: tempfile::TempDir,
    env: HookEnv,
}

impl Case {
    fn new() -> Case {
        let env = HookEnv::new(vec![
            ("PATH".to_string(), "/usr/bin:/bin".to_string()),
            ("HEAT_DOCKER_CMD".to_string(), DOCKER.to_string()),
        ]);
        Case { root: tempfile::tempdir().unwrap(), env }
    }

    async fn run(&self, document: Value, tools: &mut Recorder) -> Result<Response, HookError> {
        let context = context(&self.env, self.root.path());
        Builtin::DockerCmd.run(&deployment(document), &context, tools).await
    }
}

/// heat-agents' `HookDockerCmdTest.data`.
fn heat_agents_data() -> Value {
    json!({"name": "abcdef001", "group": "docker-cmd", "id": "abc123",
        "inputs": [{"name": "deploy_stack_id", "value": "the_stack"},
                   {"name": "deploy_resource_name", "value": "the_deployment"}],
        "config": {
            "db": {"name": "x", "image": "xxx", "privileged": false, "environment": ["foo=bar"],
                   "env_file": "env.file", "start_order": 0},
            "web-ls": {"action": "exec", "start_order": 2, "command": ["web", "/bin/ls", "-l"]},
            "web": {"name": "y", "start_order": 1, "image": "yyy", "net": "host", "restart": "always",
                    "privileged": true, "user": "root", "command": "/bin/webserver start",
                    "volumes": ["/run:/run", "db:/var/lib/db"],
                    "environment": ["KOLLA_CONFIG_STRATEGY=COPY_ALWAYS", "FOO=BAR"],
                    "env_file": ["foo.env", "bar.conf"]}}})
}

fn args(tools: &Recorder) -> Vec<Vec<String>> {
    tools.invocations.iter().map(|invocation| invocation.args.clone()).collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| item.to_string()).collect()
}

const LIST_RESOURCE_CONFIGS: [&str; 10] = [
    "ps",
    "-a",
    "--filter",
    "label=managed_by=docker-cmd",
    "--filter",
    "label=deploy_stack_id=the_stack",
    "--filter",
    "label=deploy_resource_name=the_deployment",
    "--format",
    "{{.Label \"config_id\"}}",
];
const LIST_NAMES: [&str; 4] = ["ps", "-a", "--format", "{{.Names}} {{.Label \"container_name\"}}"];

fn inspect(name: &str) -> Vec<String> {
    strings(&["inspect", "--format", "exists", name])
}

fn run_db(name: &str) -> Vec<String> {
    strings(&[
        "run",
        "--name",
        name,
        "--label",
        "deploy_stack_id=the_stack",
        "--label",
        "deploy_resource_name=the_deployment",
        "--label",
        "config_id=abc123",
        "--label",
        "container_name=db",
        "--label",
        "managed_by=docker-cmd",
        "--detach=true",
        "--env-file=env.file",
        "--env=foo=bar",
        "--privileged=false",
        "xxx",
    ])
}

fn run_web(name: &str) -> Vec<String> {
    let mut args = strings(&["run", "--name", name]);
    for label in [
        "deploy_stack_id=the_stack",
        "deploy_resource_name=the_deployment",
        "config_id=abc123",
        "container_name=web",
        "managed_by=docker-cmd",
    ] {
        args.extend(strings(&["--label", label]));
    }
    args.extend(strings(&[
        "--detach=true",
        "--env-file=foo.env",
        "--env-file=bar.conf",
        "--env=KOLLA_CONFIG_STRATEGY=COPY_ALWAYS",
        "--env=FOO=BAR",
        "--net=host",
        "--privileged=true",
        "--restart=always",
        "--user=root",
        "--volume=/run:/run",
        "--volume=db:/var/lib/db",
        "yyy",
        "/bin/webserver",
        "start",
    ]));
    args
}

fn ps_web() -> Vec<String> {
    strings(&[
        "ps",
        "-a",
        "--filter",
        "label=container_name=web",
        "--filter",
        "label=config_id=abc123",
        "--format",
        "{{.Names}}",
    ])
}

fn exec_ls(container: &str) -> Vec<String> {
    strings(&["exec", container, "/bin/ls", "-l"])
}

/// The two docker calls of the folded os-refresh-config script, finding nothing.
fn nothing_to_clean() -> Vec<Answer> {
    vec![output("\n", "", 0), output("\n", "", 0)]
}

#[tokio::test]
async fn test_hook_runs_and_execs_in_start_order() {
    let case = Case::new();
    let mut answers = nothing_to_clean();
    answers.extend([
        output("", "Error: No such image, container or task: db", 1),
        output("", "Creating db...", 0),
        output("", "Error: No such image, container or task: web", 1),
        output("", "Creating web...", 0),
        output("web", "", 0),
        output("", "one.txt\ntwo.txt\nthree.txt", 0),
    ]);
    let mut tools = Recorder::answering(answers);
    let answer = printed(case.run(heat_agents_data(), &mut tools).await.unwrap());
    assert_eq!(
        answer,
        json!({"deploy_stdout": "", "deploy_stderr": "Creating db...\nCreating web...\none.txt\ntwo.txt\nthree.txt",
               "deploy_status_code": 0})
    );
    let keys: Vec<&String> = answer.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["deploy_stdout", "deploy_stderr", "deploy_status_code"]);
    assert_eq!(
        args(&tools),
        [
            strings(&LIST_RESOURCE_CONFIGS),
            strings(&LIST_NAMES),
            inspect("db"),
            run_db("db"),
            inspect("web"),
            run_web("web"),
            ps_web(),
            exec_ls("web")
        ]
    );
    for invocation in &tools.invocations {
        assert_eq!(invocation.program, DOCKER);
        assert_eq!(invocation.cwd, case.root.path());
        assert_eq!(invocation.env, case.env.variables());
    }
}

#[tokio::test]
async fn test_hook_exit_codes_accept_a_listed_failure() {
    let case = Case::new();
    let document = json!({"name": "abcdef001", "group": "docker-cmd", "id": "abc123",
        "config": {"web-ls": {"action": "exec", "command": ["web", "/bin/ls", "-l"], "exit_codes": [0, 1]}}});
    // No deploy_stack_id/deploy_resource_name: only the renaming step of the cleanup runs.
    let mut tools =
        Recorder::answering(vec![output("", "", 0), output("web", "", 0), output("", "Warning: custom exit code", 1)]);
    let answer = printed(case.run(document, &mut tools).await.unwrap());
    assert_eq!(
        answer,
        json!({"deploy_stdout": "", "deploy_stderr": "Warning: custom exit code", "deploy_status_code": 0})
    );
    assert_eq!(args(&tools), [strings(&LIST_NAMES), ps_web(), exec_ls("web")]);
}

#[tokio::test]
async fn test_hook_failed_reports_the_unexpected_exit_code() {
    let case = Case::new();
    let mut answers = nothing_to_clean();
    answers.extend([
        output("", "Error: No such image, container or task: db", 1),
        output("c0ffee\n", "Creating db...", 3),
        output("", "", 1),
        output("", "Creating web...", 0),
        output("web", "", 0),
        output("", "No such file or directory", 2),
    ]);
    let mut tools = Recorder::answering(answers);
    let answer = printed(case.run(heat_agents_data(), &mut tools).await.unwrap());
    // The last unexpected code wins; every container still ran.
    assert_eq!(
        answer,
        json!({"deploy_stdout": "c0ffee\n", "deploy_stderr": "Creating db...\nCreating web...\nNo such file or directory",
               "deploy_status_code": 2})
    );
    assert_eq!(tools.invocations.len(), 8);
}

#[tokio::test]
async fn test_hook_unique_names_take_a_random_suffix() {
    let case = Case::new();
    let mut answers = nothing_to_clean();
    answers.extend([
        output("exists\n", "", 0),
        output("", "Error: No such image, container or task: db-blah", 1),
        output("", "Creating db...", 0),
        output("exists\n", "", 0),
        output("", "Error: No such image, container or task: web-blah", 1),
        output("", "Creating web...", 0),
        output("web-asdf1234", "", 0),
        output("", "one.txt\ntwo.txt\nthree.txt", 0),
    ]);
    let mut tools = Recorder::answering(answers);
    let answer = printed(case.run(heat_agents_data(), &mut tools).await.unwrap());
    assert_eq!(answer["deploy_status_code"], 0);
    let calls = args(&tools);
    let db_name = calls[3][3].clone();
    let web_name = calls[6][3].clone();
    for (name, base) in [(&db_name, "db-"), (&web_name, "web-")] {
        let suffix = name.strip_prefix(base).unwrap();
        assert_eq!(suffix.len(), 8, "{name}");
        assert!(suffix.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit()), "{name}");
    }
    assert_eq!(
        calls[2..],
        [
            inspect("db"),
            inspect(&db_name),
            run_db(&db_name),
            inspect("web"),
            inspect(&web_name),
            run_web(&web_name),
            ps_web(),
            exec_ls("web-asdf1234")
        ]
    );
}

#[tokio::test]
async fn cleanup_removes_the_deployments_earlier_configs_and_renames() {
    let case = Case::new();
    let mut document = heat_agents_data();
    document["config"] = json!({});
    let mut tools = Recorder::answering(vec![
        output("abc123\nold1\nold1\nold2\n", "", 0),
        output("111\n222\n", "", 0),
        output("", "Error removing", 1),
        output("222\n", "", 0),
        output("", "", 1),
        output("111 111-s84nf83h\n222 222\n333 333-3nd83nfi\n555 222\n666\n", "", 0),
    ]);
    let answer = printed(case.run(document, &mut tools).await.unwrap());
    assert_eq!(answer, json!({"deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}));
    let remove_listing = |id: &str| {
        strings(&[
            "ps",
            "-q",
            "-a",
            "--filter",
            "label=managed_by=docker-cmd",
            "--filter",
            &format!("label=config_id={id}"),
        ])
    };
    assert_eq!(
        args(&tools),
        [
            strings(&LIST_RESOURCE_CONFIGS),
            remove_listing("old1"),
            strings(&["rm", "-f", "111"]),
            strings(&["rm", "-f", "222"]),
            remove_listing("old2"),
            strings(&LIST_NAMES),
            strings(&["rename", "111", "111-s84nf83h"]),
            strings(&["rename", "333", "333-3nd83nfi"]),
        ]
    );
}

#[tokio::test]
async fn delete_removes_the_containers_and_runs_nothing_else() {
    let case = Case::new();
    let mut document = heat_agents_data();
    document["id"] = json!("del456");
    document["inputs"].as_array_mut().unwrap().push(json!({"name": "deploy_action", "value": "DELETE"}));
    let mut tools =
        Recorder::answering(vec![output("abc123\n", "", 0), output("111\n", "", 0), output("111\n", "", 0)]);
    let answer = printed(case.run(document, &mut tools).await.unwrap());
    assert_eq!(answer, json!({"deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}));
    let calls = args(&tools);
    assert_eq!(calls[1][6], "label=config_id=abc123");
    assert_eq!(calls[2..], [strings(&["rm", "-f", "111"]), strings(&LIST_NAMES)]);
}

#[tokio::test]
async fn a_missing_docker_skips_the_cleanup_but_fails_the_run() {
    let case = Case::new();
    let mut tools = Recorder::answering(vec![Answer::Missing, Answer::Missing, Answer::Missing]);
    let error = case.run(heat_agents_data(), &mut tools).await.unwrap_err();
    assert_eq!(error.to_string(), format!("cannot start {DOCKER}"));
    assert_eq!(args(&tools)[2], inspect("db"));
    // An empty config needs no docker beyond the cleanup.
    let mut document = heat_agents_data();
    document["config"] = json!("");
    let mut tools = Recorder::answering(vec![Answer::Missing, Answer::Missing]);
    let answer = printed(case.run(document, &mut tools).await.unwrap());
    assert_eq!(answer["deploy_status_code"], 0);
}

#[tokio::test]
async fn yaml_text_reads_as_pyyaml_reads_it() {
    let case = Case::new();
    let config = "web:\n  image: nginx\n  detach: no\n  privileged: yes\n  user: 0100\n  command: [nginx, -g, 'daemon off;']\n\
                  \x20 environment: {A: 1, '': 2}\n  volumes_from: [data]\n  pid: host\n  env_file: ~\n";
    let document = json!({"id": "y1", "group": "docker-cmd", "config": config,
        "inputs": [{"name": "deploy_stack_id", "value": null}, {"name": "deploy_resource_name", "value": 7}]});
    let mut tools = Recorder::answering(vec![output("", "", 0), output("", "", 1)]);
    printed(case.run(document, &mut tools).await.unwrap());
    assert_eq!(
        args(&tools)[2],
        strings(&[
            "run",
            "--name",
            "web",
            "--label",
            "deploy_stack_id=None",
            "--label",
            "deploy_resource_name=7",
            "--label",
            "config_id=y1",
            "--label",
            "container_name=web",
            "--label",
            "managed_by=docker-cmd",
            "--env-file=None",
            "--env=A",
            "--pid=host",
            "--privileged=true",
            "--user=64",
            "--volumes_from=data",
            "nginx",
            "nginx",
            "-g",
            "daemon off;",
        ])
    );
}

#[tokio::test]
async fn equal_start_orders_keep_the_config_order() {
    let case = Case::new();
    let document = json!({"id": "o1", "group": "docker-cmd",
        "config": {"c": {"image": "c", "start_order": 1}, "a": {"image": "a", "detach": false},
                   "b": {"image": "b", "start_order": 0.5}, "d": {"image": "d"}}});
    let mut tools = Recorder::answering(vec![output("", "", 0)]);
    printed(case.run(document, &mut tools).await.unwrap());
    let images: Vec<String> =
        args(&tools).iter().filter(|call| call[0] == "run").map(|call| call.last().unwrap().clone()).collect();
    assert_eq!(images, ["a", "d", "b", "c"]);
    assert!(!args(&tools)[2].contains(&"--detach=true".to_string()));
}

#[tokio::test]
async fn configs_heat_agents_crashes_on_fail_the_run() {
    let case = Case::new();
    for (config, inputs, expected) in [
        (json!({"x": {"action": "start"}}), json!([]), "container x: unknown action \"start\" (run or exec)"),
        (json!({"x": {"action": "exec"}}), json!([]), "an exec container needs a command"),
        (json!({"x": ["image"]}), json!([]), "container x: settings must be a mapping"),
        (json!("- x"), json!([]), "config must be a mapping of containers"),
        (json!(["x"]), json!([]), "config must be a mapping or YAML text"),
        (json!({"x": {}, "y": {"start_order": "1"}}), json!([]), "start_order values must be all numbers"),
        (json!({"x": {"environment": null}}), json!([]), "container x: environment must be a list, not null"),
        (
            json!({"x": {"image": "i", "command": ["sleep", 10]}}),
            json!([]),
            "container x: command must be text, not 10",
        ),
        (json!({"x": {}}), json!([{"name": "novalue"}]), "input novalue has no value"),
    ] {
        let document = json!({"id": "e1", "group": "docker-cmd", "config": config, "inputs": inputs});
        let error = case.run(document, &mut Recorder::default()).await.unwrap_err();
        assert!(error.to_string().starts_with(expected), "{error} / {expected}");
    }
    let document = json!({"id": "e2", "group": "docker-cmd", "config": {"x": {"exit_codes": 0}}});
    let mut tools = Recorder::default();
    let error = case.run(document, &mut tools).await.unwrap_err();
    assert_eq!(error.to_string(), "container x: exit_codes must be a list, not 0");
    assert_eq!(tools.invocations.last().unwrap().args[0], "run", "the container ran first, as in heat-agents");
}

#[tokio::test]
async fn docker_is_found_on_the_path_by_default() {
    let mut case = Case::new();
    case.env = HookEnv::new(vec![("PATH".to_string(), "/usr/bin".to_string())]);
    let mut tools = Recorder::answering(vec![output("", "", 0), output("", "", 1), output("", "", 1)]);
    let document = json!({"id": "p1", "group": "docker-cmd", "config": {"x": {"image": "i", "exit_codes": [true]}}});
    // `docker run` exited 1, and Python's `1 in [True]` holds.
    let answer = printed(case.run(document, &mut tools).await.unwrap());
    assert_eq!(answer["deploy_status_code"], 0);
    assert_eq!(tools.invocations.len(), 3);
    assert!(tools.invocations.iter().all(|invocation| invocation.program == "docker"));
}
