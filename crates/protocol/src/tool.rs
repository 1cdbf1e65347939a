//! Tool calls and results: what a model asks for, what it reads back, and why a call failed.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How detailed an observation is. Orthogonal to what the observation says.
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

/// Why a tool call failed; decides whether a retry may help.
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

    /// The kind's standard code, used when nothing more precise is known.
    pub fn code(self) -> ToolErrorCode {
        match self {
            Self::PermissionDenied => ToolErrorCode::PermissionDenied,
            Self::Timeout => ToolErrorCode::Timeout,
            Self::InvalidParameters => ToolErrorCode::InvalidParameters,
            Self::ExecutionError => ToolErrorCode::ExecutionError,
            Self::ResourceError => ToolErrorCode::ResourceError,
        }
    }
}

/// Declares [`ToolErrorCode`] with each variant's wire string in one place.
macro_rules! tool_error_codes {
    ($($(#[$doc:meta])* $variant:ident = $wire:literal,)+) => {
        /// The machine-readable code of a failed tool call, more precise than its
        /// [`ToolErrorKind`]. On the wire (the `code` of a [`ToolResultError`] and the
        /// observation's `Error Code:` line) it is the upper-case string.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        #[non_exhaustive]
        pub enum ToolErrorCode {
            $($(#[$doc])* #[serde(rename = $wire)] $variant,)+
        }

        impl ToolErrorCode {
            /// Every code.
            pub const ALL: &'static [ToolErrorCode] = &[$(Self::$variant,)+];

            /// The wire string (`TIMEOUT`, `UNKNOWN_TOOL`, …).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)+
                }
            }
        }
    };
}

tool_error_codes! {
    /// The tool may not run here (the kind's standard code).
    PermissionDenied = "PERMISSION_DENIED",
    /// The call ran past its timeout.
    Timeout = "TIMEOUT",
    /// The arguments were wrong (the kind's standard code).
    InvalidParameters = "INVALID_PARAMETERS",
    /// The tool failed while running (the kind's standard code).
    ExecutionError = "EXECUTION_ERROR",
    /// A resource was not available (the kind's standard code).
    ResourceError = "RESOURCE_ERROR",
    /// No tool of that name is registered.
    UnknownTool = "UNKNOWN_TOOL",
    /// The arguments are larger than the runtime takes.
    InputTooLarge = "INPUT_TOO_LARGE",
    /// The arguments are not valid JSON.
    InvalidJson = "INVALID_JSON",
    /// The arguments are JSON but not an object.
    InvalidArguments = "INVALID_ARGUMENTS",
    /// The arguments break the tool's input schema.
    SchemaViolation = "SCHEMA_VIOLATION",
    /// The tool is not on the list of tools allowed here.
    ToolNotAllowed = "TOOL_NOT_ALLOWED",
    /// The tool needs a higher permission level than the call has.
    PermissionLevel = "PERMISSION_LEVEL",
    /// The tool panicked.
    ToolPanicked = "TOOL_PANICKED",
    /// The result's data could not be written aside.
    SpillFailed = "SPILL_FAILED",
    /// A person refused the call.
    Rejected = "REJECTED",
    /// The conversation is read-only, so a call that writes was refused.
    ReadOnly = "READ_ONLY",
    /// A skill's tool was called before the skill was activated.
    SkillNotActivated = "SKILL_NOT_ACTIVATED",
    /// A workflow node's outputs were missing or wrong.
    NodeOutputs = "NODE_OUTPUTS",
    /// The MCP server has no tool of that name.
    McpUnknownTool = "MCP_UNKNOWN_TOOL",
    /// The MCP server no longer lists the tool.
    McpToolGone = "MCP_TOOL_GONE",
    /// The MCP server refused the arguments.
    McpInvalidArguments = "MCP_INVALID_ARGUMENTS",
    /// The MCP tool reported a failure.
    McpToolError = "MCP_TOOL_ERROR",
    /// The MCP server broke the protocol.
    McpProtocolError = "MCP_PROTOCOL_ERROR",
    /// The MCP server's reply could not be read.
    McpBadReply = "MCP_BAD_REPLY",
    /// The MCP server did not answer in time.
    McpTimeout = "MCP_TIMEOUT",
    /// The MCP server's reply was over the size limit.
    McpReplyTooLarge = "MCP_REPLY_TOO_LARGE",
    /// The MCP server is not running.
    McpServerUnavailable = "MCP_SERVER_UNAVAILABLE",
    /// A server marked required failed to start.
    McpRequiredServerFailed = "MCP_REQUIRED_SERVER_FAILED",
    /// The MCP configuration is wrong.
    McpConfig = "MCP_CONFIG",
    /// Talking to the MCP server failed.
    McpIo = "MCP_IO",
}

impl fmt::Display for ToolErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ToolErrorCode> for String {
    fn from(code: ToolErrorCode) -> Self {
        code.as_str().to_owned()
    }
}

impl PartialEq<str> for ToolErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ToolErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for ToolErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool call requested by the model.
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

/// Who may run what: the level a call runs at, checked against the level a tool needs.
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

/// The context a tool call runs in.
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
    /// Machine-readable code (`TIMEOUT`, `UNKNOWN_TOOL`, …): the wire string of a
    /// [`ToolErrorCode`], kept as text so a log written by any version reads back.
    pub code: String,
    /// What the model reads.
    pub message: String,
}

/// The outcome of one tool call. The model sees only `observation`.
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

/// The standard observation of a failed call, the same for every tool.
pub fn error_observation(tool_call_id: &str, error: &ToolResultError) -> String {
    format!(
        "Operation failed.\n\nError Type: {}\nError Code: {}\nError Message: {}\n\nTool Call ID: {}",
        error.kind, error.code, error.message, tool_call_id
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_code_has_one_upper_case_wire_name() {
        let mut seen = std::collections::BTreeSet::new();
        for &code in ToolErrorCode::ALL {
            let wire = code.as_str();
            assert!(
                wire.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'),
                "{wire}"
            );
            assert!(seen.insert(wire), "{wire} twice");
            assert_eq!(serde_json::to_value(code).unwrap(), serde_json::json!(wire));
            let back: ToolErrorCode = serde_json::from_value(serde_json::json!(wire)).unwrap();
            assert_eq!(back, code);
            assert_eq!(code.to_string(), wire);
            assert_eq!(String::from(code), wire);
        }
        assert_eq!(seen.len(), 30);
    }

    #[test]
    fn each_kind_has_its_standard_code() {
        let kinds = [
            (ToolErrorKind::PermissionDenied, "PERMISSION_DENIED"),
            (ToolErrorKind::Timeout, "TIMEOUT"),
            (ToolErrorKind::InvalidParameters, "INVALID_PARAMETERS"),
            (ToolErrorKind::ExecutionError, "EXECUTION_ERROR"),
            (ToolErrorKind::ResourceError, "RESOURCE_ERROR"),
        ];
        for (kind, wire) in kinds {
            assert_eq!(kind.code(), wire);
        }
    }
}
