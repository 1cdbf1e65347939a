//! Python functions as the agent's tools. The Python layer writes each function's schema from
//! its type hints and wraps the function in a callable that takes the arguments as JSON text
//! and returns the result as JSON text; here that callable is called on a blocking thread that
//! takes the interpreter's lock for the call only.

use std::sync::Arc;

use async_trait::async_trait;
use ba_protocol::ToolApproval;
use ba_tools::{CallContext, Tool, ToolCapabilities, ToolError};
use pyo3::prelude::*;
use serde_json::Value;

/// A tool the Python side defined.
pub(crate) struct PyTool {
    name: String,
    description: String,
    schema: Value,
    call: Arc<Py<PyAny>>,
    approval: ToolApproval,
}

impl std::fmt::Debug for PyTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl PyTool {
    /// A tool named `name` whose arguments follow `schema`; `call` takes the arguments as JSON
    /// text and returns JSON text. With `ask`, a person approves each call first.
    pub(crate) fn new(
        name: String,
        description: String,
        schema: Value,
        call: Py<PyAny>,
        ask: bool,
    ) -> Self {
        Self {
            name,
            description,
            schema,
            call: Arc::new(call),
            approval: if ask {
                ToolApproval::Ask
            } else {
                ToolApproval::Never
            },
        }
    }
}

#[async_trait]
impl Tool for PyTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::default().with_approval(self.approval)
    }

    async fn call(&self, input: Value, _ctx: &CallContext) -> Result<Value, ToolError> {
        let call = Arc::clone(&self.call);
        let name = self.name.clone();
        let arguments = input.to_string();
        let text = tokio::task::spawn_blocking(move || {
            Python::attach(|py| -> Result<String, String> {
                let out = call
                    .call1(py, (arguments,))
                    .map_err(|e| e.value(py).to_string())?;
                out.extract::<String>(py).map_err(|e| e.to_string())
            })
        })
        .await
        .map_err(|e| {
            ToolError::execution(format!("the Python function `{name}` did not finish: {e}"))
        })?
        .map_err(|e| ToolError::execution(format!("the Python function `{name}` failed: {e}")))?;
        serde_json::from_str(&text).map_err(|e| {
            ToolError::execution(format!(
                "the Python function `{name}` returned what is not JSON: {e}"
            ))
        })
    }
}
