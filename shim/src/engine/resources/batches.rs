//! Which members of a deployment group run in which batch, as Heat's SoftwareDeploymentGroup
//! decides it (pure: no store). `batch_create` takes the members in the order of `servers`,
//! `max_batch_size` at a time. `rolling_update` follows ResourceGroup._get_batches (the
//! capacity and number of new definitions of each step, rolling_update.next_batch with
//! `min_in_service` 0) and, per step, _assemble_for_rolling_update with
//! scaling.template.member_definitions: members ordered by priority (highest index in
//! `servers` first), unchanged members take no slot, new members are created in the first steps
//! and count in the batch size. A step may change nothing; it is still a batch (Heat pauses
//! after it too).
//!
//! One difference, on purpose: members that leave `servers` are removed in the first batch and
//! the steps are computed over the members that stay. Heat computes them over every member, and
//! when members leave while others join in the same update it keeps the leaving ones (updated
//! with no server) and never creates the joining ones; where no member both leaves and joins,
//! the two give the same batches.

use std::collections::{HashMap, HashSet};

/// A member of the group after the update: its key in `servers`, whether it exists already,
/// and whether its definition changes (always true for a new one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub key: String,
    pub exists: bool,
    pub changed: bool,
}

/// `batch_create`: `keys` in order, at most `size` per batch.
pub fn create_batches(keys: &[String], size: u64) -> Vec<Vec<String>> {
    let size = usize::try_from(size.max(1)).unwrap_or(usize::MAX);
    keys.chunks(size).map(<[String]>::to_vec).collect()
}

/// `rolling_update`: the members that run (are created or change) in each batch, in order.
/// Members that do not change are in no batch.
pub fn rolling_batches(targets: &[Target], size: u64) -> Vec<Vec<String>> {
    let target_capacity = targets.len() as i64;
    // The group's members, in the order Heat lists them, and whether each is up to date.
    let mut members: Vec<(String, bool)> =
        targets.iter().filter(|target| target.exists).map(|target| (target.key.clone(), !target.changed)).collect();
    let mut batches = Vec::new();
    for (capacity, new_definitions) in steps(target_capacity, members.len() as i64, size as i64) {
        let names: Vec<&str> = targets.iter().take(capacity as usize).map(|target| target.key.as_str()).collect();
        // A map, not a search per comparison: a group of 10,000 members sorts in milliseconds.
        let priorities: HashMap<&str, i64> =
            names.iter().enumerate().map(|(index, name)| (*name, target_capacity - index as i64)).collect();
        let priority = |key: &str| priorities.get(key).copied().unwrap_or(0);
        let mut ordered = members.clone();
        ordered.sort_by_key(|(key, _)| priority(key));
        let kept_count = ordered.len().min(capacity as usize);
        let mut kept = ordered.split_off(ordered.len() - kept_count);
        let creations = capacity - kept.len() as i64;
        let mut replacements = new_definitions - creations;
        let mut batch = Vec::new();
        for (key, up_to_date) in &mut kept {
            if !*up_to_date && replacements > 0 {
                replacements -= 1;
                *up_to_date = true;
                batch.push(key.clone());
            }
        }
        let existing: HashSet<&str> = members.iter().map(|(key, _)| key.as_str()).collect();
        let created: Vec<String> = names
            .iter()
            .filter(|name| !existing.contains(*name))
            .take(creations.max(0) as usize)
            .map(|name| name.to_string())
            .collect();
        batch.extend(created.iter().cloned());
        kept.extend(created.into_iter().map(|key| (key, true)));
        members = kept;
        batches.push(batch);
    }
    batches
}

/// A rolling update that takes over from an unfinished one (an update during a rollout, which
/// Heat has no answer for): the members whose definition changes, `size` at a time (new members
/// first, then the highest index first, as Heat orders them), every batch after a pause.
/// `running` members still run a run of the earlier update: they count against the first
/// batch. With `pause_first` (the earlier rollout was pausing) the first batch changes nothing,
/// so what is left of the pause comes first. Members that do not change are in no batch; no
/// batch after the first is empty.
pub fn resumed_batches(targets: &[Target], running: usize, size: u64, pause_first: bool) -> Vec<Vec<String>> {
    let size = usize::try_from(size.max(1)).unwrap_or(usize::MAX);
    let created = targets.iter().filter(|target| !target.exists);
    let updated = targets.iter().rev().filter(|target| target.exists && target.changed);
    let ordered: Vec<String> = created.chain(updated).map(|target| target.key.clone()).collect();
    let room = if pause_first { 0 } else { size.saturating_sub(running) };
    let (first, rest) = ordered.split_at(room.min(ordered.len()));
    let mut batches = vec![first.to_vec()];
    batches.extend(rest.chunks(size).map(<[String]>::to_vec));
    batches
}

/// ResourceGroup._get_batches with `min_in_service` 0: each step's (capacity, number of new
/// definitions). Bounded: every step brings at least one member up to date or resizes.
fn steps(target: i64, mut current: i64, size: i64) -> Vec<(i64, i64)> {
    let size = size.max(1);
    let mut updated = 0;
    let mut steps = Vec::new();
    let limit = target + current + 2;
    while !(updated >= current && current == target) && (steps.len() as i64) < limit {
        let batch = size.min((target - updated).max(0));
        let capacity = batch + current.min(target - batch).max(0);
        steps.push((capacity, batch));
        updated += batch - (capacity - current.max(target)).max(0);
        current = capacity;
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(spec: &[(&str, bool, bool)]) -> Vec<Target> {
        spec.iter()
            .map(|(key, exists, changed)| Target { key: key.to_string(), exists: *exists, changed: *changed })
            .collect()
    }

    #[test]
    fn every_member_changing_goes_highest_index_first() {
        let plan = rolling_batches(&targets(&[("a", true, true), ("b", true, true), ("c", true, true)]), 1);
        assert_eq!(plan, vec![vec!["c"], vec!["b"], vec!["a"]]);
        let plan = rolling_batches(&targets(&[("a", true, true), ("b", true, true), ("c", true, true)]), 2);
        assert_eq!(plan, vec![vec!["c", "b"], vec!["a"]]);
    }

    #[test]
    fn new_members_come_first_and_a_step_may_change_nothing() {
        let plan = rolling_batches(
            &targets(&[("a", true, true), ("b", true, false), ("c", false, true), ("d", false, true)]),
            1,
        );
        let empty: Vec<String> = Vec::new();
        assert_eq!(plan, vec![vec!["c".to_string()], vec!["d".to_string()], vec!["a".to_string()], empty]);
    }

    #[test]
    fn unchanged_members_take_no_slot() {
        let plan = rolling_batches(&targets(&[("a", true, false), ("b", true, true), ("c", true, false)]), 1);
        let empty: Vec<String> = Vec::new();
        assert_eq!(plan, vec![vec!["b".to_string()], empty.clone(), empty.clone()], "three steps, as Heat counts them");
        assert_eq!(rolling_batches(&targets(&[("a", true, false)]), 1), vec![empty]);
    }

    #[test]
    fn a_resumed_rollout_counts_running_members_and_keeps_the_pause() {
        let spec = [("a", true, true), ("b", true, true), ("c", true, false), ("d", false, true)];
        // c is done; d is new (first), then b, a; one member running takes the first slot of two.
        assert_eq!(resumed_batches(&targets(&spec), 1, 2, false), vec![vec!["d"], vec!["b", "a"]]);
        assert_eq!(resumed_batches(&targets(&spec), 0, 1, false), vec![vec!["d"], vec!["b"], vec!["a"]]);
        // Pausing: the first batch changes nothing.
        let empty: Vec<String> = Vec::new();
        assert_eq!(
            resumed_batches(&targets(&spec), 0, 2, true),
            vec![empty.clone(), vec!["d".into(), "b".into()], vec!["a".into()]]
        );
        // A batch of two running fills the first batch.
        assert_eq!(
            resumed_batches(&targets(&spec), 2, 2, false),
            vec![empty, vec!["d".into(), "b".into()], vec!["a".into()]]
        );
        let done = [("a", true, false)];
        assert_eq!(resumed_batches(&targets(&done), 0, 1, true), vec![Vec::<String>::new()]);
    }

    #[test]
    fn create_batches_follow_the_servers_order() {
        let keys: Vec<String> = ["a", "b", "c", "d", "e"].iter().map(|key| key.to_string()).collect();
        assert_eq!(create_batches(&keys, 2), vec![vec!["a", "b"], vec!["c", "d"], vec!["e"]]);
        assert_eq!(create_batches(&keys, 9).len(), 1);
    }
}
