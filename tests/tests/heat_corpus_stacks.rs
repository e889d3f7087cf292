//! Real Heat templates of the corpus (tests/peers/corpus.sh) as stacks on a real shim, unchanged
//! or with our environment (tests/fixtures/corpus/infrastructure.yaml), never edited:
//! - those that need no script run to complete (NO_SIGNAL deployments, configs alone) complete
//!   and are checked for CREATE_COMPLETE and their outputs; heat_integrationtests' deployment
//!   group, whose config is empty, is signalled by hand as Heat's own test does;
//! - the README's Heat-user example (examples/heat: a Nova server on a Neutron port and a
//!   script deployed to it, plus the one-line environment) converges with a real agent;
//! - heat-tempest-plugin's software-config scenario (script, cfn-init, script and puppet
//!   deployments on one Nova server), with our environment and the files map its test sends:
//!   a real agent runs the two script deployments, whose outputs are checked, and the cfn-init
//!   (NO_SIGNAL) and puppet ones through its built-in hooks, with recording stand-ins for
//!   `cfn-init` and `puppet` and every directory those hooks write in the test's temp dir;
//! - those whose scripts need a real node (TripleO's: dmidecode, /etc/puppet, /root) are
//!   created against registered servers with no agent, and the deployment each server's
//!   metadata holds (group, config, inputs) is checked instead.

mod corpus_support;

use std::path::Path;
use std::time::Duration;

use anneal_tests::{AgentSettings, Fleet, Shim, wait_until};
use corpus_support::{corpus_dir, fixtures_dir};
use serde_json::{Value, json};

const HEAT_DEPLOYMENT_GROUP: &str = "embedded/heat/heat_integrationtests/functional/test_software_deployment_group/\
                                     SoftwareDeploymentGroupTest.sd_template.yaml";
const HEAT_DEPRECATED_DEPLOYMENTS: &str = "embedded/heat/heat_integrationtests/functional/test_replace_deprecated/ReplaceDeprecatedResourceTest.template.yaml";
const TEMPEST_WEBAPP_CONFIG: &str =
    "heat-tempest-plugin/heat_tempest_plugin/tests/scenario/templates/netcat-webapp.yaml";
const TEMPEST_SOFTWARE_CONFIG: &str =
    "heat-tempest-plugin/heat_tempest_plugin/tests/scenario/templates/test_server_software_config.yaml";
/// The scripts heat-tempest-plugin's test sends as its files map (corpus.sh writes them out).
const TEMPEST_SOFTWARE_CONFIG_FILES: &str =
    "embedded/heat-tempest-plugin/heat_tempest_plugin/tests/scenario/test_server_software_config";
const TRIPLEO_POST_DEPLOY: &str = "tripleo-heat-templates/extraconfig/post_deploy/example.yaml";
const TRIPLEO_PER_NODE: &str = "tripleo-heat-templates/puppet/extraconfig/pre_deploy/per_node.yaml";

fn template(relative: &str) -> String {
    let path = corpus_dir().join(relative);
    assert!(path.is_file(), "{} is in the corpus (tests/peers/corpus.sh)", path.display());
    path.to_string_lossy().into_owned()
}

fn infrastructure_environment() -> String {
    fixtures_dir().join("infrastructure.yaml").to_string_lossy().into_owned()
}

/// The deployments in the metadata document a registered server's agent would fetch, once one
/// of each name in `names` is there.
async fn deployments_of(credentials: &Value, names: &[&str]) -> Vec<Value> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = credentials["metadata_url"].as_str().expect("server add prints the metadata URL");
    let token = credentials["token"].as_str().expect("server add prints a token");
    let client = reqwest::Client::new();
    wait_until(Duration::from_secs(30), &format!("deployments {names:?} in the server's metadata"), || async {
        let response = client.get(url).bearer_auth(token).send().await.ok()?;
        let document: Value = serde_json::from_str(&response.text().await.ok()?).ok()?;
        let deployments = document["deployments"].as_array()?.clone();
        let present = |name: &&str| deployments.iter().any(|entry| entry["name"] == *name);
        names.iter().all(present).then_some(deployments)
    })
    .await
}

/// The value of input `name` of a deployment entry.
fn input(entry: &Value, name: &str) -> Value {
    let inputs = entry["inputs"].as_array().expect("a deployment has inputs");
    inputs.iter().find(|input| input["name"] == name).map(|input| input["value"].clone()).unwrap_or(Value::Null)
}

async fn create_and_wait(shim: &Shim, name: &str, arguments: &[&str]) {
    let mut create = vec!["stack", "create", name];
    create.extend_from_slice(arguments);
    create.extend_from_slice(&["--wait", "--timeout", "60"]);
    let created = shim.cli(&create).await;
    assert_eq!(created.code, 0, "stack create --wait ends with CREATE_COMPLETE: {created:?}");
    assert_eq!(shim.stack_status(name).await, "CREATE_COMPLETE");
}

/// heat_integrationtests' SoftwareDeploymentGroup template, unchanged: its four servers are
/// names (dummy0..dummy3), registered here. Its config is empty, which no script hook can run
/// (Heat's hook-script.py fails to exec it too), so each member is signalled without data as
/// Heat's own test does (test_software_deployment_group.py, `signal_required=True`); the group
/// then completes, every server having received its member with the template's input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heat_integrationtests_deployment_group_completes_when_its_four_servers_signal() {
    let shim = Shim::start().await;
    let mut servers = Vec::new();
    for name in ["dummy0", "dummy1", "dummy2", "dummy3"] {
        servers.push(shim.cli_json(&["server", "add", name, "--format", "json"]).await);
    }
    let path = template(HEAT_DEPLOYMENT_GROUP);
    shim.cli_ok(&["stack", "create", "group", "--template", &path]).await;
    for (index, credentials) in servers.iter().enumerate() {
        // The member of the group named `deployment` is `deployment/<key>`.
        let member = format!("deployment/{index}");
        let deployments = deployments_of(credentials, &[&member]).await;
        assert_eq!(deployments.len(), 1, "{deployments:?}");
        assert_eq!(deployments[0]["group"], "script");
        assert_eq!(input(&deployments[0], "foo"), "foo_input", "the template's default reached server {index}");
        assert_eq!(input(&deployments[0], "deploy_resource_name"), json!(index.to_string()));
        let signal = input(&deployments[0], "deploy_signal_id");
        signal_without_data(signal.as_str().expect("a signal URL")).await;
    }
    let shown = shim.settled("group", Duration::from_secs(30)).await;
    assert_eq!(shown["status"], "CREATE_COMPLETE", "{shown}");
}

/// A POST of `{}` to a deployment's signal URL: no deploy_status_code, so success.
async fn signal_without_data(url: &str) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("the shim answers the signal");
    assert!(response.status().is_success(), "the signal is accepted: {}", response.status());
}

/// heat_integrationtests' deprecated OS::Heat::SoftwareDeployments on an OS::Nova::Server,
/// with our environment: the server (no `name` property) binds to the registered server named
/// as the resource, the NO_SIGNAL deployment completes without an agent, and the output is the
/// server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heat_integrationtests_deprecated_deployments_complete_on_a_deployed_server() {
    let shim = Shim::start().await;
    let credentials = shim.cli_json(&["server", "add", "server", "--format", "json"]).await;
    let path = template(HEAT_DEPRECATED_DEPLOYMENTS);
    let environment = infrastructure_environment();
    let parameters = ["--param", "flavor=m1.small", "--param", "image=cirros", "--param", "network=private"];
    let mut arguments = vec!["--template", path.as_str(), "-e", environment.as_str()];
    arguments.extend_from_slice(&parameters);
    create_and_wait(&shim, "deprecated", &arguments).await;
    let outputs = shim.stack_outputs("deprecated").await;
    assert_eq!(outputs["server"], "server", "{outputs:?}");
    let deployments = deployments_of(&credentials, &["dep/0"]).await;
    assert_eq!(deployments[0]["config"], "xxxx");
    assert_eq!(input(&deployments[0], "deploy_signal_transport"), "NO_SIGNAL");
}

/// heat-tempest-plugin's netcat web app config (a provider template of its scenario tests),
/// unchanged: the config is created from the parameters (a number and a string) and the
/// template's `OS::stack_id` output is the config's id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tempest_webapp_config_completes_with_its_id_as_output() {
    let shim = Shim::start().await;
    let path = template(TEMPEST_WEBAPP_CONFIG);
    let arguments =
        ["--template", path.as_str(), "--param", "app_port=8080", "--param", "wc_curl_cli=curl -X POST http://h/s"];
    create_and_wait(&shim, "webapp", &arguments).await;
    let shown = shim.stack_show("webapp").await;
    assert_eq!(shown["parameters"]["app_port"], 8080, "a number parameter: {shown}");
    assert_eq!(shown["resources"][0]["name"], "webapp_nc");
    let outputs = shim.stack_outputs("webapp").await;
    let id = outputs["OS::stack_id"].as_str().unwrap_or_default();
    let is_uuid = id.len() == 36 && id.chars().all(|c| c == '-' || c.is_ascii_hexdigit());
    assert!(is_uuid, "OS::stack_id is the config's id: {outputs:?}");
}

/// TripleO's post-deploy example and per-node hieradata templates, unchanged, on a registered
/// server without an agent (their scripts write /root and /etc/puppet and read dmidecode):
/// the metadata the agent would receive holds both deployments with their inputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tripleo_extraconfig_deployments_reach_the_servers_metadata() {
    let shim = Shim::start().await;
    let credentials = shim.cli_json(&["server", "add", "overcloud-0", "--format", "json"]).await;
    let post_deploy = template(TRIPLEO_POST_DEPLOY);
    let servers = r#"servers={"0": "overcloud-0"}"#;
    shim.cli_ok(&["stack", "create", "post-deploy", "--template", &post_deploy, "--param", servers]).await;
    let per_node = template(TRIPLEO_PER_NODE);
    let lookup = r#"NodeDataLookup={"4c4c4544-0042": {"ntp::servers": ["pool.example"]}}"#;
    let arguments = ["--template", per_node.as_str(), "--param", "server=overcloud-0", "--param", lookup];
    shim.cli_ok(&[&["stack", "create", "per-node"][..], &arguments].concat()).await;

    let deployments = deployments_of(&credentials, &["ExtraDeployments", "NodeSpecificDeployment"]).await;
    let extra = deployments.iter().find(|entry| entry["name"] == "ExtraDeployments").expect("the group member");
    assert_eq!(extra["group"], "script");
    assert!(extra["config"].as_str().unwrap_or_default().contains("echo \"extra\""), "{extra}");
    assert_eq!(input(extra, "deploy_action"), "CREATE");
    assert_eq!(input(extra, "deploy_resource_name"), "0", "a group member is named by its key");
    let per_node = deployments.iter().find(|entry| entry["name"] == "NodeSpecificDeployment").expect("per node");
    assert_eq!(per_node["group"], "script");
    assert_eq!(input(per_node, "node_lookup"), json!({"4c4c4544-0042": {"ntp::servers": ["pool.example"]}}));
    assert_eq!(input(per_node, "deploy_signal_transport"), "CFN_SIGNAL");
    assert_eq!(shim.stack_status("per-node").await, "CREATE_IN_PROGRESS", "waits for the server's signal");
}

/// README.md "Bringing a Heat template": the example template, refused alone with the fixes
/// named, converges with its one-line environment on a registered server run by a real agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_heat_example_converges_with_its_one_line_environment() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/heat");
    let template = examples.join("server.yaml").to_string_lossy().into_owned();
    let environment = examples.join("deployed-server.yaml").to_string_lossy().into_owned();
    let shim = Shim::start().await;
    let fleet = Fleet::start(&shim, &["web1"], &AgentSettings::default()).await;
    let refused = shim.cli(&["stack", "create", "web", "--template", &template]).await;
    assert_ne!(refused.code, 0, "{refused:?}");
    for fix in [r#"{"OS::Nova::Server": OS::Heat::DeployedServer}"#, r#"{"OS::Neutron::Port": OS::Heat::None}"#] {
        assert!(refused.stderr.contains(fix), "the refusal names {fix}: {refused:?}");
    }
    let created = shim.cli(&["stack", "create", "web", "--template", &template, "-e", &environment, "--wait"]).await;
    assert_eq!(created.code, 0, "converges: {created:?}\n{}", fleet.logs());
    let outputs = shim.stack_outputs("web").await;
    let result = outputs["result"].as_str().unwrap_or_default();
    assert!(result.starts_with("hello from "), "the script's output: {outputs:?}");
}

/// The environment `stack create` sends for our environment files (merged as heatclient does),
/// read from the CLI's `--print-request`.
async fn merged_environment(shim: &Shim, files: &[&str]) -> Value {
    let empty = shim.write_template("empty.yaml", "heat_template_version: 2013-05-23\n");
    let mut arguments = vec!["stack", "create", "dry", "--template", empty.to_str().expect("utf-8"), "--print-request"];
    let paths: Vec<String> =
        files.iter().map(|file| fixtures_dir().join(file).to_string_lossy().into_owned()).collect();
    for path in &paths {
        arguments.extend_from_slice(&["-e", path]);
    }
    shim.cli_json(&arguments).await["environment"].clone()
}

/// heat-tempest-plugin's test_server_software_config scenario as its test runs it (the template
/// unchanged, its scripts as the files map), with our environment instead of a Nova server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tempest_software_config_scenario_runs_its_scripts_with_a_real_agent() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shim = Shim::start().await;
    // cfg1.sh writes /tmp/$bar: `bar` points into a temp dir of this test.
    let scratch = tempfile::Builder::new().prefix("anneal-corpus-").tempdir_in("/tmp").expect("temp dir in /tmp");
    // The Nova server has no `name`: it binds to the registered server named as the resource.
    let fleet = Fleet::start(&shim, &["server"], &built_in_hook_settings(scratch.path())).await;
    let bar = format!("{}/bar", scratch.path().file_name().expect("a name").to_string_lossy());
    let files_dir = corpus_dir().join(TEMPEST_SOFTWARE_CONFIG_FILES);
    let read = |name: &str| std::fs::read_to_string(files_dir.join(name)).expect("corpus.sh wrote the test's files");
    let body = json!({
        "name": "tempest",
        "template": std::fs::read_to_string(template(TEMPEST_SOFTWARE_CONFIG)).expect("the template"),
        "environment": merged_environment(&shim, &["infrastructure.yaml", "tempest.yaml"]).await,
        "files": {"/cfg1.sh": read("CFG1_SH.txt"), "/cfg3.pp": read("CFG3_PP.txt")},
        "parameters": {"key_name": "default", "flavor": "m1.small", "image": "fedora", "network": "private",
                       "dep1_bar": bar},
    });
    let token = std::fs::read_to_string(shim.token_file()).expect("admin token");
    let response = reqwest::Client::new()
        .post(format!("{}/v1/stacks", shim.url()))
        .bearer_auth(token.trim())
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("the shim answers");
    let status = response.status();
    assert_eq!(status.as_u16(), 201, "created: {}", response.text().await.unwrap_or_default());

    let outputs = wait_until(Duration::from_secs(60), "the script deployments' outputs", || async {
        let outputs = shim.stack_outputs("tempest").await;
        let ready = |name: &str| outputs.get(name).is_some_and(|output| !output["result"].is_null());
        (ready("res1") && ready("res2")).then_some(outputs)
    })
    .await;
    let expected = format!("The file /tmp/{bar} contains fooooo for server server during CREATE");
    assert_eq!(outputs["res1"]["result"], expected.as_str(), "{outputs:?}\n{}", fleet.logs());
    assert_eq!(outputs["res1"]["status_code"], 0);
    assert!(outputs["res1"]["stderr"].as_str().unwrap_or_default().contains("Output to stderr"), "{outputs:?}");
    assert_eq!(std::fs::read_to_string(scratch.path().join("bar")).expect("cfg1.sh wrote it"), "fooooo\n");
    let res2 = outputs["res2"]["result"].as_str().unwrap_or_default();
    assert!(res2.starts_with("The file /tmp/cfn-init-foo contains ") && res2.ends_with("during CREATE"), "{res2}");

    let deployments = deployments_of(fleet.agent("server").credentials(), &["10_dep2a", "dep3"]).await;
    let cfn_init = deployments.iter().find(|entry| entry["name"] == "10_dep2a").expect("dep2a");
    assert_eq!(cfn_init["group"], "cfn-init");
    let file = &cfn_init["config"]["config"]["files"]["/tmp/cfn-init-foo"];
    assert_eq!(file["content"], "barrr", "get_input resolved by the StructuredDeployment: {cfn_init}");
    let puppet = deployments.iter().find(|entry| entry["name"] == "dep3").expect("dep3");
    assert_eq!(puppet["group"], "puppet");
    assert_eq!(puppet["config"], read("CFG3_PP.txt").as_str());
    assert_eq!((input(puppet, "foo"), input(puppet, "bar")), (json!("fo"), json!("ba")));

    // The built-in puppet hook ran `puppet apply` on the manifest with the inputs as facts.
    let record = scratch.path().join("records");
    wait_until(Duration::from_secs(30), "the puppet run", || async {
        (shim.stack_status("tempest").await == "CREATE_COMPLETE").then_some(())
    })
    .await;
    let args = std::fs::read_to_string(record.join("puppet.args")).expect("puppet ran");
    let manifest = args.lines().last().expect("the manifest is the last argument").to_string();
    assert!(args.starts_with("apply\n--color\nfalse\n--detailed-exitcodes\n"), "{args}");
    assert_eq!(std::fs::read_to_string(&manifest).expect("the manifest"), read("CFG3_PP.txt"));
    let env = std::fs::read_to_string(record.join("puppet.env")).expect("puppet's environment");
    assert!(
        env.lines().any(|line| line == "FACTER_foo=fo") && env.lines().any(|line| line == "FACTER_bar=ba"),
        "{env}"
    );
    let metadata = std::fs::read_to_string(scratch.path().join("cfn/last_metadata")).expect("cfn-init's metadata");
    assert!(metadata.contains("barrr"), "{metadata}");
}

/// Agent settings whose built-in puppet and cfn-init hooks write in `root` and run recording
/// stand-ins (`root/bin`) for the tools, which write their arguments and environment to
/// `root/records`.
fn built_in_hook_settings(root: &Path) -> AgentSettings {
    use std::os::unix::fs::PermissionsExt;
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    std::fs::create_dir_all(root.join("records")).expect("records");
    for tool in ["puppet", "cfn-init"] {
        let script = format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {records}/{tool}.args\nenv > {records}/{tool}.env\n",
            records = root.join("records").display()
        );
        std::fs::write(bin.join(tool), script).expect("a stand-in tool");
        std::fs::set_permissions(bin.join(tool), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let path = |relative: &str| root.join(relative).display().to_string();
    AgentSettings::default()
        .hook_env("PATH", &format!("{}:/usr/bin:/bin", bin.display()))
        .hook_env("HEAT_PUPPET_WORKING", &path("puppet/working"))
        .hook_env("HEAT_PUPPET_OUTPUTS", &path("puppet/outputs"))
        .hook_env("HEAT_PUPPET_LOGDIR", &path("puppet/logs"))
        .hook_env("HEAT_PUPPET_HIERA_DATADIR", &path("hieradata"))
        .hook_env("HEAT_CFN_INIT_LAST_METADATA_DIR", &path("cfn"))
}
