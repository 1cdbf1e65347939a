//! Tool calls and results (P4–P6).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How detailed an observation is (P6). Orthogonal to what the observation says.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum OutputLevel {
    /// Key facts only (`Found 12 items`).
    Brief,
    /// Actionable information, bounded in size.
    #[default]
    Standard,
    /// Everything, or a reference to a file holding everything.
    Full,
}

impl OutputLevel {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Brief => "brief",
            Self::Standard => "standard",
            Self::Full => "full",
        }
    }
}

impl fmt::Display for OutputLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a tool call failed (P6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorKind {
    /// The tool is not allowed here.
    PermissionDenied,
    /// The call ran past its timeout.
    Timeout,
    /// The arguments were wrong.
    InvalidParameters,
    /// The tool failed while running.
    ExecutionError,
    /// A resource (disk, network, memory, a rate limit) was not available.
    ResourceError,
}

impl ToolErrorKind {
    /// Whether a retry may succeed: only timeouts and resource errors are retried.
    pub fn is_retryable(self) -> bool {
        matches!(self, Self::Timeout | Self::ResourceError)
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PermissionDenied => "permission_denied",
            Self::Timeout => "timeout",
            Self::InvalidParameters => "invalid_parameters",
            Self::ExecutionError => "execution_error",
            Self::ResourceError => "resource_error",
        }
    }

    /// The upper-case error code used in observations (`TIMEOUT`, …).
    pub fn code(self) -> &'static str {
        match self {
            Self::PermissionDenied => "PERMISSION_DENIED",
            Self::Timeout => "TIMEOUT",
            Self::InvalidParameters => "INVALID_PARAMETERS",
            Self::ExecutionError => "EXECUTION_ERROR",
            Self::ResourceError => "RESOURCE_ERROR",
        }
    }
}

impl fmt::Display for ToolErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool call requested by the model (P4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    /// Call id, echoed by the result.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments, a JSON object.
    pub arguments: Value,
    /// Level the caller asked for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_level: Option<OutputLevel>,
}

impl ToolCall {
    /// A call without an explicit level.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
            output_level: None,
        }
    }
}

/// How a tool is described to a model: its name, what it does, and the JSON Schema of its
/// input. Every provider's tool list is made of these; the tool runtime lists its tools as
/// these, and the model clients send them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolSpec {
    /// The name the model calls the tool by.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON Schema of the arguments (an `object` schema).
    pub input_schema: Value,
}

impl ToolSpec {
    /// A tool with the given name, description and input schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>, schema: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema: schema,
        }
    }
}

/// Who may run what (P4, T8).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PermissionLevel {
    /// Read-only tools only.
    Restricted,
    /// The ordinary set.
    #[default]
    Default,
    /// Everything.
    Admin,
}

/// The context a tool call runs in (P4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InvocationContext {
    /// Timeout of one attempt, in milliseconds (default 120 000).
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// The agent or skill making the call.
    #[serde(default)]
    pub caller_id: String,
    /// The caller's permission level.
    #[serde(default)]
    pub permission_level: PermissionLevel,
    /// Where large results may be written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_dir: Option<String>,
    /// The conversation the call belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
}

/// The default timeout of one tool attempt: 120 s.
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 120_000;

fn default_timeout_ms() -> u64 {
    DEFAULT_TOOL_TIMEOUT_MS
}

impl Default for InvocationContext {
    fn default() -> Self {
        Self {
            timeout_ms: DEFAULT_TOOL_TIMEOUT_MS,
            caller_id: String::new(),
            permission_level: PermissionLevel::Default,
            storage_dir: None,
            conversation_id: None,
        }
    }
}

/// The error half of a failed [`ToolResult`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolResultError {
    /// Why it failed.
    pub kind: ToolErrorKind,
    /// Machine-readable code (`TIMEOUT`, `UNKNOWN_TOOL`, …).
    pub code: String,
    /// What the model reads.
    pub message: String,
}

/// The outcome of one tool call (P5). The model sees only `observation`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolResult {
    /// The call this answers.
    pub tool_call_id: String,
    /// The one string the model reasons with.
    pub observation: String,
    /// How detailed `observation` is.
    pub output_level: OutputLevel,
    /// Where the full data was written, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_ref: Option<String>,
    /// Size of the serialised raw data.
    #[serde(default)]
    pub data_size_bytes: u64,
    /// Hash of the serialised raw data (16 hex digits of SHA-256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_hash: Option<String>,
    /// A short summary of spilled data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_summary: Option<String>,
    /// Whether the call succeeded.
    pub success: bool,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolResultError>,
    /// Attempts after the first.
    #[serde(default)]
    pub retry_count: u32,
    /// Wall time of all attempts.
    #[serde(default)]
    pub duration_ms: u64,
}

impl ToolResult {
    /// A failed result whose observation is the standard error text.
    pub fn failure(
        tool_call_id: impl Into<String>,
        kind: ToolErrorKind,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let tool_call_id = tool_call_id.into();
        let error = ToolResultError {
            kind,
            code: code.into(),
            message: message.into(),
        };
        Self {
            observation: error_observation(&tool_call_id, &error),
            tool_call_id,
            output_level: OutputLevel::Brief,
            data_ref: None,
            data_size_bytes: 0,
            data_hash: None,
            data_summary: None,
            success: false,
            error: Some(error),
            retry_count: 0,
            duration_ms: 0,
        }
    }
}

/// The standard observation of a failed call (P5), the same for every tool.
pub fn error_observation(tool_call_id: &str, error: &ToolResultError) -> String {
    format!(
        "Operation failed.\n\nError Type: {}\nError Code: {}\nError Message: {}\n\nTool Call ID: {}",
        error.kind, error.code, error.message, tool_call_id
    )
}
