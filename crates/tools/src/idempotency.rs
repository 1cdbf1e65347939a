//! Layer 5: the idempotency cache. A repeated call with the same key is answered with the
//! cached raw data instead of running the tool again; the data is then formatted for the new
//! call (its own level, its own call id).
//!
//! The key is an explicit idempotency key when the caller gives one, otherwise — for tools that
//! declare themselves idempotent — the tool name and the canonical form of the arguments (keys
//! sorted, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are the same call). Only successes are cached.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// A bounded, expiring cache of raw tool results.
#[derive(Clone)]
pub struct IdempotencyCache {
    cache: moka::sync::Cache<String, Arc<Value>>,
}

impl fmt::Debug for IdempotencyCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdempotencyCache")
            .field("entries", &self.cache.entry_count())
            .finish()
    }
}

impl IdempotencyCache {
    /// A cache holding at most `capacity` results, each for at most `ttl`.
    pub fn new(capacity: u64, ttl: Duration) -> Self {
        Self {
            cache: moka::sync::Cache::builder()
                .max_capacity(capacity)
                .time_to_live(ttl)
                .build(),
        }
    }

    /// The cached data for `key`.
    pub fn get(&self, key: &str) -> Option<Arc<Value>> {
        self.cache.get(key)
    }

    /// Caches `data` under `key`.
    pub fn insert(&self, key: String, data: Arc<Value>) {
        self.cache.insert(key, data);
    }
}

/// The cache key of a call: the explicit key if given, else the canonical arguments if the tool
/// is idempotent, else none (the call is not cached).
pub fn cache_key(
    tool: &str,
    arguments: &Value,
    explicit: Option<&str>,
    idempotent: bool,
) -> Option<String> {
    if let Some(key) = explicit {
        return Some(format!("{tool}\u{0}key\u{0}{key}"));
    }
    if !idempotent {
        return None;
    }
    let mut canonical = String::new();
    write_canonical(arguments, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    Some(format!("{tool}\u{0}args\u{0}{}", hex(&digest)))
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// JSON with object keys sorted, whatever map order serde_json was built with.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_canonical_and_explicit_keys_win() {
        let a = cache_key(
            "t",
            &json!({"a": 1, "b": [true, {"y": 1, "x": 2}]}),
            None,
            true,
        );
        let b = cache_key(
            "t",
            &json!({"b": [true, {"x": 2, "y": 1}], "a": 1}),
            None,
            true,
        );
        assert_eq!(a, b);
        assert!(a.is_some());
        assert_ne!(a, cache_key("u", &json!({"a": 1}), None, true));
        assert_eq!(cache_key("t", &json!({}), None, false), None);
        let k1 = cache_key("t", &json!({"a": 1}), Some("k"), false);
        let k2 = cache_key("t", &json!({"a": 2}), Some("k"), false);
        assert_eq!(k1, k2);
    }

    #[test]
    fn cache_returns_what_was_inserted() {
        let cache = IdempotencyCache::new(10, Duration::from_secs(60));
        cache.insert("k".into(), Arc::new(json!([1, 2])));
        assert_eq!(cache.get("k").as_deref(), Some(&json!([1, 2])));
        assert!(cache.get("other").is_none());
    }
}
