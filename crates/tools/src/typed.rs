//! Adapters that turn plain async functions into [`Tool`]s.
//!
//! [`typed_tool`] takes a function of a typed argument struct; the JSON Schema comes from the
//! struct's `JsonSchema` derive, and the arguments are deserialized before the function runs.
//! [`dynamic_tool`] takes a function of raw JSON and an explicit schema, for tools whose shape
//! is only known at run time (an MCP server's tools).

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;

use async_trait::async_trait;
use ba_protocol::OutputLevel;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ToolError;
use crate::tool::{CallContext, Tool, ToolCapabilities};

/// A tool made of an async function of a typed argument struct. Built by [`typed_tool`].
pub struct TypedTool<A, F> {
    name: String,
    description: String,
    schema: Value,
    default_level: Option<OutputLevel>,
    capabilities: ToolCapabilities,
    func: F,
    _args: PhantomData<fn(A)>,
}

impl<A, F> fmt::Debug for TypedTool<A, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedTool")
            .field("name", &self.name)
            .field("default_level", &self.default_level)
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

/// Makes a tool of `func`, an async function taking the deserialized arguments and the call
/// context and returning anything serializable.
///
/// ```
/// use ba_tools::{typed_tool, Tool};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Args { city: String }
///
/// let tool = typed_tool("weather", "Current weather of a city.", |a: Args, _ctx| async move {
///     Ok(format!("18°C in {}", a.city))
/// });
/// assert_eq!(tool.name(), "weather");
/// assert_eq!(tool.input_schema()["required"][0], "city");
/// ```
pub fn typed_tool<A, R, F, Fut>(
    name: impl Into<String>,
    description: impl Into<String>,
    func: F,
) -> TypedTool<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    R: Serialize,
    F: Fn(A, CallContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
{
    TypedTool {
        name: name.into(),
        description: description.into(),
        schema: schemars::schema_for!(A).to_value(),
        default_level: None,
        capabilities: ToolCapabilities::default(),
        func,
        _args: PhantomData,
    }
}

impl<A, F> TypedTool<A, F> {
    /// Sets the level the tool's results are shown at when a call does not ask for one.
    #[must_use]
    pub fn with_default_level(mut self, level: OutputLevel) -> Self {
        self.default_level = Some(level);
        self
    }

    /// Sets what the tool can do beyond being called.
    #[must_use]
    pub fn with_capabilities(mut self, capabilities: ToolCapabilities) -> Self {
        self.capabilities = capabilities;
        self
    }
}

#[async_trait]
impl<A, R, F, Fut> Tool for TypedTool<A, F>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    R: Serialize,
    F: Fn(A, CallContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        // The runtime has already checked the schema, so this fails only for constraints the
        // schema cannot express or when the tool is called directly.
        let args: A = serde_json::from_value(input).map_err(|e| {
            ToolError::invalid_parameters(format!(
                "the arguments of `{}` do not match its parameters: {e}",
                self.name
            ))
        })?;
        let out = (self.func)(args, ctx.clone()).await?;
        serde_json::to_value(out).map_err(|e| {
            ToolError::execution(format!(
                "the result of `{}` is not valid JSON data",
                self.name
            ))
            .with_detail(e.to_string())
        })
    }

    fn default_level(&self) -> Option<OutputLevel> {
        self.default_level
    }

    fn capabilities(&self) -> ToolCapabilities {
        self.capabilities
    }
}

/// A tool of raw JSON with an explicit schema. Built by [`dynamic_tool`].
pub struct DynamicTool<F> {
    name: String,
    description: String,
    schema: Value,
    default_level: Option<OutputLevel>,
    capabilities: ToolCapabilities,
    func: F,
}

impl<F> fmt::Debug for DynamicTool<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicTool")
            .field("name", &self.name)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// Makes a tool of `func`, an async function of the raw JSON arguments, described by
/// `schema` (for example a tool listed by an MCP server).
pub fn dynamic_tool<F, Fut>(
    name: impl Into<String>,
    description: impl Into<String>,
    schema: Value,
    func: F,
) -> DynamicTool<F>
where
    F: Fn(Value, CallContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    DynamicTool {
        name: name.into(),
        description: description.into(),
        schema,
        default_level: None,
        capabilities: ToolCapabilities::default(),
        func,
    }
}

impl<F> DynamicTool<F> {
    /// Sets the level the tool's results are shown at when a call does not ask for one.
    #[must_use]
    pub fn with_default_level(mut self, level: OutputLevel) -> Self {
        self.default_level = Some(level);
        self
    }

    /// Sets what the tool can do beyond being called.
    #[must_use]
    pub fn with_capabilities(mut self, capabilities: ToolCapabilities) -> Self {
        self.capabilities = capabilities;
        self
    }
}

#[async_trait]
impl<F, Fut> Tool for DynamicTool<F>
where
    F: Fn(Value, CallContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        (self.func)(input, ctx.clone()).await
    }

    fn default_level(&self) -> Option<OutputLevel> {
        self.default_level
    }

    fn capabilities(&self) -> ToolCapabilities {
        self.capabilities
    }
}
