//! Plans: what a create or update would do, computed by doing it. The request goes through the
//! same code as the real one (`requests::check`, `forward::create`/`update`), in a transaction
//! that is always rolled back (`Engine::transact_discarded`); then the traversal is carried to
//! its end inside it: every published run is answered as a success reporting the outputs its
//! previous run reported (nothing, for a deployment that never ran), a wait condition in
//! progress is taken as signalled, a group's pause or queued members are taken as due. What
//! was published, in which step and batch, and how each resource changed is the plan. Since no
//! second copy of the rules exists, the plan cannot drift from what the update does.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::context::{self, Context, Publication};
use super::error::EngineError;
use super::node::{self, status};
use super::plan_changes::{changes, snapshot};
use super::traversal::forward;
use super::{requests, signals, sweeper};
use crate::model::{PlannedGroup, PlannedRun, StackPlan, StackRequest};
use crate::store::{Action, NodeRow, NodeState, StackRow, State};
use crate::template::ResourceType;

/// At most this many steps of the simulated traversal per node (each step answers every run
/// published so far, or ends one pause): a bound, never reached by a traversal that ends.
const STEPS_PER_NODE: usize = 4;

/// The plan of `request`: an update of stack `name`, or with `None` a create.
pub fn plan(ctx: &mut Context<'_>, name: Option<&str>, request: StackRequest) -> Result<StackPlan, EngineError> {
    // What each step may release of a large group, as each real transaction may.
    let release = (ctx.release_budget, ctx.release_bytes);
    ctx.refuse_over_budget = true;
    ctx.publications = Some(Vec::new());
    // Rolled back at the end: its thousands of rows need not reach the store.
    ctx.tx.keep_every_row();
    let (stack_name, before, action) = match name {
        Some(name) => {
            let Some(existing) = ctx.tx.stack(name)? else {
                return Err(EngineError::NotFound { what: format!("stack {name}") });
            };
            let request = requests::with_existing(ctx, name, request)?;
            let checked = requests::check(ctx, &request, name, &existing.id)?;
            requests::refuse_immutable_changes(&existing, &checked)?;
            let before = snapshot(ctx.tx.nodes(name)?);
            forward::update(ctx, name, &request, &checked, Action::Update)?;
            (name.to_string(), before, Action::Update)
        }
        None => {
            let name = request
                .name
                .clone()
                .ok_or_else(|| EngineError::Invalid { message: "the stack needs a name".into() })?;
            let id = context::new_uuid();
            let checked = requests::check(ctx, &request, &name, &id)?;
            forward::create(ctx, &name, &id, &request, &checked)?;
            (name, BTreeMap::new(), Action::Create)
        }
    };
    // From here the traversal goes on as signals and the sweeper would carry it.
    ctx.refuse_over_budget = false;
    let (runs, groups) = Simulation::new(&stack_name, release).run(ctx)?;
    let after = ctx.tx.nodes_shared(&stack_name)?;
    let resource_changes = changes(&before, &after, &runs);
    let stack =
        ctx.tx.stack(&stack_name)?.ok_or_else(|| EngineError::NotFound { what: format!("stack {stack_name}") })?;
    let changes = !runs.is_empty() || resource_changes.any();
    Ok(StackPlan {
        stack: stack_name,
        action,
        changes,
        resource_changes,
        runs,
        groups,
        outcome: status(stack.action, stack.state),
        outcome_reason: stack.status_reason,
    })
}

/// The traversal carried to its end.
struct Simulation<'a> {
    stack: &'a str,
    /// `Context::release_budget` and `release_bytes` as a transaction starts with them.
    release: (usize, usize),
    step: u32,
    runs: Vec<PlannedRun>,
    /// Each group's current batch (1-based) and its pause.
    batches: HashMap<String, (u32, f64)>,
    /// The stack's wait conditions and deployment groups (`run` reads them once).
    waits: Vec<String>,
    groups: Vec<String>,
}

impl<'a> Simulation<'a> {
    fn new(stack: &'a str, release: (usize, usize)) -> Simulation<'a> {
        Simulation {
            stack,
            release,
            step: 1,
            runs: Vec::new(),
            batches: HashMap::new(),
            waits: Vec::new(),
            groups: Vec::new(),
        }
    }

    fn run(mut self, ctx: &mut Context<'_>) -> Result<(Vec<PlannedRun>, Vec<PlannedGroup>), EngineError> {
        let nodes = ctx.tx.nodes_shared(self.stack)?;
        let limit = nodes.len().saturating_add(1).saturating_mul(STEPS_PER_NODE);
        // What can wait between steps, read once: the stack's resources stay what the update
        // made them (members come and go, groups and wait conditions do not).
        let of_type = |kinds: &[ResourceType]| -> Vec<String> {
            let kind_of = |node: &&Arc<NodeRow>| node::resource_type(node).is_some_and(|kind| kinds.contains(&kind));
            nodes.iter().filter(kind_of).map(|node| node.name.clone()).collect()
        };
        self.waits = of_type(&[ResourceType::WaitCondition]);
        self.groups = of_type(&[ResourceType::SoftwareDeploymentGroup, ResourceType::StructuredDeploymentGroup]);
        drop(nodes);
        for _ in 0..limit {
            let Some(stack) = ctx.tx.stack(self.stack)? else { break };
            if stack.state != State::InProgress {
                break;
            }
            if !self.answer_published(ctx)? && !self.signal_waits(ctx, &stack)? && !self.end_a_pause(ctx, &stack)? {
                break;
            }
        }
        self.list_left_over(ctx)?;
        let mut groups = Vec::new();
        for (name, (_, pause_secs)) in &self.batches {
            // Every batch the rollout went through, the last ones changing nothing included.
            let batches = ctx.tx.node_shared(self.stack, name)?.map_or(1, |group| group.record.batch.max(1));
            if batches > 1 {
                groups.push(PlannedGroup { group: name.clone(), batches, pause_secs: *pause_secs });
            }
        }
        groups.sort_by(|a, b| a.group.cmp(&b.group));
        Ok((self.runs, groups))
    }

    /// Answers every run published since the last step as a success; false when none was.
    fn answer_published(&mut self, ctx: &mut Context<'_>) -> Result<bool, EngineError> {
        (ctx.release_budget, ctx.release_bytes) = self.release;
        let answered = self.take_published(ctx, true)?;
        if answered {
            self.step += 1;
        }
        Ok(answered)
    }

    /// Lists the runs published in the step that ended the traversal (NO_SIGNAL ones that
    /// completed it, those a failure left running): agents run them too.
    fn list_left_over(&mut self, ctx: &mut Context<'_>) -> Result<(), EngineError> {
        self.take_published(ctx, false).map(|_| ())
    }

    /// Lists every run published since the last look and, with `answer`, answers those waiting
    /// for their signal; whether any was answered.
    fn take_published(&mut self, ctx: &mut Context<'_>, answer: bool) -> Result<bool, EngineError> {
        // Taken, not copied: each is looked at once (a group's entries are thousands).
        let fresh: Vec<Publication> = ctx.publications.as_mut().map(std::mem::take).unwrap_or_default();
        let mut answered = false;
        let stack = self.stack;
        for publication in fresh.iter().filter(|publication| publication.stack == stack) {
            let node = ctx.tx.node(stack, &publication.node)?;
            let Some(node) = node.filter(|node| node.derived_config_id.is_some()) else { continue };
            let run = self.planned_run(ctx, &node, publication)?;
            self.runs.push(run);
            // NO_SIGNAL: complete once published, with no signal to wait for; still a run.
            if answer && node.state == NodeState::InProgress {
                let body = previous_outputs(&node);
                signals::apply_to_node(ctx, node, body)?;
                answered = true;
            }
        }
        Ok(answered)
    }

    fn planned_run(
        &mut self,
        ctx: &mut Context<'_>,
        node: &NodeRow,
        publication: &Publication,
    ) -> Result<PlannedRun, EngineError> {
        let group = node::group_of(node).map(str::to_string);
        let batch = match &group {
            Some(name) => {
                // The group's row, read here, stays with this transaction: the members' many
                // completions count down on it in memory.
                let group = ctx.tx.node_shared(self.stack, name)?;
                let current = group.as_ref().map_or(1, |group| group.record.batch.max(1));
                let pause_secs = group.as_ref().map_or(0.0, |group| group.record.pause_millis as f64 / 1000.0);
                self.batches.insert(name.clone(), (current, pause_secs));
                Some(current)
            }
            None => None,
        };
        Ok(PlannedRun {
            resource: node.name.clone(),
            server: publication.server.clone(),
            action: node.action.as_str().to_string(),
            step: self.step,
            group,
            batch,
            changed: changed_inputs(publication.previous.as_ref(), &publication.entry),
        })
    }

    /// Takes every wait condition in progress as signalled; false when there was none.
    fn signal_waits(&mut self, ctx: &mut Context<'_>, stack: &StackRow) -> Result<bool, EngineError> {
        let mut waiting = Vec::new();
        for name in &self.waits {
            let node = ctx.tx.node(self.stack, name)?;
            waiting
                .extend(node.filter(|node| node.state == NodeState::InProgress && node.generation == stack.generation));
        }
        let any = !waiting.is_empty();
        for wait in waiting {
            let released = node::complete(ctx, stack, wait, "assumed signalled (plan)")?;
            forward::proceed(ctx, stack, released)?;
        }
        if any {
            self.step += 1;
        }
        Ok(any)
    }

    /// Ends the group pause due first (a group's queued members are due at once); false when
    /// no group waits.
    fn end_a_pause(&mut self, ctx: &mut Context<'_>, stack: &StackRow) -> Result<bool, EngineError> {
        let mut next: Option<(u64, std::sync::Arc<NodeRow>)> = None;
        for name in &self.groups {
            let Some(node) = ctx.tx.node_shared(self.stack, name)? else { continue };
            let current = node.generation == stack.generation;
            let due = match (&node.record.pause_until, node.record.queued.is_empty(), node.state) {
                (_, false, NodeState::Init) if current => Some(0),
                (Some(until), true, NodeState::InProgress) if current => Some(*until),
                _ => None,
            };
            if let Some(due) = due.filter(|due| next.as_ref().is_none_or(|(earliest, _)| due < earliest)) {
                next = Some((due, node));
            }
        }
        let Some((due, group)) = next else { return Ok(false) };
        if group.record.queued.is_empty() {
            self.step += 1;
        }
        ctx.now = ctx.now.max(due);
        sweeper::batch_pause_ended(ctx, stack, &group.name)?;
        Ok(true)
    }
}

/// A success signal reporting what the node's previous run reported (its declared outputs and
/// stdout, stderr); nothing for one that never ran.
fn previous_outputs(node: &NodeRow) -> Value {
    let mut body = Map::new();
    if let Some(attributes) = node.attributes.as_object() {
        for (name, value) in attributes.iter().filter(|(_, value)| !value.is_null()) {
            body.insert(name.clone(), value.clone());
        }
    }
    body.insert("deploy_status_code".into(), Value::from(0));
    Value::Object(body)
}

/// The names of the inputs (not Heat's `deploy_*` ones) whose values differ between two entries,
/// and `config` when the config differs.
fn changed_inputs(previous: Option<&Value>, entry: &Value) -> Vec<String> {
    let Some(previous) = previous else { return Vec::new() };
    fn values(entry: &Value) -> BTreeMap<&str, &Value> {
        let inputs = entry.get("inputs").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        inputs
            .iter()
            .filter_map(|input| Some((input.get("name")?.as_str()?, input.get("value")?)))
            .filter(|(name, _)| !name.starts_with("deploy_"))
            .collect()
    }
    let (old, new) = (values(previous), values(entry));
    let mut changed: Vec<String> =
        new.iter().filter(|(name, value)| old.get(*name) != Some(*value)).map(|(name, _)| name.to_string()).collect();
    changed.extend(old.keys().filter(|name| !new.contains_key(*name)).map(|name| name.to_string()));
    changed.sort();
    if previous.get("config") != entry.get("config") {
        changed.insert(0, "config".into());
    }
    changed
}
