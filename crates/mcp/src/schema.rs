//! Input schemas the model APIs accept.
//!
//! The APIs want an object schema at the top of a tool's parameters: `type: object` with
//! `properties`, and none of `anyOf`, `oneOf`, `allOf`, `not`, `enum` or `const` there. What is
//! missing is added (`type`, `properties: {}`), the top-level `$schema` (which some APIs refuse)
//! is dropped, and nothing below the top is touched — nested `anyOf` stays as the server wrote
//! it. A schema that cannot be made acceptable without changing its meaning is refused with the
//! reason, and the tool is skipped.

use serde_json::{Map, Value};

const REFUSED_AT_TOP: [&str; 7] = ["anyOf", "oneOf", "allOf", "not", "enum", "const", "$ref"];

/// The schema to offer the model for `schema`, or why the tool cannot be offered.
pub(crate) fn normalize_input_schema(
    schema: &Map<String, Value>,
    max_bytes: usize,
) -> Result<Map<String, Value>, String> {
    match schema.get("type") {
        None => {}
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err(format!(
                "its input schema's top-level type is {other}; the model APIs need \"object\""
            ));
        }
    }
    if let Some(key) = REFUSED_AT_TOP.iter().find(|k| schema.contains_key(**k)) {
        return Err(format!(
            "its input schema has `{key}` at the top level, which the model APIs refuse"
        ));
    }
    match schema.get("properties") {
        None | Some(Value::Object(_)) => {}
        Some(_) => return Err("its input schema's `properties` is not an object".to_owned()),
    }
    match schema.get("required") {
        None => {}
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {}
        Some(_) => {
            return Err("its input schema's `required` is not a list of names".to_owned());
        }
    }
    let mut out = Map::with_capacity(schema.len() + 2);
    out.insert("type".to_owned(), Value::String("object".to_owned()));
    for (k, v) in schema {
        if k != "$schema" && k != "type" {
            out.insert(k.clone(), v.clone());
        }
    }
    out.entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    let size = serde_json::to_string(&out)
        .map(|s| s.len())
        .unwrap_or(usize::MAX);
    if size > max_bytes {
        return Err(format!(
            "its input schema is {size} bytes, over the {max_bytes}-byte limit"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn norm(v: Value) -> Result<Value, String> {
        let Value::Object(m) = v else {
            panic!("object")
        };
        normalize_input_schema(&m, 10_000).map(Value::Object)
    }

    #[test]
    fn adds_what_is_missing_and_drops_schema() {
        assert_eq!(
            norm(json!({})).unwrap(),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            norm(json!({"$schema": "http://json-schema.org/draft-07/schema#",
                        "properties": {"a": {"type": "string"}}, "required": ["a"]}))
            .unwrap(),
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
        );
    }

    #[test]
    fn nested_combinators_stay_as_written() {
        let nested = json!({"type": "object", "properties": {
            "filter": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {
                "op": {"oneOf": [{"const": "eq"}, {"const": "ne"}]}}}]},
            "inner": {"$schema": "kept", "type": "object"}
        }});
        assert_eq!(norm(nested.clone()).unwrap(), nested);
    }

    #[test]
    fn refused_tops_say_why() {
        for (v, needle) in [
            (json!({"type": "string"}), "top-level type is \"string\""),
            (json!({"type": ["object", "null"]}), "top-level type"),
            (
                json!({"anyOf": [{"type": "object"}]}),
                "`anyOf` at the top level",
            ),
            (json!({"type": "object", "oneOf": []}), "`oneOf`"),
            (json!({"$ref": "#/$defs/A", "$defs": {}}), "`$ref`"),
            (json!({"properties": []}), "`properties` is not an object"),
            (json!({"required": [1]}), "`required`"),
        ] {
            let err = norm(v).unwrap_err();
            assert!(err.contains(needle), "{err}");
        }
        let big = json!({"properties": {"a": {"description": "x".repeat(20_000)}}});
        assert!(norm(big).unwrap_err().contains("over the 10000-byte limit"));
    }
}
