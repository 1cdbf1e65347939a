//! One-pass field extraction from a JSON object.
//!
//! The lossless types of this crate read an object once into a map, take the fields they know
//! out of it and keep the rest as `extra`. That costs one parse (the same as `serde_json::Value`)
//! and lets every error name the field and the record it belongs to.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::content::{JsonMap, kind_of};

/// Fields of one JSON object, taken out one by one; what is left is the `extra` map.
pub(crate) struct Fields {
    map: JsonMap,
    what: &'static str,
}

impl Fields {
    pub(crate) fn new(map: JsonMap, what: &'static str) -> Self {
        Self { map, what }
    }

    /// Builds from any value, refusing a non-object.
    pub(crate) fn from_value<E: serde::de::Error>(
        value: Value,
        what: &'static str,
    ) -> Result<Self, E> {
        match value {
            Value::Object(map) => Ok(Self::new(map, what)),
            other => Err(E::custom(format_args!(
                "{what} must be an object, found {}",
                kind_of(&other)
            ))),
        }
    }

    pub(crate) fn missing<E: serde::de::Error>(&self, key: &str) -> E {
        E::custom(format_args!("{}: missing field `{key}`", self.what))
    }

    fn wrong<E: serde::de::Error>(&self, key: &str, expected: &str, found: &Value) -> E {
        E::custom(format_args!(
            "{}: field `{key}` must be {expected}, found {}",
            self.what,
            kind_of(found)
        ))
    }

    pub(crate) fn remove(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key)
    }

    pub(crate) fn req_string<E: serde::de::Error>(&mut self, key: &str) -> Result<String, E> {
        match self.map.remove(key) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(self.wrong(key, "a string", &other)),
            None => Err(self.missing(key)),
        }
    }

    /// A string that may be absent or null.
    pub(crate) fn opt_string<E: serde::de::Error>(
        &mut self,
        key: &str,
    ) -> Result<Option<String>, E> {
        match self.map.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.wrong(key, "a string", &other)),
        }
    }

    pub(crate) fn opt_bool<E: serde::de::Error>(&mut self, key: &str) -> Result<Option<bool>, E> {
        match self.map.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(b)),
            Some(other) => Err(self.wrong(key, "a boolean", &other)),
        }
    }

    pub(crate) fn opt_u64<E: serde::de::Error>(&mut self, key: &str) -> Result<Option<u64>, E> {
        match self.map.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
            Some(other) => Err(self.wrong(key, "a non-negative integer", &other)),
        }
    }

    /// Any deserialisable value that may be absent or null; the error names the field.
    pub(crate) fn opt<T: DeserializeOwned, E: serde::de::Error>(
        &mut self,
        key: &str,
    ) -> Result<Option<T>, E> {
        match self.map.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => serde_json::from_value(value)
                .map(Some)
                .map_err(|e| E::custom(format_args!("{}: field `{key}`: {e}", self.what))),
        }
    }

    /// The fields not taken.
    pub(crate) fn rest(self) -> JsonMap {
        self.map
    }
}
