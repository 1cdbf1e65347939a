//! Layer 3: the arguments are a JSON object matching the tool's schema.

use serde_json::Value;

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
                        .with_code("INVALID_JSON")
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
            ba_protocol::content::kind_of(&value)
        ))
        .with_code("INVALID_ARGUMENTS"))
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
    .with_code("SCHEMA_VIOLATION"))
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

    proptest::proptest! {
        #[test]
        fn any_string_arguments_give_an_object_or_a_clear_error(text in "(?s).{0,200}") {
            match normalize_arguments(Value::String(text)) {
                Ok(v) => proptest::prop_assert!(v.is_object()),
                Err(e) => proptest::prop_assert_eq!(e.kind, ba_protocol::ToolErrorKind::InvalidParameters),
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
