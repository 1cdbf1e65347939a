//! Layer 1: find the called tool, or tell the model which tools exist.

use ba_protocol::ToolErrorCode;

use crate::error::ToolError;
use crate::registry::{RegisteredTool, ToolRegistry};

/// The tool called `name`, or an `invalid_parameters` error (code `UNKNOWN_TOOL`) listing the
/// known names so the model can correct itself.
pub fn lookup<'r>(registry: &'r ToolRegistry, name: &str) -> Result<&'r RegisteredTool, ToolError> {
    registry.get(name).ok_or_else(|| {
        let known: Vec<&str> = registry.names().collect();
        let listing = if known.is_empty() {
            "no tools are available".to_owned()
        } else {
            format!("available tools: {}", known.join(", "))
        };
        ToolError::invalid_parameters(format!("unknown tool `{name}`; {listing}"))
            .with_code(ToolErrorCode::UnknownTool)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typed::dynamic_tool;
    use serde_json::{Value, json};

    #[test]
    fn unknown_tool_lists_the_known_ones() {
        let mut reg = ToolRegistry::new();
        for name in ["search", "read_file"] {
            reg.register(dynamic_tool(
                name,
                "t",
                json!({"type": "object"}),
                |_, _| async { Ok(Value::Null) },
            ))
            .unwrap();
        }
        assert_eq!(lookup(&reg, "search").unwrap().name(), "search");
        let err = lookup(&reg, "serch").unwrap_err();
        assert_eq!(err.code, "UNKNOWN_TOOL");
        assert_eq!(
            err.message,
            "unknown tool `serch`; available tools: read_file, search"
        );
        let empty = lookup(&ToolRegistry::new(), "x").unwrap_err();
        assert!(empty.message.ends_with("no tools are available"));
    }
}
