//! Each built-in against a recording tool runner: the command lines, environments and working
//! directories it asks for, the files it writes (exact bytes and modes) and what it answers.
//! heat-agents' own hooks are compared with these end to end in tests/tests/hooks_differential.rs.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::testing::{Answer, Recorder, context, deployment, output, printed};
use crate::{Builtin, HookEnv, HookError, Response};

struct Case {
    root: tempfile::TempDir,
    env: HookEnv,
}

impl Case {
    /// Every HEAT_* directory of every hook under a fresh temp dir.
    fn new() -> Case {
        let root = tempfile::tempdir().unwrap();
        let dir = |name: &str| root.path().join(name).to_string_lossy().into_owned();
        let mut variables = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
        for (key, name) in [
            ("HEAT_ANSIBLE_WORKING", "ansible/work"),
            ("HEAT_ANSIBLE_OUTPUTS", "ansible/out"),
            ("HEAT_PUPPET_WORKING", "puppet/work"),
            ("HEAT_PUPPET_OUTPUTS", "puppet/out"),
            ("HEAT_PUPPET_LOGDIR", "puppet/logs"),
            ("HEAT_PUPPET_HIERA_DATADIR", "hieradata"),
            ("HEAT_HIERA_CONFIG", "hiera.yaml"),
            ("HEAT_CFN_INIT_LAST_METADATA_DIR", "cfn"),
            ("HEAT_CHEF_WORKING", "chef/work"),
            ("HEAT_CHEF_OUTPUTS", "chef/out"),
            ("HEAT_DOCKER_COMPOSE_WORKING", "compose"),
        ] {
            variables.push((key.to_string(), dir(name)));
        }
        Case { env: HookEnv::new(variables), root }
    }

    fn path(&self, relative: &str) -> std::path::PathBuf {
        self.root.path().join(relative)
    }

    fn text(&self, relative: &str) -> String {
        fs::read_to_string(self.path(relative)).unwrap()
    }

    async fn run(&self, builtin: Builtin, document: Value, tools: &mut Recorder) -> Result<Response, HookError> {
        let context = context(&self.env, self.root.path());
        builtin.run(&deployment(document), &context, tools).await
    }
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn ansible_writes_the_playbook_and_variables_and_runs_the_playbook() {
    let case = Case::new();
    fs::create_dir_all(case.path("ansible/out")).unwrap();
    fs::write(case.path("ansible/out/1234.result"), "done\r\n").unwrap();
    let mut tools = Recorder::answering(vec![output("ran", "warn", 2)]);
    let document = json!({"id": "1234", "group": "ansible", "config": "- hosts: all",
        "options": {"tags": "abc", "callback_plugins": "/cb"},
        "inputs": [{"name": "foo", "value": "bar"}, {"name": "n", "value": 3}, {"name": "empty"}],
        "outputs": [{"name": "result"}, {"name": "absent"}]});
    let answer = printed(case.run(Builtin::Ansible, document, &mut tools).await.unwrap());
    assert_eq!(
        answer,
        json!({"result": "done\n", "deploy_stdout": "ran", "deploy_stderr": "warn", "deploy_status_code": 2})
    );
    let work = case.path("ansible/work");
    let outputs = case.path("ansible/out/1234");
    assert_eq!(
        case.text("ansible/work/1234_variables.json"),
        format!(
            r#"{{"heat_config_id": "1234", "foo": "bar", "n": 3, "empty": "", "heat_outputs_path": "{}"}}"#,
            outputs.display()
        )
    );
    assert_eq!(case.text("ansible/work/1234_playbook.yaml"), "- hosts: all");
    assert_eq!(mode(&work.join("1234_playbook.yaml")), 0o600);
    assert_eq!(mode(&work), 0o700);
    let invocation = &tools.invocations[0];
    assert_eq!(invocation.program, "ansible-playbook");
    let playbook = work.join("1234_playbook.yaml").display().to_string();
    let vars = format!("@{}", work.join("1234_variables.json").display());
    assert_eq!(
        invocation.args,
        ["-i", "localhost,", "--tags", "abc", playbook.as_str(), "--extra-vars", vars.as_str()]
    );
    assert_eq!(invocation.cwd, work);
    assert!(invocation.env.contains(&("ANSIBLE_CALLBACK_PLUGINS".into(), "/cb".into())));
}

#[tokio::test]
async fn ansible_answers_nothing_without_ansible_or_a_config() {
    let case = Case::new();
    let mut tools = Recorder::answering(vec![Answer::Missing]);
    let document = json!({"id": "1", "group": "ansible", "config": "- hosts: all"});
    let answer = case.run(Builtin::Ansible, document, &mut tools).await.unwrap();
    assert_eq!(answer, Response::Silent { reason: "ansible not installed yet".into() });
    let document = json!({"id": "2", "group": "ansible", "config": ""});
    assert!(matches!(case.run(Builtin::Ansible, document, &mut tools).await.unwrap(), Response::Silent { .. }));
    assert_eq!(tools.invocations.len(), 1);
    let document = json!({"id": "3", "group": "ansible", "config": "x", "options": {"tags": ["a"]}});
    let error = case.run(Builtin::Ansible, document, &mut tools).await.unwrap_err();
    assert_eq!(error.to_string(), r#"option tags must be a string, not ["a"]"#);
}

#[tokio::test]
async fn puppet_passes_facts_and_reads_its_logs_back() {
    let case = Case::new();
    let mut tools = Recorder::answering(vec![output("host.example.com\n", "", 0), output("applied\n", "notice\n", 2)]);
    let document = json!({"id": "p1", "name": "site", "group": "puppet", "config": "notify {'x':}",
        "creation_time": "2015-07-16T11:40:20", "options": {"enable_hiera": true, "modulepath": "/m"},
        "inputs": [{"name": "foo", "value": "bar"}, {"name": "count", "value": 2}]});
    let answer = printed(case.run(Builtin::Puppet, document, &mut tools).await.unwrap());
    assert_eq!(answer, json!({"deploy_stdout": "applied\n", "deploy_stderr": "notice\n", "deploy_status_code": 0}));
    assert_eq!(
        (tools.invocations[0].program.as_str(), tools.invocations[0].args.as_slice()),
        ("hostname", &["-f".to_string()][..])
    );
    let puppet = &tools.invocations[1];
    let manifest = case.path("puppet/work/p1.pp");
    assert_eq!(puppet.args.last().unwrap(), &manifest.display().to_string());
    assert_eq!(&puppet.args[6..8], ["--modulepath", "/m"]);
    let fact = |name: &str| puppet.env.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone());
    assert_eq!(fact("FACTER_fqdn").as_deref(), Some("host.example.com"));
    assert_eq!(fact("FACTER_foo").as_deref(), Some("bar"));
    assert_eq!(fact("FACTER_count").as_deref(), Some("2"));
    assert_eq!(fact("FACTER_deploy_config_name").as_deref(), Some("site"));
    assert_eq!(mode(&manifest), 0o700);
    assert_eq!(case.text("hieradata/heat_config_site.json"), r#"{"foo": "bar", "count": 2}"#);
    assert_eq!(case.text("puppet/logs/2015-07-16-11-40-20-p1-stdout.log"), "applied\n");
}

#[tokio::test]
async fn puppet_failures_other_than_changes_pass_through() {
    let case = Case::new();
    let mut tools = Recorder::answering(vec![output("", "", 1), output("", "err", 4)]);
    let document = json!({"id": "p2", "group": "puppet", "config": "", "creation_time": "t"});
    let answer = printed(case.run(Builtin::Puppet, document, &mut tools).await.unwrap());
    assert_eq!(answer["deploy_status_code"], 4);
    // `hostname -f` failed: no FACTER_fqdn.
    assert!(!tools.invocations[1].env.iter().any(|(key, _)| key == "FACTER_fqdn"));
}

#[tokio::test]
async fn json_file_writes_sorted_indented_json() {
    let case = Case::new();
    let target = case.path("etc/app/config.json");
    let document = json!({"id": "j1", "group": "json-file",
        "config": {target.to_string_lossy(): {"command": "foo", "a": [1]}}});
    let answer = printed(case.run(Builtin::JsonFile, document, &mut Recorder::default()).await.unwrap());
    assert_eq!(answer, json!({"deploy_stdout": "", "deploy_stderr": "", "deploy_status_code": 0}));
    assert_eq!(fs::read_to_string(&target).unwrap(), "{\n    \"a\": [\n        1\n    ],\n    \"command\": \"foo\"\n}");
    assert_eq!(mode(target.parent().unwrap()), 0o700);
    let document = json!({"id": "j2", "group": "json-file", "config": {"relative.json": {}}});
    let error = case.run(Builtin::JsonFile, document, &mut Recorder::default()).await.unwrap_err();
    assert_eq!(error.to_string(), r#"file path "relative.json" is not absolute"#);
}

#[tokio::test]
async fn hiera_writes_its_config_and_data_unless_legacy_data_exists() {
    let case = Case::new();
    let mut tools = Recorder::answering(vec![output("empty\n", "", 0)]);
    let document = json!({"id": "h1", "group": "hiera",
        "config": {"hierarchy": ["%{::uuid}", "common"], "datafiles": {"common": {"b": 1, "a": "x"}}}});
    let answer = printed(case.run(Builtin::Hiera, document.clone(), &mut tools).await.unwrap());
    assert_eq!(answer["deploy_status_code"], 0);
    assert_eq!(tools.invocations[0].args, ["--key", "hiera.datafiles", "--type", "raw", "--key-default", "empty"]);
    let datadir = case.path("hieradata");
    assert_eq!(
        case.text("hiera.yaml"),
        format!(
            "\n---\n:backends:\n  - json\n:json:\n  :datadir: {}\n:hierarchy:\n  - %{{::uuid}}\n  - common\n",
            datadir.display()
        )
    );
    assert_eq!(case.text("hieradata/common.json"), "{\n    \"a\": \"x\",\n    \"b\": 1\n}");
    assert_eq!(mode(&datadir.join("common.json")), 0o600);
    let mut legacy = Recorder::answering(vec![output("{\"old\": 1}\n", "", 0)]);
    let answer = printed(case.run(Builtin::Hiera, document, &mut legacy).await.unwrap());
    assert_eq!(answer["deploy_status_code"], 1);
    assert_eq!(answer["deploy_stdout"], "{\"old\": 1}\n");
    assert!(
        answer["deploy_stderr"]
            .as_str()
            .unwrap()
            .starts_with("Legacy hieradata from os-apply-config has been detected - {\"old\": 1}.")
    );
}

#[tokio::test]
async fn cfn_init_writes_last_metadata_then_runs_cfn_init() {
    let case = Case::new();
    let mut tools = Recorder::answering(vec![output("ok", "", 0)]);
    let document = json!({"id": "c1", "group": "cfn-init", "config": "{\"config\": {\"files\": {}}}"});
    let answer = printed(case.run(Builtin::CfnInit, document, &mut tools).await.unwrap());
    assert_eq!(answer, json!({"deploy_stdout": "ok", "deploy_stderr": "", "deploy_status_code": 0}));
    assert_eq!(case.text("cfn/last_metadata"), r#"{"AWS::CloudFormation::Init": {"config": {"files": {}}}}"#);
    assert_eq!(mode(&case.path("cfn/last_metadata")), 0o700);
    assert_eq!((tools.invocations[0].program.as_str(), tools.invocations[0].args.len()), ("cfn-init", 0));
    assert_eq!(tools.invocations[0].cwd, case.root.path());
}

#[tokio::test]
async fn chef_builds_its_node_and_client_files() {
    let case = Case::new();
    let mut tools = Recorder::answering(vec![output("node1.example.com\n", "", 0), output("chef ran", "", 0)]);
    let document = json!({"id": "ch1", "group": "chef", "config": "[\"recipe[apache]\"]",
        "inputs": [{"name": "environment", "value": "production"}, {"name": "deploy_action", "value": "CREATE"},
                   {"name": "port", "value": 80}]});
    let answer = printed(case.run(Builtin::Chef, document, &mut tools).await.unwrap());
    assert_eq!(answer, json!({"deploy_status_code": 0, "deploy_stdout": "chef ran", "deploy_stderr": ""}));
    let work = case.path("chef/work");
    assert_eq!(
        case.text("chef/work/node/node1.example.com.json"),
        "{\n    \"port\": 80,\n    \"run_list\": [\n        \"recipe[apache]\"\n    ]\n}"
    );
    let kitchen = work.join("kitchen");
    assert_eq!(
        case.text("chef/work/client.rb"),
        format!(
            "log_level :debug\nlog_location STDOUT\nlocal_mode true\nchef_zero.enabled true\ncookbook_path '{k}/cookbooks'\n\
             role_path '{k}/roles'\nenvironment_path '{k}/environments'\nenvironment 'production'\nnode_path '{n}'",
            k = kitchen.display(),
            n = work.join("node").display()
        )
    );
    let chef = &tools.invocations[1];
    assert_eq!(chef.program, "chef-client");
    assert!(chef.env.contains(&("heat_outputs_path".into(), case.path("chef/out/ch1").display().to_string())));
}

#[tokio::test]
async fn chef_reports_what_heat_agents_means_to_when_tools_fail() {
    let case = Case::new();
    let mut tools = Recorder::answering(vec![output("", "fatal: not found", 128)]);
    let document =
        json!({"id": "ch2", "group": "chef", "config": "[]", "options": {"kitchen": "https://example.invalid/k.git"}});
    let answer = printed(case.run(Builtin::Chef, document.clone(), &mut tools).await.unwrap());
    assert_eq!(answer, json!({"deploy_status_code": 128, "deploy_stdout": "", "deploy_stderr": "fatal: not found"}));
    let mut tools = Recorder::answering(vec![output("", "", 0), output("", "", 1)]);
    let answer = printed(case.run(Builtin::Chef, document.clone(), &mut tools).await.unwrap());
    assert_eq!(answer["deploy_stderr"], "Could not determine hostname with hostname -f");
    let mut tools = Recorder::answering(vec![output("", "", 0), output("h\n", "", 0), Answer::Missing]);
    let answer = printed(case.run(Builtin::Chef, document, &mut tools).await.unwrap());
    assert_eq!(answer["deploy_status_code"], -1);
    assert_eq!(answer["deploy_stderr"], "[Errno 2] No such file or directory: 'chef-client'");
}

#[tokio::test]
async fn docker_compose_writes_the_project_and_its_env_files() {
    let case = Case::new();
    let mut tools = Recorder::answering(vec![output("up", "", 0)]);
    let compose = "web:\n  image: nginx\n  env_file: [env/web.env, other.env]\n";
    let document = json!({"id": "d1", "name": "site", "group": "docker-compose", "config": compose,
        "inputs": [{"name": "env_files", "value": "[{'file_name': 'env/web.env', 'content': 'A=1'}, {'file_name': 'unused.env', 'content': 'B'}]"}]});
    let answer = printed(case.run(Builtin::DockerCompose, document.clone(), &mut tools).await.unwrap());
    assert_eq!(answer, json!({"deploy_stdout": "up", "deploy_stderr": "", "deploy_status_code": 0}));
    let project = case.path("compose/site");
    assert_eq!(case.text("compose/site/docker-compose.yml"), compose);
    assert_eq!(case.text("compose/site/env/web.env"), "A=1");
    assert!(!project.join("unused.env").exists());
    assert_eq!(
        (tools.invocations[0].args.join(" "), tools.invocations[0].cwd.clone()),
        ("up -d --no-build".into(), project.clone())
    );
    let mut delete = document;
    delete["inputs"] = json!([{"name": "deploy_action", "value": "DELETE"}]);
    let answer = printed(case.run(Builtin::DockerCompose, delete.clone(), &mut tools).await.unwrap());
    assert_eq!(answer["deploy_status_code"], 0);
    assert_eq!(tools.invocations[1].args, ["kill"]);
    assert!(!project.join("docker-compose.yml").exists());
    // A second DELETE has no project left to kill.
    case.run(Builtin::DockerCompose, delete, &mut tools).await.unwrap();
    assert_eq!(tools.invocations.len(), 2);
}

#[test]
fn groups_name_their_built_ins() {
    for builtin in Builtin::ALL {
        assert_eq!(Builtin::from_group(builtin.group()), Some(builtin));
    }
    assert_eq!(Builtin::from_group("script"), Some(Builtin::Script));
    assert_eq!(Builtin::from_group("Ansible"), None);
}
