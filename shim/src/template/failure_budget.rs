//! A deployment group's failure budget, an anneal extension (Heat's schema has no such key; the
//! tolerated failures of TripleO's `<Role>MaxFailPercentage`, SSM's MaxErrors and Ansible's
//! `max_fail_percentage`). It is written in the resource's `metadata`, which Heat keeps without
//! reading, so a template that carries one still runs on Heat (which tolerates nothing):
//!
//! ```yaml
//! metadata:
//!   anneal:
//!     failure_budget: {max_failures: 2, max_failure_percentage: 10}
//! ```
//!
//! Within `metadata.anneal` every key is checked: a misspelt one is refused, naming it. A group
//! without a budget behaves as Heat's: one failed member fails it.

use serde_json::{Value, json};

use super::ResourceType;
use super::yaml::{Body, Node};

/// How many members of a group may fail before the group does. Either bound may be absent; a
/// failure that passes either crosses the budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailureBudget {
    pub max_failures: Option<u64>,
    /// Of the group's members, in percent (0 to 100).
    pub max_failure_percentage: Option<f64>,
}

impl FailureBudget {
    /// Whether `failed` members out of `members` are within the budget.
    pub fn tolerates(self, failed: u64, members: u64) -> bool {
        let by_count = self.max_failures.is_none_or(|max| failed <= max);
        let by_share =
            self.max_failure_percentage.is_none_or(|max| (failed as f64) * 100.0 <= max * (members as f64) + 1e-9);
        by_count && by_share
    }

    /// How the budget reads in messages: `max_failures 2, max_failure_percentage 10`.
    pub fn describe(self) -> String {
        let count = self.max_failures.map(|max| format!("max_failures {max}"));
        let share = self.max_failure_percentage.map(|max| format!("max_failure_percentage {max}"));
        [count, share].into_iter().flatten().collect::<Vec<_>>().join(", ")
    }

    pub fn to_json(self) -> Value {
        json!({"max_failures": self.max_failures, "max_failure_percentage": self.max_failure_percentage})
    }

    pub fn from_json(value: &Value) -> Option<FailureBudget> {
        let budget = FailureBudget {
            max_failures: value.get("max_failures").and_then(Value::as_u64),
            max_failure_percentage: value.get("max_failure_percentage").and_then(Value::as_f64),
        };
        (budget.max_failures.is_some() || budget.max_failure_percentage.is_some()).then_some(budget)
    }
}

/// Reads `metadata.anneal` of resource `name` of type `kind` (`None`: a provider template or
/// ResourceGroup); every other key of `metadata` is Heat's business and left alone.
pub fn read(
    name: &str,
    kind: Option<ResourceType>,
    metadata: &Node,
    problems: &mut Vec<String>,
) -> Option<FailureBudget> {
    let Body::Mapping(entries) = &metadata.body else { return None };
    let anneal = entries.iter().find(|entry| entry.key == "anneal")?;
    let refuse = |problems: &mut Vec<String>, what: String, line: usize| {
        problems.push(format!("resource {name}: metadata.anneal: {what} (line {line})"));
    };
    let Body::Mapping(extensions) = &anneal.value.body else {
        refuse(problems, "must be a mapping".into(), anneal.line);
        return None;
    };
    let mut budget = None;
    for extension in extensions {
        match extension.key.as_str() {
            "failure_budget" => {
                let prefix = |what: &str| format!("resource {name}: metadata.anneal: failure_budget: {what}");
                budget = parse_budget(&extension.value, problems, &prefix);
            }
            other => refuse(problems, format!("unknown key \"{other}\" (known: failure_budget)"), extension.line),
        }
    }
    let (budget, line) = budget?;
    let groups = matches!(kind, Some(ResourceType::SoftwareDeploymentGroup | ResourceType::StructuredDeploymentGroup));
    if !groups {
        let what = "failure_budget: only an OS::Heat::SoftwareDeploymentGroup or StructuredDeploymentGroup has one";
        refuse(problems, what.into(), line);
        return None;
    }
    Some(budget)
}

/// `failure_budget`'s two keys; the budget and the line it starts on.
fn parse_budget(
    node: &Node,
    problems: &mut Vec<String>,
    prefix: &dyn Fn(&str) -> String,
) -> Option<(FailureBudget, usize)> {
    let mut refuse = |what: String, line: usize| problems.push(format!("{} (line {line})", prefix(&what)));
    let Body::Mapping(entries) = &node.body else {
        refuse("must be a mapping of max_failures and max_failure_percentage".into(), node.line);
        return None;
    };
    let mut budget = FailureBudget { max_failures: None, max_failure_percentage: None };
    let mut valid = true;
    for entry in entries {
        let value = match &entry.value.body {
            Body::Scalar(value) => value,
            _ => &Value::Null,
        };
        match entry.key.as_str() {
            "max_failures" => match value.as_u64() {
                Some(count) => budget.max_failures = Some(count),
                None => {
                    refuse(
                        format!("max_failures must be a whole number of members, 0 or more, not {value}"),
                        entry.line,
                    );
                    valid = false;
                }
            },
            "max_failure_percentage" => match value.as_f64().filter(|share| (0.0..=100.0).contains(share)) {
                Some(share) => budget.max_failure_percentage = Some(share),
                None => {
                    refuse(format!("max_failure_percentage must be a number from 0 to 100, not {value}"), entry.line);
                    valid = false;
                }
            },
            other => {
                let known = "known: max_failures, max_failure_percentage";
                refuse(format!("unknown key \"{other}\" ({known})"), entry.line);
                valid = false;
            }
        }
    }
    if valid && budget.max_failures.is_none() && budget.max_failure_percentage.is_none() {
        refuse("give max_failures, max_failure_percentage or both".into(), node.line);
        valid = false;
    }
    valid.then_some((budget, node.line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_bound_crossed_crosses_the_budget() {
        let both = FailureBudget { max_failures: Some(2), max_failure_percentage: Some(10.0) };
        assert!(both.tolerates(2, 100));
        assert!(!both.tolerates(3, 100), "the count");
        assert!(!both.tolerates(2, 10), "20 % of 10");
        assert!(both.tolerates(1, 10), "10 % of 10 is within");
        let share = FailureBudget { max_failures: None, max_failure_percentage: Some(10.0) };
        assert!(share.tolerates(100, 1000) && !share.tolerates(101, 1000));
        let none = FailureBudget { max_failures: Some(0), max_failure_percentage: None };
        assert!(none.tolerates(0, 5) && !none.tolerates(1, 5));
        assert_eq!(FailureBudget::from_json(&both.to_json()), Some(both));
        assert_eq!(both.describe(), "max_failures 2, max_failure_percentage 10");
    }
}
