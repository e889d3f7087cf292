//! The seeded random DAG of scenario 6 and its HOT template. Deployment `dK` runs on a random
//! server and takes up to 10 earlier deployments' output `o` as inputs (`iJ: {get_attr: [dP, o]}`),
//! each earlier deployment feeding at most 10 later ones. Predecessors are drawn from a window of
//! recent deployments so the graph has depth (a chain of waves) instead of being nearly flat.

use std::fmt::Write as _;

/// Largest fan-in and fan-out of a deployment, from the issue.
pub const MAX_DEGREE: usize = 10;
/// How far back predecessors are drawn from.
const WINDOW: usize = 1000;

/// Marsaglia's xorshift64: deterministic for a seed, no dependency.
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..bound` (`bound` > 0; the modulo bias is irrelevant here).
    pub fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

/// Deployments in topological order (every predecessor has a smaller index).
pub struct Dag {
    pub predecessors: Vec<Vec<usize>>,
    pub server_of: Vec<usize>,
}

impl Dag {
    pub fn generate(deployments: usize, servers: usize, seed: u64) -> Dag {
        let mut random = XorShift::new(seed);
        let mut fan_out = vec![0usize; deployments];
        let mut predecessors = Vec::with_capacity(deployments);
        let mut server_of = Vec::with_capacity(deployments);
        for index in 0..deployments {
            let wanted = random.below(MAX_DEGREE + 1).min(index);
            let mut chosen: Vec<usize> = Vec::with_capacity(wanted);
            // A few draws per wanted edge: candidates already at the fan-out limit are skipped.
            for _ in 0..wanted * 4 {
                if chosen.len() == wanted {
                    break;
                }
                let candidate = index - 1 - random.below(index.min(WINDOW));
                if fan_out[candidate] < MAX_DEGREE && !chosen.contains(&candidate) {
                    fan_out[candidate] += 1;
                    chosen.push(candidate);
                }
            }
            predecessors.push(chosen);
            server_of.push(random.below(servers));
        }
        Dag { predecessors, server_of }
    }

    pub fn len(&self) -> usize {
        self.predecessors.len()
    }

    pub fn edges(&self) -> usize {
        self.predecessors.iter().map(Vec::len).sum()
    }

    /// Deployments on the longest dependency path.
    pub fn depth(&self) -> usize {
        let mut depths = Vec::with_capacity(self.len());
        for predecessors in &self.predecessors {
            let depth = predecessors.iter().map(|&index| depths[index]).max().unwrap_or(0) + 1;
            depths.push(depth);
        }
        depths.into_iter().max().unwrap_or(0)
    }

    /// The largest fan-out of any deployment.
    pub fn max_fan_out(&self) -> usize {
        let mut fan_out = vec![0usize; self.len()];
        for &predecessor in self.predecessors.iter().flatten() {
            fan_out[predecessor] += 1;
        }
        fan_out.into_iter().max().unwrap_or(0)
    }

    /// The HOT template (JSON, which is YAML): one shared script config declaring output `o`,
    /// and one deployment per node.
    pub fn template(&self) -> String {
        let mut text = String::with_capacity(self.len() * 300);
        text.push_str(
            "{\"heat_template_version\":\"2018-08-31\",\"resources\":{\"config\":{\"type\":\"OS::Heat::SoftwareConfig\",\
             \"properties\":{\"group\":\"script\",\"config\":\"#!/bin/sh\\n\",\"outputs\":[{\"name\":\"o\"}]}}",
        );
        for (index, predecessors) in self.predecessors.iter().enumerate() {
            let _ = write!(
                text,
                ",\"{}\":{{\"type\":\"OS::Heat::SoftwareDeployment\",\"properties\":{{\"config\":{{\"get_resource\":\"config\"}},\
                 \"server\":\"{}\",\"input_values\":{{",
                deployment_name(index),
                server_name(self.server_of[index])
            );
            for (position, predecessor) in predecessors.iter().enumerate() {
                let comma = if position == 0 { "" } else { "," };
                let _ = write!(
                    text,
                    "{comma}\"i{position}\":{{\"get_attr\":[\"{}\",\"o\"]}}",
                    deployment_name(*predecessor)
                );
            }
            text.push_str("}}}");
        }
        text.push_str("}}");
        text
    }
}

pub fn deployment_name(index: usize) -> String {
    format!("d{index}")
}

pub fn server_name(index: usize) -> String {
    format!("s{index}")
}

/// The index in a deployment name (`d123` → 123).
pub fn deployment_index(name: &str) -> Option<usize> {
    name.strip_prefix('d')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dag_is_deterministic_acyclic_and_within_the_degree_limits() {
        let dag = Dag::generate(3000, 300, 7);
        let again = Dag::generate(3000, 300, 7);
        assert_eq!(dag.predecessors, again.predecessors);
        assert_eq!(dag.server_of, again.server_of);
        for (index, predecessors) in dag.predecessors.iter().enumerate() {
            assert!(predecessors.len() <= MAX_DEGREE);
            assert!(predecessors.iter().all(|&predecessor| predecessor < index), "edges point backwards only");
        }
        assert!(dag.max_fan_out() <= MAX_DEGREE);
        assert!(dag.edges() > 3000 * 3, "about 5 predecessors on average: {}", dag.edges());
        assert!(dag.depth() > 10, "the graph has depth: {}", dag.depth());
    }

    #[test]
    fn the_template_is_json_with_one_resource_per_deployment() {
        let dag = Dag::generate(50, 5, 3);
        let template: serde_json::Value = serde_json::from_str(&dag.template()).expect("valid JSON");
        let resources = template["resources"].as_object().expect("resources");
        assert_eq!(resources.len(), 51);
        let inputs = resources["d49"]["properties"]["input_values"].as_object().expect("input_values");
        assert_eq!(inputs.len(), dag.predecessors[49].len());
        assert_eq!(deployment_index("d49"), Some(49));
    }
}
