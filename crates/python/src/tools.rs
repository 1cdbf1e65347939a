//! Python functions as the agent's tools. The Python layer writes each function's schema from
//! its type hints and wraps the function in a callable that takes the arguments as JSON text
//! and returns the result as JSON text; here that callable is called on a blocking thread that
//! takes the interpreter's lock for the call only.

use std::sync::Arc;

use ba_protocol::ToolApproval;
use ba_tools::{Tool, ToolCapabilities, ToolError, dynamic_tool};
use pyo3::prelude::*;
use serde_json::Value;

/// A tool named `name` whose arguments follow `schema`; `call` takes the arguments as JSON
/// text and returns JSON text. With `ask`, a person approves each call first.
pub(crate) fn python_tool(
    name: String,
    description: String,
    schema: Value,
    call: Py<PyAny>,
    ask: bool,
) -> Arc<dyn Tool> {
    let call = Arc::new(call);
    let approval = if ask {
        ToolApproval::Ask
    } else {
        ToolApproval::Never
    };
    let tool_name = name.clone();
    let tool = dynamic_tool(name, description, schema, move |input: Value, _ctx| {
        let call = Arc::clone(&call);
        let name = tool_name.clone();
        async move { call_python(call, name, input).await }
    })
    .with_capabilities(ToolCapabilities::default().with_approval(approval));
    Arc::new(tool)
}

/// Calls the function with the arguments as JSON text; its JSON text answer, parsed.
async fn call_python(call: Arc<Py<PyAny>>, name: String, input: Value) -> Result<Value, ToolError> {
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
    .map_err(|e| ToolError::execution(format!("the Python function `{name}` did not finish: {e}")))?
    .map_err(|e| ToolError::execution(format!("the Python function `{name}` failed: {e}")))?;
    serde_json::from_str(&text).map_err(|e| {
        ToolError::execution(format!(
            "the Python function `{name}` returned what is not JSON: {e}"
        ))
    })
}
