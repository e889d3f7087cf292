//! Which deployments may start now: the ordering rules, kept free of I/O so they can be tested
//! as a table. Order is the list order Heat publishes (sorted by name), refined by
//! `options.depends_on` (names of deployments on the same server). With `parallel = 1` the list is
//! walked strictly in order; with more, any deployment whose dependencies are done may start, in
//! list order, until the slots are full.

use std::collections::{HashMap, HashSet};

use anneal_protocol::Deployment;

/// Where one deployment stands, as far as ordering is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
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

/// What to do with a deployment now; `index` is its position in the list given to [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    Start {
        index: usize,
    },
    /// Never run: finish it as a failure with this reason (a dependency failed, a cycle).
    Fail {
        index: usize,
        reason: String,
    },
}

/// The decisions for this instant. `progress[i]` is where `deployments[i]` stands (the two
/// slices are parallel, so a round costs no lookups by id).
pub(crate) fn decide(deployments: &[Deployment], progress: &[Progress], parallel: usize) -> Vec<Decision> {
    debug_assert_eq!(deployments.len(), progress.len());
    // Names and cycles matter only to `depends_on`; most documents have none, and this runs
    // after every finished hook, so it skips them rather than walk the list again.
    let ordered = deployments.iter().any(|deployment| !deployment.options.depends_on.is_empty());
    let by_name = if ordered { names(deployments) } else { HashMap::new() };
    let in_cycle = if ordered { cycle_members(deployments, &by_name) } else { HashMap::new() };
    let mut running = progress.iter().filter(|state| **state == Progress::Running).count();
    let mut decisions = Vec::new();
    for (index, deployment) in deployments.iter().enumerate() {
        if progress[index] != Progress::Pending {
            continue;
        }
        if let Some(cycle) = in_cycle.get(&index) {
            let reason = format!("options.depends_on forms a cycle: {cycle}");
            decisions.push(Decision::Fail { index, reason });
            continue;
        }
        match dependencies(deployment, &by_name, progress) {
            Dependencies::Failed(name) => {
                let reason = format!("dependency {name} failed, so this deployment was not run");
                decisions.push(Decision::Fail { index, reason });
            }
            Dependencies::Unfinished if parallel == 1 => break,
            Dependencies::Unfinished => continue,
            Dependencies::Done if running < parallel => {
                running += 1;
                decisions.push(Decision::Start { index });
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

fn dependencies(deployment: &Deployment, by_name: &HashMap<&str, usize>, progress: &[Progress]) -> Dependencies {
    let mut unfinished = false;
    for name in &deployment.options.depends_on {
        // A name that is not in this document refers to something already gone: Heat only
        // publishes a deployment once its own dependencies were created.
        let Some(&dependency) = by_name.get(name.as_str()) else { continue };
        match progress[dependency] {
            Progress::Done { failed: true } => return Dependencies::Failed(name.clone()),
            Progress::Done { failed: false } | Progress::Skipped => {}
            Progress::Pending | Progress::Waiting | Progress::Running => unfinished = true,
        }
    }
    if unfinished { Dependencies::Unfinished } else { Dependencies::Done }
}

/// The index of each name (the first deployment that has it).
fn names(deployments: &[Deployment]) -> HashMap<&str, usize> {
    let mut by_name = HashMap::new();
    for (index, deployment) in deployments.iter().enumerate() {
        if let Some(name) = &deployment.name {
            by_name.entry(name.as_str()).or_insert(index);
        }
    }
    by_name
}

/// Indices of deployments on a `depends_on` cycle, each with the cycle written out (`a -> b -> a`).
fn cycle_members(deployments: &[Deployment], by_name: &HashMap<&str, usize>) -> HashMap<usize, String> {
    let mut members = HashMap::new();
    for (start, deployment) in deployments.iter().enumerate().filter(|(_, deployment)| deployment.name.is_some()) {
        if deployment.options.depends_on.is_empty() {
            continue;
        }
        let mut path = vec![start];
        let mut visited = HashSet::new();
        if let Some(cycle) = find_cycle(deployments, by_name, &mut path, &mut visited) {
            members.insert(start, cycle);
        }
    }
    members
}

/// Depth-first search from `path`'s last element for a way back to `path[0]`.
fn find_cycle(
    deployments: &[Deployment],
    by_name: &HashMap<&str, usize>,
    path: &mut Vec<usize>,
    visited: &mut HashSet<usize>,
) -> Option<String> {
    let (start, current) = (*path.first()?, *path.last()?);
    for name in &deployments[current].options.depends_on {
        let Some(&next) = by_name.get(name.as_str()) else { continue };
        if deployments[next].id == deployments[start].id {
            let mut names: Vec<&str> = path.iter().map(|&index| deployments[index].display_name()).collect();
            names.push(deployments[start].display_name());
            return Some(names.join(" -> "));
        }
        if visited.insert(next) {
            path.push(next);
            if let Some(cycle) = find_cycle(deployments, by_name, path, visited) {
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

    /// The progress of each deployment: as listed in `states` by id, otherwise pending.
    fn progress(deployments: &[Deployment], states: &[(&str, Progress)]) -> Vec<Progress> {
        let of = |id: &str| states.iter().find(|(known, _)| *known == id).map(|(_, state)| *state);
        deployments.iter().map(|deployment| of(&deployment.id).unwrap_or(Progress::Pending)).collect()
    }

    fn check(deployments: &[Deployment], states: &[(&str, Progress)], parallel: usize, expected: &[&str]) {
        let decisions = decide(deployments, &progress(deployments, states), parallel);
        let started: Vec<String> = decisions
            .iter()
            .map(|decision| match decision {
                Decision::Start { index } => format!("start {}", deployments[*index].id),
                Decision::Fail { index, .. } => format!("fail {}", deployments[*index].id),
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
        let progress = progress(&list, &[("a", Progress::Done { failed: true })]);
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
        let decisions = decide(&list, &progress(&list, &[]), 1);
        assert_eq!(decisions.len(), 3);
        assert_eq!(
            decisions[0],
            Decision::Fail { index: 0, reason: "options.depends_on forms a cycle: na -> nb -> na".into() }
        );
        assert!(matches!(&decisions[1], Decision::Fail { index: 1, .. }));
        assert_eq!(decisions[2], Decision::Start { index: 2 });
    }
}
