//! The budget a YAML reader charges for the copies its anchors and aliases make, shared by the
//! shim's template reader and the hooks' `safe_load`. Both build a tree in which an alias is a
//! deep copy of its anchor's node, so one alias of a few bytes can ask for as much memory as
//! the whole anchored text (a 500 KB string aliased 100,000 times asks for 50 GB). Every copy
//! is charged by the bytes it adds, before it is made, against a budget that grows with the YAML
//! text read, so what a document can expand to is bounded by what was sent. Only arithmetic:
//! each reader measures its own nodes with `scalar_bytes` and `NODE_BYTES`.

/// What a node costs besides its text (about what it takes in memory): a collection costs this,
/// a scalar (a mapping key is one) this plus its length.
pub const NODE_BYTES: usize = 32;
/// Copies any document may make whatever its size, so a short one can still alias a few lines.
pub const FLOOR_BYTES: usize = 4 * 1024;
/// Copies a document may make per byte of its own text.
pub const BYTES_PER_TEXT_BYTE: usize = 4;

/// A copy that would take the document's anchors and aliases over their budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "aliases expand to more than {limit} bytes (anchors and aliases may copy {FLOOR_BYTES} bytes plus {BYTES_PER_TEXT_BYTE} bytes per byte of YAML text)"
)]
pub struct AliasBudgetExceeded {
    pub limit: usize,
}

/// What is left of one budget: a document's, or one shared by several texts read for one
/// purpose (the same text read twice then gets no second budget).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasBudget {
    limit: usize,
    spent: usize,
}

impl AliasBudget {
    /// The budget for `text_bytes` bytes of YAML text.
    pub fn for_text(text_bytes: usize) -> AliasBudget {
        let limit = FLOOR_BYTES.saturating_add(text_bytes.saturating_mul(BYTES_PER_TEXT_BYTE));
        AliasBudget { limit, spent: 0 }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Takes `bytes` from the budget, or refuses (taking nothing) when they are more than is left:
    /// call it before making the copy.
    pub fn charge(&mut self, bytes: usize) -> Result<(), AliasBudgetExceeded> {
        let spent = self.spent.saturating_add(bytes);
        if spent > self.limit {
            return Err(AliasBudgetExceeded { limit: self.limit });
        }
        self.spent = spent;
        Ok(())
    }
}

/// What a scalar (or a mapping key) of `text_bytes` bytes costs.
pub fn scalar_bytes(text_bytes: usize) -> usize {
    NODE_BYTES.saturating_add(text_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_grows_with_the_text_and_refuses_what_is_over_it() {
        let mut budget = AliasBudget::for_text(1000);
        assert_eq!(budget.limit(), 4096 + 4000);
        assert_eq!(budget.charge(8000), Ok(()));
        assert_eq!(budget.charge(97), Err(AliasBudgetExceeded { limit: 8096 }));
        // A refused charge takes nothing: what was left is still there.
        assert_eq!(budget.charge(96), Ok(()));
        assert_eq!(budget.charge(1), Err(AliasBudgetExceeded { limit: 8096 }));
        assert_eq!(AliasBudget::for_text(usize::MAX).limit(), usize::MAX);
        assert!(AliasBudget::for_text(0).charge(usize::MAX).is_err());
        assert_eq!(scalar_bytes(10), 42);
    }
}
