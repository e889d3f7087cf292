//! The evaluation budget: how many bytes one evaluation of a stack may produce in all, whatever
//! it is made of (many small results, a few large ones, copies of a large parameter or
//! attribute). Every result is already capped (`values::MAX_RESULT_BYTES`); without a cap on
//! the sum a template of many capped results made the shim hold, store and serve gigabytes.
//! Values are charged as they are produced, so an evaluation over the budget stops at the
//! first value past it, never after building the rest. Below `evaluate` and `functions`,
//! beside `values`.

use std::cell::Cell;

use serde_json::Value;

use super::EvalError;

/// The bytes one evaluation of a stack may produce: its resources' resolved properties (group
/// members included), the nested stacks' copied definitions and its outputs, together. Four
/// results at the per-result cap, and eight times what the benchmark's graph of 50,000
/// deployments spends (about 8 MB, 160 bytes a deployment: `anneal-bench run graph`); small
/// enough that evaluating, storing and serving it keeps the shim within about 150 MB.
pub const EVALUATION_BUDGET: usize = 64 << 20;

/// What a list item or a map entry costs besides its text: holding it in memory (a `Value` and
/// its allocation) costs about that, so a long list of short strings is not nearly free.
const ITEM_OVERHEAD: usize = 16;

/// A budget being spent. Shared by reference through a `Scope` (hence the `Cell`): one
/// evaluation is many calls of `Expr::evaluate`, and every one of them spends the same budget.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    used: Cell<usize>,
}

impl Budget {
    /// A budget of `limit` bytes, none spent.
    pub fn new(limit: usize) -> Budget {
        Budget::spent(limit, 0)
    }

    /// A budget of `limit` bytes of which `used` were spent already (by an earlier part of the
    /// same evaluation, e.g. the transactions before this one).
    pub fn spent(limit: usize, used: usize) -> Budget {
        Budget { limit, used: Cell::new(used) }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn used(&self) -> usize {
        self.used.get()
    }

    pub fn remaining(&self) -> usize {
        self.limit.saturating_sub(self.used())
    }

    /// Spends `bytes`; refused (and nothing spent) when that would go past the limit.
    pub fn charge(&self, bytes: usize) -> Result<(), EvalError> {
        let used = self.used().saturating_add(bytes);
        if used > self.limit {
            return Err(EvalError::OverBudget { limit: self.limit });
        }
        self.used.set(used);
        Ok(())
    }

    /// Spends what `value` costs (`value_bytes`).
    pub fn charge_value(&self, value: &Value) -> Result<(), EvalError> {
        self.charge(value_bytes(value))
    }

    /// Spends what a list or map of `items` entries costs beyond its items (already charged
    /// when they were produced).
    pub fn charge_items(&self, items: usize) -> Result<(), EvalError> {
        self.charge(items.saturating_mul(ITEM_OVERHEAD).saturating_add(2))
    }
}

/// What a value costs: its JSON text, plus `ITEM_OVERHEAD` per list item and map entry.
/// Depth is bounded by the parsers (YAML) and by the functions that build values.
pub fn value_bytes(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(number) => number.as_str().len(),
        Value::String(text) => text.len().saturating_add(2),
        Value::Array(items) => {
            items.iter().map(|item| value_bytes(item).saturating_add(ITEM_OVERHEAD + 1)).fold(2, usize::saturating_add)
        }
        Value::Object(map) => map
            .iter()
            .map(|(key, item)| value_bytes(item).saturating_add(key.len() + ITEM_OVERHEAD + 4))
            .fold(2, usize::saturating_add),
    }
}

/// The refusal's text: the limit, what it covers, and that it is the shim's own limit.
pub fn over_budget_message(limit: usize) -> String {
    format!(
        "over the evaluation budget: more than {limit} bytes ({} MiB) produced, anneal-shim's limit on what a \
         stack's resources, nested stacks and outputs produce together",
        limit >> 20
    )
}
