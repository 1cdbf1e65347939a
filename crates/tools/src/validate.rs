//! Layer 3: the arguments are a JSON object matching the tool's schema.

use serde_json::Value;

use ba_protocol::ToolErrorCode;

use crate::error::ToolError;
use crate::registry::RegisteredTool;

/// How many schema violations one error message lists.
const MAX_LISTED: usize = 5;

/// Turns the call's arguments into the JSON object the tool receives.
///
/// Providers differ: Anthropic sends an object, OpenAI a string of JSON. A string is parsed;
/// a string that is not JSON is reported with its line and column. `null` stands for "no
/// arguments".
pub fn normalize_arguments(arguments: Value) -> Result<Value, ToolError> {
    match arguments {
        Value::String(text) => {
            let trimmed = text.trim();
            if trimmed.is_empty() {
                return Ok(Value::Object(Default::default()));
            }
            serde_json::from_str::<Value>(trimmed)
                .map_err(|e| {
                    ToolError::invalid_parameters(format!("the arguments are not valid JSON: {e}"))
                        .with_code(ToolErrorCode::InvalidJson)
                })
                .and_then(require_object)
        }
        Value::Null => Ok(Value::Object(Default::default())),
        other => require_object(other),
    }
}

fn require_object(value: Value) -> Result<Value, ToolError> {
    if value.is_object() {
        Ok(value)
    } else {
        Err(ToolError::invalid_parameters(format!(
            "the arguments must be a JSON object, not {}",
            ba_protocol::kind_of(&value)
        ))
        .with_code(ToolErrorCode::InvalidArguments))
    }
}

/// Checks `arguments` against the tool's schema. The error lists each violation with the
/// JSON Pointer of the offending field (`/filters/0/op: "like" is not one of …`).
pub fn validate_arguments(tool: &RegisteredTool, arguments: &Value) -> Result<(), ToolError> {
    let validator = tool.validator();
    if validator.is_valid(arguments) {
        return Ok(());
    }
    let mut lines = Vec::new();
    let mut total = 0usize;
    for error in validator.iter_errors(arguments) {
        total += 1;
        if lines.len() < MAX_LISTED {
            let path = error.instance_path().to_string();
            let path = if path.is_empty() {
                "/".to_owned()
            } else {
                path
            };
            lines.push(format!("{path}: {error}"));
        }
    }
    if total > lines.len() {
        lines.push(format!("… and {} more", total - lines.len()));
    }
    Err(ToolError::invalid_parameters(format!(
        "the arguments of `{}` do not match its schema: {}",
        tool.name(),
        lines.join("; ")
    ))
    .with_code(ToolErrorCode::SchemaViolation))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::ToolRegistry;
    use crate::typed::typed_tool;
    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Filter {
        field: String,
        op: Op,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum Op {
        Eq,
        Gt,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Query {
        table: String,
        filters: Vec<Filter>,
    }

    fn registry() -> ToolRegistry {
        let mut reg = ToolRegistry::new();
        reg.register(typed_tool("query", "q", |_: Query, _| async { Ok(0) }))
            .unwrap();
        reg
    }

    #[test]
    fn violations_name_the_field_path() {
        let reg = registry();
        let tool = reg.get("query").unwrap();
        let ok = json!({"table": "t", "filters": [{"field": "a", "op": "eq"}]});
        validate_arguments(tool, &ok).unwrap();
        let bad = json!({"table": "t", "filters": [{"field": "a", "op": "like"}]});
        let err = validate_arguments(tool, &bad).unwrap_err();
        assert_eq!(err.code, "SCHEMA_VIOLATION");
        assert!(err.message.contains("/filters/0/op"), "{}", err.message);
        let missing = validate_arguments(tool, &json!({"filters": []})).unwrap_err();
        assert!(missing.message.contains("table"), "{}", missing.message);
    }

    use proptest::prelude::*;

    /// Any JSON value: scalars, strings with escapes and non-ASCII, nested arrays and objects.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1.0e12f64..1.0e12).prop_map(Value::from),
            "(?s).{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("(?s).{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn json_object() -> impl Strategy<Value = Value> {
        prop::collection::btree_map("(?s).{0,6}", json_value(), 0..5)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    /// What `normalize_arguments` must make of a string argument.
    #[derive(Debug, Clone)]
    enum Expect {
        /// Valid JSON: this object, or an `INVALID_ARGUMENTS` error for any other value.
        Json(Value),
        /// Not JSON: an `INVALID_JSON` error with the line and column.
        Broken,
        /// Blank: no arguments.
        Empty,
        /// Any text: whatever serde_json says of it.
        Unknown,
    }

    /// Mostly valid JSON (objects and other values, compact or pretty, padded with
    /// whitespace), JSON objects cut short, blank strings, and arbitrary text.
    fn string_arguments() -> impl Strategy<Value = (String, Expect)> {
        let pad = "[ \t\r\n]{0,3}";
        let valid = (
            prop_oneof![json_object(), json_value()],
            any::<bool>(),
            pad,
            pad,
        )
            .prop_map(|(v, pretty, before, after)| {
                let text = if pretty {
                    serde_json::to_string_pretty(&v).unwrap()
                } else {
                    v.to_string()
                };
                (format!("{before}{text}{after}"), Expect::Json(v))
            });
        // A proper prefix of an object's text never closes the object.
        let cut = (json_object(), any::<prop::sample::Index>()).prop_map(|(v, at)| {
            let text = v.to_string();
            let ends: Vec<usize> = text
                .char_indices()
                .map(|(i, _)| i)
                .filter(|&i| i > 0)
                .collect();
            let end = if ends.is_empty() {
                1
            } else {
                ends[at.index(ends.len())]
            };
            (text[..end].to_owned(), Expect::Broken)
        });
        prop_oneof![
            4 => valid,
            2 => cut,
            1 => "[ \t\r\n]{0,4}".prop_map(|t| (t, Expect::Empty)),
            1 => "(?s).{0,200}".prop_map(|t| (t, Expect::Unknown)),
        ]
    }

    proptest! {
        #[test]
        fn string_arguments_give_the_object_or_the_right_error((text, expect) in string_arguments()) {
            let got = normalize_arguments(Value::String(text.clone()));
            let expect = match expect {
                Expect::Unknown => match serde_json::from_str::<Value>(text.trim()) {
                    _ if text.trim().is_empty() => Expect::Empty,
                    Ok(v) => Expect::Json(v),
                    Err(_) => Expect::Broken,
                },
                other => other,
            };
            match (expect, got) {
                (Expect::Json(v), Ok(got)) => {
                    prop_assert!(v.is_object(), "{v} was accepted as arguments");
                    prop_assert_eq!(got, v);
                }
                (Expect::Json(v), Err(e)) => {
                    prop_assert!(!v.is_object(), "an object was refused: {}", e.message);
                    prop_assert_eq!(e.kind, ba_protocol::ToolErrorKind::InvalidParameters);
                    prop_assert_eq!(e.code.as_str(), "INVALID_ARGUMENTS");
                }
                (Expect::Broken, Err(e)) => {
                    prop_assert_eq!(e.kind, ba_protocol::ToolErrorKind::InvalidParameters);
                    prop_assert_eq!(e.code.as_str(), "INVALID_JSON");
                    prop_assert!(e.message.contains("line") && e.message.contains("column"), "{}", e.message);
                }
                (Expect::Empty, Ok(got)) => prop_assert_eq!(got, json!({})),
                (expect, got) => prop_assert!(false, "{text:?}: expected {expect:?}, got {got:?}"),
            }
        }

        #[test]
        fn json_arguments_pass_objects_and_refuse_other_values(
            v in prop_oneof![json_object(), json_value()]
                .prop_filter("a string is read as JSON text (the property above)", |v| !v.is_string())
        ) {
            match normalize_arguments(v.clone()) {
                Ok(got) if v.is_null() => prop_assert_eq!(got, json!({})),
                Ok(got) => {
                    prop_assert!(v.is_object());
                    prop_assert_eq!(got, v);
                }
                Err(e) => {
                    prop_assert!(!v.is_object() && !v.is_null(), "{v}: {}", e.message);
                    prop_assert_eq!(e.code.as_str(), "INVALID_ARGUMENTS");
                }
            }
        }
    }

    #[test]
    fn string_arguments_are_parsed_and_bad_json_is_located() {
        assert_eq!(
            normalize_arguments(json!("{\"a\": 1}")).unwrap(),
            json!({"a": 1})
        );
        assert_eq!(normalize_arguments(Value::Null).unwrap(), json!({}));
        let err = normalize_arguments(json!("{\"a\": 1,")).unwrap_err();
        assert_eq!(err.code, "INVALID_JSON");
        assert!(err.message.contains("line 1 column"), "{}", err.message);
        let arr = normalize_arguments(json!([1])).unwrap_err();
        assert!(arr.message.ends_with("not an array"));
    }
}
