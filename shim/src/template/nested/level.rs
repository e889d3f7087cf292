//! One template being expanded (the root, a provider template, or a group's members): what
//! each of its resource names stands for (a flattened leaf name, or the facade of a nested
//! stack), found lazily so that a resource may read a sibling nested stack's outputs whatever
//! the declaration order, and its leaves and outputs in declaration order.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::facade::{Facade, GroupFacts};
use super::{
    Child, Expander, FacadeValues, Inherited, MAX_NESTED_DEPTH, NestedDefinition, NestedError, NestedKind,
    StackIdentity, Target, group, parameters,
};
use crate::template::expr::Expr;
use crate::template::expr::functions::Function;
use crate::template::{Output, Resource, Template};

enum Slot {
    InProgress,
    Done(Target),
}

/// The result of expanding a level.
pub(super) struct Expanded {
    pub leaves: Vec<(String, Resource)>,
    pub outputs: Vec<(String, Output)>,
    pub targets: BTreeMap<String, Target>,
}

pub(super) struct Level<'t> {
    pub(super) template: &'t Template,
    pub(super) path: Vec<String>,
    /// The nested template's parameters bound to expressions; `None` at the root, whose
    /// `get_param` stays as written.
    pub(super) parameters: Option<BTreeMap<String, Expr>>,
    /// A group's members: their expressions are already in the root's namespace.
    pub(super) rewritten: bool,
    pub(super) identity: StackIdentity,
    /// The stack this level's leaves belong to, `<name>/<id>`; `None` at the root.
    pub(super) stack: Option<Expr>,
    pub(super) facade: Option<FacadeValues>,
    /// The provider templates from the root down to this one, to refuse recursion.
    pub(super) chain: Vec<String>,
    pub(super) depth: usize,
    pub(super) inherited: Inherited,
    slots: BTreeMap<String, Slot>,
    leaves: BTreeMap<String, Vec<(String, Resource)>>,
}

impl<'t> Level<'t> {
    pub fn root(template: &'t Template, identity: StackIdentity) -> Level<'t> {
        Level {
            template,
            path: Vec::new(),
            parameters: None,
            rewritten: false,
            identity,
            stack: None,
            facade: None,
            chain: Vec::new(),
            depth: 0,
            inherited: Inherited::default(),
            slots: BTreeMap::new(),
            leaves: BTreeMap::new(),
        }
    }

    /// The level below this one for the nested resource `segment` of `template`.
    pub(super) fn below<'c>(
        &self,
        ex: &Expander,
        template: &'c Template,
        segment: &str,
        inherited: Inherited,
    ) -> Level<'c> {
        let mut path = self.path.clone();
        path.push(segment.to_owned());
        let identity = self.identity.child(segment, &path.join("/"), &ex.root_id);
        Level {
            template,
            path,
            parameters: None,
            rewritten: true,
            stack: Some(identity.path()),
            identity,
            facade: None,
            chain: self.chain.clone(),
            depth: self.depth + 1,
            inherited,
            slots: BTreeMap::new(),
            leaves: BTreeMap::new(),
        }
    }

    /// A resource's name in the flat template.
    pub(super) fn flat(&self, name: &str) -> String {
        if self.path.is_empty() { name.to_owned() } else { format!("{}/{name}", self.path.join("/")) }
    }

    /// The outer resource of this level, for messages (the root is "the template").
    pub(super) fn describe(&self) -> String {
        if self.path.is_empty() { "the template".to_owned() } else { self.path.join("/") }
    }

    pub fn expand(mut self, ex: &mut Expander) -> Result<Expanded, NestedError> {
        let template = self.template;
        for (name, _) in &template.resources {
            self.target(ex, name)?;
        }
        let mut leaves = Vec::new();
        for (name, resource) in &template.resources {
            match self.slots.get(name.as_str()) {
                Some(Slot::Done(Target::Leaf(flat))) => {
                    let flat = flat.clone();
                    ex.count_resource()?;
                    match self.leaf(ex, resource) {
                        Ok(leaf) => leaves.push((flat, leaf)),
                        Err(error) if error.is_fatal() => return Err(error),
                        Err(error) => ex.problems.push(error),
                    }
                }
                Some(Slot::Done(Target::Nested(_))) => leaves.extend(self.leaves.remove(name).unwrap_or_default()),
                _ => {}
            }
        }
        let mut outputs = Vec::new();
        for (name, output) in &template.outputs {
            match self.rewrite(ex, &output.value) {
                Ok(value) => outputs.push((name.clone(), Output { description: output.description.clone(), value })),
                Err(error) if error.is_fatal() => return Err(error),
                Err(error) => ex.problems.push(error),
            }
        }
        let targets = std::mem::take(&mut self.slots)
            .into_iter()
            .filter_map(|(name, slot)| match slot {
                Slot::Done(target) => Some((name, target)),
                Slot::InProgress => None,
            })
            .collect();
        Ok(Expanded { leaves, outputs, targets })
    }

    /// What `name` stands for at this level; `None` when no resource has that name.
    pub(super) fn target(&mut self, ex: &mut Expander, name: &str) -> Result<Option<Target>, NestedError> {
        match self.slots.get(name) {
            Some(Slot::Done(target)) => return Ok(Some(target.clone())),
            Some(Slot::InProgress) => return Err(NestedError::Cycle { resource: self.flat(name) }),
            None => {}
        }
        let template = self.template;
        let Some(resource) = template.resource(name) else { return Ok(None) };
        let target = match &resource.nested {
            None => Target::Leaf(self.flat(name)),
            Some(definition) => {
                self.slots.insert(name.to_owned(), Slot::InProgress);
                match self.nested(ex, name, resource, definition) {
                    Ok((facade, leaves)) => {
                        self.leaves.insert(name.to_owned(), leaves);
                        Target::Nested(Rc::new(facade))
                    }
                    Err(error) if error.is_fatal() => return Err(error),
                    Err(error) => {
                        ex.problems.push(error);
                        Target::Failed
                    }
                }
            }
        };
        self.slots.insert(name.to_owned(), Slot::Done(target.clone()));
        Ok(Some(target))
    }

    fn leaf(&mut self, ex: &mut Expander, resource: &Resource) -> Result<Resource, NestedError> {
        let mut properties = Vec::with_capacity(resource.properties.len());
        for (property, expr) in &resource.properties {
            properties.push((property.clone(), self.rewrite(ex, expr)?));
        }
        let mut depends_on = self.expand_depends(ex, &resource.depends_on)?;
        merge(&mut depends_on, &self.inherited.depends_on);
        let condition = self.condition(ex, resource)?;
        let mut policies = resource.policies.clone();
        if let Some(function) = &resource.policies.deletion_function {
            policies.deletion_function = Some(self.rewrite(ex, function)?);
        }
        let stack = self.stack.clone();
        Ok(Resource {
            kind: resource.kind,
            properties,
            depends_on,
            condition,
            line: resource.line,
            nested: None,
            policies,
            stack,
        })
    }

    /// `depends_on` names as leaf names: a nested resource stands for all of its leaves.
    fn expand_depends(&mut self, ex: &mut Expander, names: &[String]) -> Result<Vec<String>, NestedError> {
        let mut expanded = Vec::new();
        for name in names {
            match self.target(ex, name)? {
                Some(Target::Leaf(flat)) => merge(&mut expanded, &[flat]),
                Some(Target::Nested(facade)) => merge(&mut expanded, &facade.members),
                Some(Target::Failed) => {}
                // Left for `validate` to report, under the name it has in the flat template.
                None => merge(&mut expanded, &[self.flat(name)]),
            }
        }
        Ok(expanded)
    }

    /// The resource's own condition and the outer resources' together.
    fn condition(&mut self, ex: &mut Expander, resource: &Resource) -> Result<Option<Expr>, NestedError> {
        let own = resource.condition.as_ref().map(|condition| self.rewrite(ex, condition)).transpose()?;
        Ok(match (self.inherited.condition.clone(), own) {
            (Some(outer), Some(own)) => {
                Some(Expr::Call { function: Function::And, args: Box::new(Expr::List(vec![outer, own])) })
            }
            (outer, own) => outer.or(own),
        })
    }

    fn nested(
        &mut self,
        ex: &mut Expander,
        name: &str,
        resource: &Resource,
        definition: &NestedDefinition,
    ) -> Result<(Facade, Vec<(String, Resource)>), NestedError> {
        let flat = self.flat(name);
        if self.depth + 1 > MAX_NESTED_DEPTH {
            return Err(NestedError::TooDeep { resource: flat });
        }
        ex.count_resource()?;
        let mut properties = Vec::with_capacity(resource.properties.len());
        for (property, expr) in &resource.properties {
            properties.push((property.clone(), self.rewrite(ex, expr)?));
        }
        // Heat creates the nested stack once everything its properties read exists.
        let mut depends_on = self.expand_depends(ex, &resource.depends_on)?;
        for (_, expr) in &properties {
            let read: Vec<String> = expr.references().into_iter().map(|reference| reference.resource).collect();
            merge(&mut depends_on, &read);
        }
        merge(&mut depends_on, &self.inherited.depends_on);
        let condition = self.condition(ex, resource)?;
        let facade = FacadeValues {
            metadata: self.rewrite(ex, &definition.metadata)?,
            deletion_policy: self.rewrite(ex, &definition.deletion_policy)?,
            update_policy: self.rewrite(ex, &definition.update_policy)?,
        };
        let child = Child {
            flat,
            segment: name.to_owned(),
            properties,
            inherited: Inherited { depends_on, condition },
            facade,
            line: resource.line,
        };
        match &definition.kind {
            NestedKind::Provider(file) => self.provider(ex, child, file),
            NestedKind::Group => self.group(ex, child),
        }
    }

    fn provider(
        &mut self,
        ex: &mut Expander,
        child: Child,
        file: &str,
    ) -> Result<(Facade, Vec<(String, Resource)>), NestedError> {
        if self.chain.iter().any(|used| used == file) {
            let mut chain = self.chain.clone();
            chain.push(file.to_owned());
            return Err(NestedError::Recursion { resource: child.flat, chain });
        }
        let nested = ex.provider_template(&child.flat, file)?;
        let binding = parameters::bind(ex, &child, file, &nested)?;
        let mut level = self.below(ex, &nested, &child.segment, child.inherited.clone());
        level.parameters = Some(binding);
        level.rewritten = false;
        level.facade = Some(child.facade.clone());
        level.chain.push(file.to_owned());
        let stack_id = level.identity.id.clone();
        let expanded = level.expand(ex)?;
        let outputs: BTreeMap<String, Expr> =
            expanded.outputs.into_iter().map(|(name, output)| (name, output.value)).collect();
        // heat.engine.resources.template_resource: the `OS::stack_id` output, if declared.
        let id = outputs.get("OS::stack_id").cloned().unwrap_or(stack_id);
        let members = expanded.leaves.iter().map(|(name, _)| name.clone()).collect();
        let facade = Facade { name: child.flat, id, outputs, inner: expanded.targets, members, group: None };
        Ok((facade, expanded.leaves))
    }

    /// A `resource_facade` value of this level's outer resource.
    pub(super) fn facade_value(&self, which: &str) -> Result<Expr, NestedError> {
        let problem = |problem: &str| NestedError::Facade { resource: self.describe(), problem: problem.to_owned() };
        let Some(facade) = &self.facade else { return Err(problem("only a provider template has a facade")) };
        match which {
            "metadata" => Ok(facade.metadata.clone()),
            "deletion_policy" => Ok(facade.deletion_policy.clone()),
            "update_policy" => Ok(facade.update_policy.clone()),
            _ => Err(problem("expected metadata, deletion_policy or update_policy")),
        }
    }
}

/// Adds the names `more` has that `names` lacks, in order.
pub(super) fn merge(names: &mut Vec<String>, more: &[String]) {
    for name in more {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
}

impl Level<'_> {
    /// A ResourceGroup's members, expanded one level down.
    fn group(&mut self, ex: &mut Expander, child: Child) -> Result<(Facade, Vec<(String, Resource)>), NestedError> {
        let (members, facts): (Template, GroupFacts) = group::members(ex, &child, &self.template.version)?;
        let below = self.below(ex, &members, &child.segment, child.inherited.clone());
        let id = below.identity.id.clone();
        let expanded = below.expand(ex)?;
        let leaves: Vec<String> = expanded.leaves.iter().map(|(name, _)| name.clone()).collect();
        let facade = Facade {
            name: child.flat,
            id,
            outputs: BTreeMap::new(),
            inner: expanded.targets,
            members: leaves,
            group: Some(facts),
        };
        Ok((facade, expanded.leaves))
    }
}
