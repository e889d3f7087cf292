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
            public_urls.extend(urls.iter().enumerate().filter(|(other, _)| *other != index).map(|(_, url)| url.clone()));
            let replica = Replica { database_url: database_url.clone(), admin_token: ADMIN_TOKEN.to_string(), public_urls };
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
    TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).map(|address| address.port()).expect("a free port")
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
