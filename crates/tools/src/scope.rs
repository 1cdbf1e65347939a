//! [`RunScope`]: what the tool calls of one run of the caller share (an agent's run), one
//! value per type — a tool keeps there what must last from one of its calls to the next within
//! the run and no longer (the skills activated so far, say), without the runtime knowing what.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The state the tool calls of one run share: at most one value of each type, made on first
/// use. Cheap to share behind the `Arc` the caller hands to every call
/// ([`crate::CallOptions::scope`], [`crate::CallContext::scope`]).
#[derive(Default)]
pub struct RunScope {
    values: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for RunScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self
            .values
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("RunScope").field("values", &n).finish()
    }
}

impl RunScope {
    /// A scope with nothing in it yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The run's value of type `T`, made with `T::default()` on first use.
    pub fn get_or_default<T: Any + Send + Sync + Default>(&self) -> Arc<T> {
        let mut values = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        let value = values
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()));
        match Arc::clone(value).downcast::<T>() {
            Ok(value) => value,
            // The map is keyed by the type id, so the value is a `T`.
            Err(_) => Arc::new(T::default()),
        }
    }

    /// The run's value of type `T`, if a call made one.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let values = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        values
            .get(&TypeId::of::<T>())
            .and_then(|v| Arc::clone(v).downcast::<T>().ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn one_value_per_type_shared_by_every_call() {
        let scope = RunScope::new();
        assert!(scope.get::<AtomicU32>().is_none());
        scope
            .get_or_default::<AtomicU32>()
            .fetch_add(2, Ordering::SeqCst);
        scope
            .get_or_default::<AtomicU32>()
            .fetch_add(3, Ordering::SeqCst);
        assert_eq!(scope.get::<AtomicU32>().unwrap().load(Ordering::SeqCst), 5);
        assert!(scope.get::<String>().is_none());
        assert_eq!(*scope.get_or_default::<String>(), "");
    }
}
