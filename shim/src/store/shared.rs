//! `Shared`: a JSON value that copies of its row share until one of them changes it. A node
//! row is copied out of the row cache for every change (`Arc::unwrap_or_clone`), and a large
//! group's definition and attributes hold an entry per member (megabytes at 10,000): with
//! them shared, such a copy costs two reference counts instead of a deep copy.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde_json::Value;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shared(Arc<Value>);

impl Shared {
    pub fn new(value: Value) -> Shared {
        Shared(Arc::new(value))
    }

    /// The value, copied only when another row still shares it.
    pub fn into_value(self) -> Value {
        Arc::unwrap_or_clone(self.0)
    }
}

impl Deref for Shared {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.0
    }
}

impl DerefMut for Shared {
    /// Copies the value first when another row shares it.
    fn deref_mut(&mut self) -> &mut Value {
        Arc::make_mut(&mut self.0)
    }
}

impl From<Value> for Shared {
    fn from(value: Value) -> Shared {
        Shared::new(value)
    }
}

impl PartialEq<Value> for Shared {
    fn eq(&self, other: &Value) -> bool {
        *self.0 == *other
    }
}
