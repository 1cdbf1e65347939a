//! The [`ToolRegistry`]: the tools a runtime can run, each with its compiled schema.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use ba_protocol::ToolSpec;
use serde_json::Value;

use crate::error::ToolsError;
use crate::tool::Tool;

/// The longest tool name the model providers accept.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// A registered tool: the tool and its compiled argument schema.
#[derive(Clone)]
pub struct RegisteredTool {
    tool: Arc<dyn Tool>,
    schema: Arc<Value>,
    validator: Arc<jsonschema::Validator>,
}

impl fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("name", &self.tool.name())
            .finish_non_exhaustive()
    }
}

impl RegisteredTool {
    /// The tool.
    pub fn tool(&self) -> &Arc<dyn Tool> {
        &self.tool
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        self.tool.name()
    }

    /// The argument schema as registered.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    pub(crate) fn validator(&self) -> &jsonschema::Validator {
        &self.validator
    }
}

/// The tools a runtime can run, by name. Names are unique; listing order is alphabetical so the
/// tool list sent to a model is stable (which keeps prompt caches warm).
#[derive(Debug, Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, RegisteredTool>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `tool`, compiling its schema once so every call is validated cheaply.
    ///
    /// # Errors
    /// [`ToolsError::DuplicateTool`], [`ToolsError::InvalidToolName`] or
    /// [`ToolsError::InvalidSchema`].
    pub fn register(&mut self, tool: impl Tool + 'static) -> Result<(), ToolsError> {
        self.register_arc(Arc::new(tool))
    }

    /// Registers a shared tool.
    ///
    /// # Errors
    /// As [`register`](Self::register).
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) -> Result<(), ToolsError> {
        let name = tool.name().to_owned();
        check_name(&name)?;
        if self.tools.contains_key(&name) {
            return Err(ToolsError::DuplicateTool { name });
        }
        let schema = tool.input_schema();
        if !schema.is_object() {
            return Err(ToolsError::InvalidSchema {
                tool: name,
                reason: "the schema is not a JSON object".to_owned(),
            });
        }
        let validator =
            jsonschema::validator_for(&schema).map_err(|e| ToolsError::InvalidSchema {
                tool: name.clone(),
                reason: e.to_string(),
            })?;
        self.tools.insert(
            name,
            RegisteredTool {
                tool,
                schema: Arc::new(schema),
                validator: Arc::new(validator),
            },
        );
        Ok(())
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.tools.get(name)
    }

    /// The registered names, alphabetical.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The descriptions to send to a model, alphabetical.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .values()
            .map(|r| ToolSpec {
                name: r.name().to_owned(),
                description: r.tool.description().to_owned(),
                input_schema: (*r.schema).clone(),
            })
            .collect()
    }
}

fn check_name(name: &str) -> Result<(), ToolsError> {
    let reason = if name.is_empty() {
        "it is empty".to_owned()
    } else if name.len() > MAX_TOOL_NAME_LEN {
        format!("it is longer than {MAX_TOOL_NAME_LEN} bytes")
    } else if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        format!("it contains {c:?}; only ASCII letters, digits, `_` and `-` are allowed")
    } else {
        return Ok(());
    };
    Err(ToolsError::InvalidToolName {
        name: name.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typed::dynamic_tool;
    use serde_json::json;

    fn noop(name: &str, schema: Value) -> impl Tool + 'static {
        dynamic_tool(name, "test", schema, |_, _| async { Ok(Value::Null) })
    }

    #[test]
    fn duplicate_and_bad_names_and_schemas_are_refused() {
        let mut reg = ToolRegistry::new();
        reg.register(noop("a", json!({"type": "object"}))).unwrap();
        let dup = reg
            .register(noop("a", json!({"type": "object"})))
            .unwrap_err();
        assert!(matches!(dup, ToolsError::DuplicateTool { ref name } if name == "a"));
        let bad = reg.register(noop("a b", json!({}))).unwrap_err();
        assert!(bad.to_string().contains("' '"), "{bad}");
        let schema = reg
            .register(noop("c", json!({"type": "no-such-type"})))
            .unwrap_err();
        assert!(matches!(schema, ToolsError::InvalidSchema { ref tool, .. } if tool == "c"));
        assert_eq!(reg.names().collect::<Vec<_>>(), ["a"]);
    }
}
