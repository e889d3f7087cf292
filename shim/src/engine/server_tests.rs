//! Servers registered with addresses on the real engine: an `OS::Nova::Server` mapped to
//! `OS::Heat::DeployedServer` by an environment gives a deployment and the outputs Nova's
//! attributes (`networks`, `addresses`, `first_address`, `accessIPv4`) and the agent's settings
//! (`os_collect_config`, without a credential); a template reading an attribute the server has
//! nothing registered for is refused naming it; a bad registration is refused. Helpers: `tests.rs`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::tests::{deployments, engine_at, request, signal_token, status};
use crate::model::{AddServer, Service, ServiceError};

const TEMPLATE: &str = "heat_template_version: 2018-08-31
resources:
  server:
    type: OS::Nova::Server
    properties: {name: web1, image: centos, flavor: m1.small}
  config:
    type: OS::Heat::SoftwareConfig
    properties: {group: script, inputs: [{name: ip}], config: echo}
  deploy:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {get_resource: config}
      server: {get_resource: server}
      input_values: {ip: {get_attr: [server, networks, ctlplane, 0]}}
outputs:
  first: {value: {get_attr: [server, first_address]}}
  addresses: {value: {get_attr: [server, addresses]}}
  access: {value: {get_attr: [server, accessIPv4]}}
  agent: {value: {get_attr: [server, os_collect_config]}}
";

fn web1(addresses: &[&str], networks: &[(&str, &[&str])]) -> AddServer {
    AddServer {
        name: "web1".into(),
        addresses: addresses.iter().map(|address| (*address).to_owned()).collect(),
        networks: networks
            .iter()
            .map(|(name, items)| ((*name).to_owned(), items.iter().map(|item| (*item).to_owned()).collect()))
            .collect(),
    }
}

fn mapped(template: &str) -> crate::model::StackRequest {
    let mut request = request("s", template, &[]);
    request.environment = json!({"resource_registry": {"OS::Nova::Server": "OS::Heat::DeployedServer"}});
    request
}

#[tokio::test]
async fn a_mapped_nova_server_answers_novas_attributes_from_its_registration() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    engine.add_server(web1(&["203.0.113.9"], &[("ctlplane", &["192.0.2.10"])])).await.unwrap();
    engine.create_stack(mapped(TEMPLATE)).await.unwrap();
    let published = deployments(&engine, "web1").await;
    let ip = published[0]["inputs"].as_array().unwrap().iter().find(|input| input["name"] == "ip").unwrap();
    assert_eq!(ip["value"], "192.0.2.10");
    engine.deployment_signal(&signal_token(&published[0]), json!({}), None).await.unwrap();
    assert_eq!(status(&engine, "s").await, "CREATE_COMPLETE");
    let outputs: BTreeMap<String, Value> =
        engine.show_stack("s").await.unwrap().outputs.into_iter().map(|output| (output.name, output.value)).collect();
    assert_eq!(outputs["first"], "192.0.2.10");
    assert_eq!(outputs["addresses"], json!({"ctlplane": [{"addr": "192.0.2.10", "version": 4}]}));
    assert_eq!(outputs["access"], "203.0.113.9");
    assert_eq!(
        outputs["agent"],
        json!({"collectors": ["request", "local"], "request": {
            "metadata_url": "http://127.0.0.1:9/v1/servers/web1/metadata", "token_file": "/etc/anneal/token"}})
    );
}

#[tokio::test]
async fn an_attribute_the_server_has_nothing_registered_for_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    engine.add_server(web1(&[], &[])).await.unwrap();
    let Err(ServiceError::Template { problems }) = engine.create_stack(mapped(TEMPLATE)).await else {
        panic!("a server without addresses cannot answer networks");
    };
    let joined = problems.join("\n");
    for expected in [
        "resource deploy: property \"input_values\": get_attr: resource server: attribute networks: no network \
         address registered for server web1 (anneal-shim server add --network NET=IP)",
        "output first: get_attr: resource server: attribute first_address: no address registered for server web1",
        "output access: get_attr: resource server: attribute accessIPv4: no IPv4 address registered",
    ] {
        assert!(joined.contains(expected), "{expected}\nin:\n{joined}");
    }
    assert!(!joined.contains("os_collect_config"), "{joined}");
}

#[tokio::test]
async fn a_bad_registration_is_refused_and_registers_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_at(&dir.path().join("shim.db"));
    for bad in [web1(&["not-an-ip"], &[]), web1(&[], &[("ctl\nplane", &["192.0.2.1"])])] {
        let error = engine.add_server(bad).await.unwrap_err();
        assert!(matches!(error, ServiceError::Invalid { .. }), "{error:?}");
    }
    assert!(engine.list_servers().await.unwrap().is_empty());
}
