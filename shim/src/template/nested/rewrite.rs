//! An expression of a nested template rewritten into the root's namespace: `get_param` becomes
//! the bound expression (pseudo parameters the nested stack's identity, `resource_facade` the
//! outer resource's definition), and resource names become flattened names or, for a nested
//! resource, its facade's reference id and attributes.

use serde_json::Value;

use super::facade::{Facade, select_path};
use super::level::Level;
use super::{Expander, FACADE_PARAMETER, NestedError, Target};
use crate::template::expr::{Expr, collapse_list, collapse_map};

impl Level<'_> {
    /// The expression in the root's namespace, its size charged to the budget.
    pub(super) fn rewrite(&mut self, ex: &mut Expander, expr: &Expr) -> Result<Expr, NestedError> {
        if self.rewritten {
            return Ok(expr.clone());
        }
        let rewritten = self.rewrite_inner(ex, expr)?;
        ex.charge(&rewritten)?;
        Ok(rewritten)
    }

    fn rewrite_all(&mut self, ex: &mut Expander, exprs: &[Expr]) -> Result<Vec<Expr>, NestedError> {
        exprs.iter().map(|expr| self.rewrite_inner(ex, expr)).collect()
    }

    fn rewrite_box(&mut self, ex: &mut Expander, expr: &Expr) -> Result<Box<Expr>, NestedError> {
        self.rewrite_inner(ex, expr).map(Box::new)
    }

    /// Expression depth is bounded by the YAML parser's, so the recursion is too.
    fn rewrite_inner(&mut self, ex: &mut Expander, expr: &Expr) -> Result<Expr, NestedError> {
        Ok(match expr {
            Expr::Literal(value) => Expr::Literal(value.clone()),
            Expr::GetInput(name) => Expr::GetInput(name.clone()),
            Expr::List(items) => collapse_list(self.rewrite_all(ex, items)?),
            Expr::Map(entries) => {
                let mut rewritten = Vec::with_capacity(entries.len());
                for (key, item) in entries {
                    rewritten.push((key.clone(), self.rewrite_inner(ex, item)?));
                }
                collapse_map(rewritten)
            }
            Expr::GetParam { name, path } => {
                let path = self.rewrite_all(ex, path)?;
                self.parameter(ex, name, path)?
            }
            Expr::GetResource(name) => match self.target(ex, name)? {
                Some(Target::Leaf(flat)) => Expr::GetResource(flat),
                Some(Target::Nested(facade)) => {
                    ex.charge(&facade.id)?;
                    facade.id.clone()
                }
                Some(Target::Failed) => Expr::Literal(Value::Null),
                None => Expr::GetResource(self.flat(name)),
            },
            Expr::GetAttr { resource, attribute, path } => {
                let path = self.rewrite_all(ex, path)?;
                match self.target(ex, resource)? {
                    Some(Target::Leaf(flat)) => Expr::GetAttr { resource: flat, attribute: attribute.clone(), path },
                    Some(Target::Nested(facade)) => Facade::attribute(&facade, ex, attribute, path)?,
                    Some(Target::Failed) => Expr::Literal(Value::Null),
                    None => Expr::GetAttr { resource: self.flat(resource), attribute: attribute.clone(), path },
                }
            }
            Expr::StrReplace { template, params } => {
                Expr::StrReplace { template: self.rewrite_box(ex, template)?, params: self.rewrite_box(ex, params)? }
            }
            Expr::ListJoin { delimiter, lists } => {
                Expr::ListJoin { delimiter: delimiter.clone(), lists: self.rewrite_all(ex, lists)? }
            }
            Expr::Call { function, args } => Expr::Call { function: *function, args: self.rewrite_box(ex, args)? },
            Expr::If { condition, then, otherwise } => Expr::If {
                condition: self.rewrite_box(ex, condition)?,
                then: self.rewrite_box(ex, then)?,
                otherwise: otherwise.as_deref().map(|otherwise| self.rewrite_box(ex, otherwise)).transpose()?,
            },
        })
    }

    fn parameter(&mut self, ex: &mut Expander, name: &str, path: Vec<Expr>) -> Result<Expr, NestedError> {
        let Some(binding) = &self.parameters else {
            return Ok(Expr::GetParam { name: name.to_owned(), path });
        };
        let value = match name {
            "OS::stack_name" => self.identity.name.clone(),
            "OS::stack_id" => self.identity.id.clone(),
            // One project for the whole tree.
            "OS::project_id" => return Ok(Expr::GetParam { name: name.to_owned(), path }),
            _ => match name.strip_prefix(FACADE_PARAMETER) {
                Some(which) => self.facade_value(which)?,
                None => binding.get(name).cloned().ok_or_else(|| NestedError::UnknownParameter {
                    resource: self.describe(),
                    parameter: name.to_owned(),
                })?,
            },
        };
        ex.charge(&value)?;
        Ok(select_path(value, path))
    }
}
