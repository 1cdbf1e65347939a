//! Adapters that let the lower crates meet here without depending on each other: the built-in
//! business-analysis tools as `ba_tools::Tool`s.

use std::sync::Arc;

use async_trait::async_trait;
use ba_protocol::tool::PermissionLevel;
use ba_tools::{CallContext, Tool, ToolCapabilities, ToolError, ToolRegistry, ToolsError};
use serde_json::Value;

use crate::builtin::{BuiltinError, Builtins, ToolSpec, file_reader, query_database};

/// One configured built-in tool, served through the tool runtime.
#[derive(Debug, Clone)]
pub struct BuiltinTool {
    spec: ToolSpec,
    tools: Arc<Builtins>,
}

impl BuiltinTool {
    /// The configured tools of `tools`, one adapter each, in the order of [`Builtins::specs`].
    pub fn all(tools: Arc<Builtins>) -> Vec<Self> {
        tools
            .specs()
            .into_iter()
            .map(|spec| Self {
                spec,
                tools: Arc::clone(&tools),
            })
            .collect()
    }
}

/// Registers every configured built-in tool (`web_search` only when it has a backend).
pub fn register_builtins(
    registry: &mut ToolRegistry,
    tools: Arc<Builtins>,
) -> Result<(), ToolsError> {
    for tool in BuiltinTool::all(tools) {
        registry.register(tool)?;
    }
    Ok(())
}

fn tool_error(err: &BuiltinError) -> ToolError {
    ToolError::new(err.kind(), err.to_string())
}

#[async_trait]
impl Tool for BuiltinTool {
    fn name(&self) -> &str {
        self.spec.name
    }

    fn description(&self) -> &str {
        self.spec.description
    }

    fn input_schema(&self) -> Value {
        self.spec.parameters.clone()
    }

    async fn call(&self, input: Value, _ctx: &CallContext) -> Result<Value, ToolError> {
        match self.tools.call(self.spec.name, input).await {
            Some(Ok(value)) => Ok(value),
            Some(Err(err)) => Err(tool_error(&err)),
            // `all` only builds adapters for configured tools, so this means the set changed.
            None => Err(ToolError::new(
                ba_protocol::ToolErrorKind::ExecutionError,
                format!("`{}` is not configured", self.spec.name),
            )),
        }
    }

    fn capabilities(&self) -> ToolCapabilities {
        // Reading files and read-only queries give the same answer for the same arguments and
        // are safe at the restricted level; running code is not.
        match self.spec.name {
            file_reader::NAME | query_database::NAME => ToolCapabilities::default()
                .with_idempotent(true)
                .with_required_permission(PermissionLevel::Restricted),
            _ => ToolCapabilities::default(),
        }
    }
}
