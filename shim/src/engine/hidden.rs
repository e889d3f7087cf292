//! Which of a stack's values are hidden: computed, through any function, from a hidden
//! parameter (`Expr::reads_hidden`: a `get_param` of one, a value the expansion inlined from
//! one, a nested template's `hidden` parameter) or from an attribute or reference id of a
//! resource whose attributes are hidden (a config or OS::Heat::Value computed from one, and
//! every OS::Heat::RandomString, whose value is a credential), transitively. The web view masks
//! them and a failure reason does not quote them (docs/http-api.md, "The web view's routes").
//! A static analysis of the stored definitions: it may mask too much, never too little, and
//! reads only the resources a question leads to, each once per `Hidden`.

use std::collections::{BTreeSet, HashMap, HashSet};

use anneal_protocol::deployment::DERIVED_INPUTS;
use serde_json::Value;

use crate::store::{NodeRow, StackRow, StoreError, Tx};
use crate::template::{Expr, ResourceType};

/// A failure reason in place of an evaluation error of a hidden value, which may quote it.
pub const WITHHELD: &str = "cannot be evaluated (the reason is not shown: it may quote a value derived from a \
                             hidden parameter or a random string)";

/// OS::Heat::Value's refusal of a hidden value of type `kind`, in place of the one that quotes it.
pub fn refused_as(kind: &str) -> String {
    format!("a value derived from a hidden parameter or a random string is not a valid {kind}")
}

/// Answers for one stack, keeping what it decided about each resource.
pub struct Hidden<'a> {
    tx: &'a mut dyn Tx,
    stack: &'a StackRow,
    /// Whether a resource's attributes (and reference id) are hidden, once decided.
    decided: HashMap<String, bool>,
}

/// What one expression, or one resource's expressions, read.
#[derive(Debug, Default)]
struct Reads {
    /// A hidden parameter (or what could not be read: masked rather than shown).
    hidden_parameter: bool,
    resources: Vec<String>,
}

/// Which inputs of a deployment are hidden, by name (`hides`).
#[derive(Debug, Default)]
pub struct HiddenInputs {
    /// `input_values` is one hidden expression (not a map of them): every input is hidden.
    all: bool,
    /// Inputs whose `input_values` entry is hidden.
    named: BTreeSet<String>,
    /// The names `input_values` gives; the others take their config's declared default.
    given: BTreeSet<String>,
    /// The config's declared inputs (their defaults) are hidden.
    defaults: bool,
}

/// What the web view masks of one resource.
#[derive(Debug, Default)]
pub struct NodeMasks {
    /// Its attributes are hidden (`Hidden::attributes`).
    pub attributes: bool,
    /// Its published inputs that are hidden (a deployment's).
    pub inputs: HiddenInputs,
}

impl HiddenInputs {
    /// `deploy_signal_id` is a capability URL, always hidden; the other inputs the engine
    /// derives (`DERIVED_INPUTS`) never come from a default.
    pub fn hides(&self, name: &str) -> bool {
        name == "deploy_signal_id"
            || self.all
            || self.named.contains(name)
            || (self.defaults && !self.given.contains(name) && !DERIVED_INPUTS.contains(&name))
    }
}

impl<'a> Hidden<'a> {
    pub fn new(tx: &'a mut dyn Tx, stack: &'a StackRow) -> Self {
        Hidden { tx, stack, decided: HashMap::new() }
    }

    /// What the web view masks of `node`.
    pub fn node(&mut self, node: &NodeRow) -> Result<NodeMasks, StoreError> {
        let deployment = ResourceType::parse(&node.resource_type).is_some_and(|kind| kind.is_deployment());
        let inputs = if deployment { self.inputs(node)? } else { HiddenInputs::default() };
        Ok(NodeMasks { attributes: self.attributes(&node.name)?, inputs })
    }

    /// Whether a stored expression (a property as the definition holds it) is hidden.
    pub fn stored(&mut self, stored: &Value) -> Result<bool, StoreError> {
        let reads = self.reads_stored(stored);
        self.any_hidden(reads)
    }

    pub fn expression(&mut self, expression: &Expr) -> Result<bool, StoreError> {
        let reads = self.reads(expression);
        self.any_hidden(reads)
    }

    /// Whether the attributes of resource `name` (and its reference id) are hidden: a
    /// RandomString's always; a config's or OS::Heat::Value's when one of its properties is
    /// hidden (its attributes are computed from them); never those of the other types, which
    /// hold what servers signalled or registered. Resources are followed with a stack of their
    /// own, not by recursion, so that a long chain cannot exhaust the thread's stack.
    pub fn attributes(&mut self, name: &str) -> Result<bool, StoreError> {
        let mut pending = vec![name.to_owned()];
        let mut expanded = HashSet::new();
        let mut reads_of: HashMap<String, Reads> = HashMap::new();
        while let Some(current) = pending.last().cloned() {
            if self.decided.contains_key(&current) {
                pending.pop();
                continue;
            }
            if !reads_of.contains_key(&current) {
                let reads = self.resource_reads(&current)?;
                reads_of.insert(current.clone(), reads);
            }
            let reads = &reads_of[&current];
            let undecided: Vec<String> =
                reads.resources.iter().filter(|read| !self.decided.contains_key(*read)).cloned().collect();
            // A resource met again before its reads were decided is on a cycle (which
            // validation refuses): its undecided reads count as hidden.
            if reads.hidden_parameter || undecided.is_empty() || !expanded.insert(current.clone()) {
                let hidden = reads.hidden_parameter
                    || reads.resources.iter().any(|read| self.decided.get(read).copied().unwrap_or(true));
                self.decided.insert(current, hidden);
                pending.pop();
            } else {
                pending.extend(undecided);
            }
        }
        Ok(self.decided[name])
    }

    /// Which inputs of deployment `node` (or a group's member) are hidden: by its
    /// `input_values` and its config's declared inputs.
    pub fn inputs(&mut self, node: &NodeRow) -> Result<HiddenInputs, StoreError> {
        let properties = node.definition.get("properties");
        let property = |name: &str| properties.and_then(|properties| properties.get(name));
        let mut inputs = HiddenInputs::default();
        match property("input_values").map(Expr::from_json) {
            None => {}
            Some(Ok(Expr::Literal(Value::Object(values)))) => inputs.given.extend(values.keys().cloned()),
            Some(Ok(Expr::Map(entries))) => {
                for (name, expression) in entries {
                    if self.expression(&expression)? {
                        inputs.named.insert(name.clone());
                    }
                    inputs.given.insert(name);
                }
            }
            Some(Ok(expression)) => inputs.all = self.expression(&expression)?,
            Some(Err(_)) => inputs.all = true,
        }
        inputs.defaults = match property("config").map(Expr::from_json) {
            Some(Ok(Expr::GetResource(config))) => self.declared_inputs(&config)?,
            Some(Ok(expression)) => self.expression(&expression)?,
            Some(Err(_)) => true,
            None => false,
        };
        Ok(inputs)
    }

    /// Whether the `inputs` property of config `name` (its declared inputs and defaults) is
    /// hidden.
    fn declared_inputs(&mut self, name: &str) -> Result<bool, StoreError> {
        let Some(config) = self.tx.node_shared(&self.stack.name, name)? else { return Ok(false) };
        match config.definition.get("properties").and_then(|properties| properties.get("inputs")) {
            Some(stored) => self.stored(stored),
            None => Ok(false),
        }
    }

    fn any_hidden(&mut self, reads: Reads) -> Result<bool, StoreError> {
        if reads.hidden_parameter {
            return Ok(true);
        }
        for resource in &reads.resources {
            if self.attributes(resource)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// What resource `name`'s attributes are computed from.
    fn resource_reads(&mut self, name: &str) -> Result<Reads, StoreError> {
        let Some(node) = self.tx.node_shared(&self.stack.name, name)? else { return Ok(Reads::default()) };
        let computed = match ResourceType::parse(&node.resource_type) {
            Some(ResourceType::RandomString) => return Ok(Reads { hidden_parameter: true, resources: Vec::new() }),
            Some(kind) => kind.is_config() || kind == ResourceType::Value,
            None => false,
        };
        let mut reads = Reads::default();
        let Some(properties) = node.definition.get("properties").and_then(Value::as_object).filter(|_| computed) else {
            return Ok(reads);
        };
        for stored in properties.values() {
            let Reads { hidden_parameter, resources } = self.reads_stored(stored);
            reads.hidden_parameter |= hidden_parameter;
            for resource in resources {
                if !reads.resources.contains(&resource) {
                    reads.resources.push(resource);
                }
            }
        }
        Ok(reads)
    }

    fn reads_stored(&self, stored: &Value) -> Reads {
        match Expr::from_json(stored) {
            Ok(expression) => self.reads(&expression),
            Err(_) => Reads { hidden_parameter: true, resources: Vec::new() },
        }
    }

    fn reads(&self, expression: &Expr) -> Reads {
        let hidden = &self.stack.hidden_parameters;
        Reads {
            hidden_parameter: expression.reads_hidden(&|name| hidden.iter().any(|hidden| hidden == name)),
            resources: expression.references().into_iter().map(|reference| reference.resource).collect(),
        }
    }
}
