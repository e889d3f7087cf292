//! Which deployments may start now: the ordering rules, kept free of I/O so they can be tested
//! as a table. Order is the list order Heat publishes (sorted by name), refined by
//! `options.depends_on` (names of deployments on the same server). With `parallel = 1` the list is
//! walked strictly in order; with more, any deployment whose dependencies are done may start, in
//! list order, until the slots are full.

use std::collections::{HashMap, HashSet};

use anneal_protocol::Deployment;

/// Where one deployment stands, as far as ordering is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Not started (or interrupted and due to rerun).
    Pending,
    /// Waiting for something outside the ordering (a missing hook); does not block later ones.
    Waiting,
    Running,
    /// Finished; `failed` is Heat's verdict on the result.
    Done {
        failed: bool,
    },
    /// Nothing to run (no config for the action, os-apply-config): counts as done for dependents.
    Skipped,
}

/// What to do with a deployment now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Start(String),
    /// Never run: finish it as a failure with this reason (a dependency failed, a cycle).
    Fail {
        id: String,
        reason: String,
    },
}

/// The decisions for this instant. `progress` maps deployment ids to their state; ids missing
/// from it are `Pending`.
pub fn decide(deployments: &[Deployment], progress: &HashMap<String, Progress>, parallel: usize) -> Vec<Decision> {
    let state = |deployment: &Deployment| progress.get(&deployment.id).copied().unwrap_or(Progress::Pending);
    let by_name = names(deployments);
    let in_cycle = cycle_members(deployments, &by_name);
    let mut running = deployments.iter().filter(|deployment| state(deployment) == Progress::Running).count();
    let mut decisions = Vec::new();
    for deployment in deployments {
        if state(deployment) != Progress::Pending {
            continue;
        }
        if let Some(cycle) = in_cycle.get(&deployment.id) {
            let reason = format!("options.depends_on forms a cycle: {cycle}");
            decisions.push(Decision::Fail { id: deployment.id.clone(), reason });
            continue;
        }
        match dependencies(deployment, &by_name, &state) {
            Dependencies::Failed(name) => {
                let reason = format!("dependency {name} failed, so this deployment was not run");
                decisions.push(Decision::Fail { id: deployment.id.clone(), reason });
            }
            Dependencies::Unfinished if parallel == 1 => break,
            Dependencies::Unfinished => continue,
            Dependencies::Done if running < parallel => {
                running += 1;
                decisions.push(Decision::Start(deployment.id.clone()));
                if parallel == 1 {
                    break;
                }
            }
            // Strict list order with one slot: nothing later may overtake the one that waits.
            Dependencies::Done if parallel == 1 => break,
            Dependencies::Done => {}
        }
    }
    decisions
}

enum Dependencies {
    Done,
    Unfinished,
    Failed(String),
}

fn dependencies(
    deployment: &Deployment,
    by_name: &HashMap<&str, &Deployment>,
    state: &impl Fn(&Deployment) -> Progress,
) -> Dependencies {
    let mut unfinished = false;
    for name in &deployment.options.depends_on {
        // A name that is not in this document refers to something already gone: Heat only
        // publishes a deployment once its own dependencies were created.
        let Some(dependency) = by_name.get(name.as_str()) else { continue };
        match state(dependency) {
            Progress::Done { failed: true } => return Dependencies::Failed(name.clone()),
            Progress::Done { failed: false } | Progress::Skipped => {}
            Progress::Pending | Progress::Waiting | Progress::Running => unfinished = true,
        }
    }
    if unfinished { Dependencies::Unfinished } else { Dependencies::Done }
}

fn names(deployments: &[Deployment]) -> HashMap<&str, &Deployment> {
    let mut by_name = HashMap::new();
    for deployment in deployments {
        if let Some(name) = &deployment.name {
            by_name.entry(name.as_str()).or_insert(deployment);
        }
    }
    by_name
}

/// Ids of deployments on a `depends_on` cycle, each with the cycle written out (`a -> b -> a`).
fn cycle_members(deployments: &[Deployment], by_name: &HashMap<&str, &Deployment>) -> HashMap<String, String> {
    let mut members = HashMap::new();
    for start in deployments.iter().filter(|deployment| deployment.name.is_some()) {
        let mut path: Vec<&Deployment> = vec![start];
        let mut visited = HashSet::new();
        if let Some(cycle) = find_cycle(start, by_name, &mut path, &mut visited) {
            members.insert(start.id.clone(), cycle);
        }
    }
    members
}

/// Depth-first search from `path`'s last element for a way back to `path[0]`.
fn find_cycle<'a>(
    start: &Deployment,
    by_name: &HashMap<&str, &'a Deployment>,
    path: &mut Vec<&'a Deployment>,
    visited: &mut HashSet<String>,
) -> Option<String> {
    let current = *path.last()?;
    for name in &current.options.depends_on {
        let Some(next) = by_name.get(name.as_str()).copied() else { continue };
        if next.id == start.id {
            let mut names: Vec<&str> = path.iter().map(|deployment| deployment.display_name()).collect();
            names.push(start.display_name());
            return Some(names.join(" -> "));
        }
        if visited.insert(next.id.clone()) {
            path.push(next);
            if let Some(cycle) = find_cycle(start, by_name, path, visited) {
                return Some(cycle);
            }
            path.pop();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(id: &str, depends_on: &[&str]) -> Deployment {
        serde_json::from_value(json!({"id": id, "name": format!("n{id}"), "options": {"depends_on": depends_on}}))
            .unwrap()
    }

    fn check(deployments: &[Deployment], states: &[(&str, Progress)], parallel: usize, expected: &[&str]) {
        let progress = states.iter().map(|(id, state)| (id.to_string(), *state)).collect();
        let decisions = decide(deployments, &progress, parallel);
        let started: Vec<String> = decisions
            .iter()
            .map(|decision| match decision {
                Decision::Start(id) => format!("start {id}"),
                Decision::Fail { id, .. } => format!("fail {id}"),
            })
            .collect();
        assert_eq!(started, expected, "states {states:?} parallel {parallel}");
    }

    #[test]
    fn sequential_follows_list_order() {
        let list = [deployment("a", &[]), deployment("b", &[]), deployment("c", &[])];
        check(&list, &[], 1, &["start a"]);
        check(&list, &[("a", Progress::Running)], 1, &[]);
        check(&list, &[("a", Progress::Done { failed: true })], 1, &["start b"]);
        check(&list, &[("a", Progress::Waiting)], 1, &["start b"]);
        check(&list, &[("a", Progress::Skipped), ("b", Progress::Done { failed: false })], 1, &["start c"]);
    }

    #[test]
    fn depends_on_reorders_and_parallel_fills_slots() {
        let list = [deployment("a", &["nc"]), deployment("b", &[]), deployment("c", &[])];
        check(&list, &[], 1, &[]);
        check(&list, &[], 2, &["start b", "start c"]);
        check(&list, &[("c", Progress::Done { failed: false })], 3, &["start a", "start b"]);
        check(&list, &[("b", Progress::Running)], 2, &["start c"]);
    }

    #[test]
    fn sequential_waits_for_an_unfinished_dependency_rather_than_overtaking() {
        let list = [deployment("a", &[]), deployment("b", &["na"]), deployment("c", &[])];
        check(&list, &[("a", Progress::Waiting)], 1, &[]);
        check(&list, &[("a", Progress::Waiting)], 2, &["start c"]);
    }

    #[test]
    fn failed_dependency_fails_the_dependent() {
        let list = [deployment("a", &[]), deployment("b", &["na"])];
        check(&list, &[("a", Progress::Done { failed: true })], 1, &["fail b"]);
        let progress = HashMap::from([("a".to_string(), Progress::Done { failed: true })]);
        let Decision::Fail { reason, .. } = &decide(&list, &progress, 1)[0] else { panic!() };
        assert_eq!(reason, "dependency na failed, so this deployment was not run");
    }

    #[test]
    fn unknown_dependency_names_do_not_block() {
        let list = [deployment("a", &["gone"])];
        check(&list, &[], 1, &["start a"]);
    }

    #[test]
    fn cycles_fail_with_the_cycle_named() {
        let list = [deployment("a", &["nb"]), deployment("b", &["na"]), deployment("c", &[])];
        let decisions = decide(&list, &HashMap::new(), 1);
        assert_eq!(decisions.len(), 3);
        assert_eq!(
            decisions[0],
            Decision::Fail { id: "a".into(), reason: "options.depends_on forms a cycle: na -> nb -> na".into() }
        );
        assert!(matches!(&decisions[1], Decision::Fail { id, .. } if id == "b"));
        assert_eq!(decisions[2], Decision::Start("c".into()));
    }
}
