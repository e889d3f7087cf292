//! Shared by the replica tests (`replicas*.rs`): a private PostgreSQL and three `anneal-shim
//! serve` replicas on it, each told every replica's URL (its own first), and a template of
//! script deployments across servers, each reading the output of the one before it on another
//! server (`get_attr` across servers), so a traversal crosses replicas at every step. Every
//! script appends `<server> <deployment>` to one log, which `runs` reads back: how many times
//! each deployment ran.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use anneal_tests::{Postgres, Replica, Shim};

pub const ADMIN_TOKEN: &str = "replica-admin-token-0123456789abcdef0123456789";
pub const STACK: &str = "chain";

/// The database and its replicas.
pub struct Cluster {
    pub postgres: Postgres,
    pub database_url: String,
    pub replicas: Vec<Shim>,
}

impl Cluster {
    /// PostgreSQL (fsync on: a restart must keep what was acknowledged) and `count` replicas.
    pub async fn start(count: usize) -> Cluster {
        let postgres = Postgres::start(true);
        let database_url = postgres.create_database("anneal");
        let ports: Vec<u16> = (0..count).map(|_| free_port()).collect();
        let urls: Vec<String> = ports.iter().map(|port| format!("http://127.0.0.1:{port}")).collect();
        let mut replicas = Vec::new();
        for (index, port) in ports.iter().enumerate() {
            // Its own URL first, then the others in order.
            let mut public_urls = vec![urls[index].clone()];
            public_urls
                .extend(urls.iter().enumerate().filter(|(other, _)| *other != index).map(|(_, url)| url.clone()));
            let replica =
                Replica { database_url: database_url.clone(), admin_token: ADMIN_TOKEN.to_string(), public_urls };
            replicas.push(Shim::start_replica(&format!("127.0.0.1:{port}"), replica).await);
        }
        Cluster { postgres, database_url, replicas }
    }

    pub fn shims(&self) -> Vec<&Shim> {
        self.replicas.iter().collect()
    }
}

/// A loopback port free now (the replicas must know one another's URLs before they start).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

/// A chain of `servers.len()` deployments, deployment `d<i>` on `servers[i]`: its script
/// appends to `$RUNS_LOG`, sleeps `pause`, and outputs `result` = the previous deployment's
/// result (`start` for the first) with its server's name appended.
pub fn chain_template(servers: &[String], pause: &str) -> String {
    let mut text = format!(
        "heat_template_version: 2018-08-31
resources:
  step:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{{name: previous}}, {{name: me}}]
      outputs: [{{name: result}}]
      config: |
        #!/bin/sh
        echo \"$me $deploy_resource_name\" >> \"$RUNS_LOG\"
        sleep {pause}
        printf '%s,%s' \"$previous\" \"$me\" > \"$heat_outputs_path.result\"
"
    );
    for (index, server) in servers.iter().enumerate() {
        let previous = if index == 0 { "start".to_string() } else { format!("{{get_attr: [d{}, result]}}", index - 1) };
        text.push_str(&format!(
            "  d{index}:\n    type: OS::Heat::SoftwareDeployment\n    properties:\n      config: {{get_resource: step}}\n      server: {server}\n      input_values: {{previous: {previous}, me: {server}}}\n"
        ));
    }
    let last = servers.len() - 1;
    text.push_str(&format!("outputs:\n  result:\n    value: {{get_attr: [d{last}, result]}}\n"));
    text
}

/// The result the chain's last deployment outputs.
pub fn chain_result(servers: &[String]) -> String {
    std::iter::once("start".to_string()).chain(servers.iter().cloned()).collect::<Vec<_>>().join(",")
}

/// How many times each deployment's script ran, from the runs log.
pub fn runs(log: &Path) -> BTreeMap<String, usize> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let deployment = line.split_whitespace().nth(1).unwrap_or_default().to_string();
        *counts.entry(deployment).or_insert(0) += 1;
    }
    counts
}

/// Writes the template next to the runs log and returns its path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write template");
    path
}

/// `template` with one more deployment, `extra` on `server`, reading nothing: an update that
/// must run it once and leave every other deployment alone.
pub fn with_extra_deployment(template: &str, server: &str) -> String {
    let (resources, outputs) = template.split_once("outputs:\n").expect("the chain has outputs");
    format!(
        "{resources}  extra:\n    type: OS::Heat::SoftwareDeployment\n    properties:\n      config: {{get_resource: step}}\n      server: {server}\n      input_values: {{previous: extra, me: {server}}}\noutputs:\n{outputs}"
    )
}

/// A stack whose wait condition (on a handle nobody signals) times out after `seconds`, and
/// whose own timeout is far: its failure must be the wait condition's, fired once.
pub const WAIT_TIMEOUT_TEMPLATE: &str = "heat_template_version: 2018-08-31
resources:
  handle:
    type: OS::Heat::WaitConditionHandle
  wait:
    type: OS::Heat::WaitCondition
    properties:
      handle: {get_resource: handle}
      timeout: 4
";

/// A stack with a deployment to a server whose agent never runs: the stack's own timeout fails it.
pub fn unanswered_deployment_template(server: &str) -> String {
    format!(
        "heat_template_version: 2018-08-31
resources:
  config:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      config: \"#!/bin/sh\\ntrue\\n\"
  deployment:
    type: OS::Heat::SoftwareDeployment
    properties:
      config: {{get_resource: config}}
      server: {server}
"
    )
}

/// `template` with a wait condition in the chain: after `d<after>`, a deployment `notify` on
/// `server` signals a handle with `anneal-agent signal` (the endpoint its document names, so the
/// replica that served it), and `d<after + 1>` waits for it. The agent binary is `$ANNEAL_AGENT`.
pub fn with_wait_condition(template: &str, after: usize, server: &str) -> String {
    let next = format!("  d{}:\n    type: OS::Heat::SoftwareDeployment\n", after + 1);
    let waiting = format!("{next}    depends_on: wait\n");
    let (resources, outputs) = template
        .replacen(&next, &waiting, 1)
        .split_once("outputs:\n")
        .map(|(resources, outputs)| (resources.to_string(), outputs.to_string()))
        .expect("the chain has outputs");
    format!(
        "{resources}  handle:
    type: OS::Heat::WaitConditionHandle
  wait:
    type: OS::Heat::WaitCondition
    properties:
      handle: {{get_resource: handle}}
      timeout: 120
  signaller:
    type: OS::Heat::SoftwareConfig
    properties:
      group: script
      inputs: [{{name: endpoint}}, {{name: me}}]
      config: |
        #!/bin/sh
        echo \"$me $deploy_resource_name\" >> \"$RUNS_LOG\"
        exec \"$ANNEAL_AGENT\" signal \"$endpoint\" --data ready --id one --retry-for-secs 60
  notify:
    type: OS::Heat::SoftwareDeployment
    depends_on: d{after}
    properties:
      config: {{get_resource: signaller}}
      server: {server}
      input_values: {{endpoint: {{get_attr: [handle, endpoint]}}, me: {server}}}
outputs:
{outputs}  waited:
    value: {{get_attr: [wait, data]}}
"
    )
}
