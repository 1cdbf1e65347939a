//! The two error types of the crate: [`ToolError`], the failure of one tool call (it becomes a
//! failed [`ToolResult`](ba_protocol::ToolResult) the model reads), and [`ToolsError`], what goes
//! wrong while setting the runtime up, writing spilled data or using a conversation's files.

use ba_protocol::ToolResultError;
use ba_protocol::{ToolErrorCode, ToolErrorKind};

/// Why one tool call failed.
///
/// It carries a kind (which decides whether a retry may help), a code, a message written for
/// the model, and an optional detail written for the operator (logs and traces only; the model
/// never sees it).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{kind} ({code}): {message}")]
pub struct ToolError {
    /// Why it failed.
    pub kind: ToolErrorKind,
    /// The machine-readable code (`TIMEOUT`, `UNKNOWN_TOOL`, …).
    pub code: ToolErrorCode,
    /// What the model reads.
    pub message: String,
    /// What the operator reads: a backtrace-free technical detail, never shown to the model.
    pub detail: Option<String>,
}

impl ToolError {
    /// An error of `kind` whose code is the kind's standard code.
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            code: kind.code(),
            message: message.into(),
            detail: None,
        }
    }

    /// The arguments were wrong.
    pub fn invalid_parameters(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::InvalidParameters, message)
    }

    /// The tool failed while running.
    pub fn execution(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::ExecutionError, message)
    }

    /// A resource was not available; the call may succeed if retried.
    pub fn resource(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::ResourceError, message)
    }

    /// The call ran past its timeout.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Timeout, message)
    }

    /// The tool may not run here.
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::PermissionDenied, message)
    }

    /// Replaces the code (`UNKNOWN_TOOL`, `INPUT_TOO_LARGE`, …).
    #[must_use]
    pub fn with_code(mut self, code: ToolErrorCode) -> Self {
        self.code = code;
        self
    }

    /// Adds a detail for the operator.
    #[must_use]
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Whether a retry may succeed.
    pub fn is_retryable(&self) -> bool {
        self.kind.is_retryable()
    }

    /// The error half of a protocol [`ToolResult`](ba_protocol::ToolResult).
    pub fn to_result_error(&self) -> ToolResultError {
        ToolResultError {
            kind: self.kind,
            code: self.code.into(),
            message: self.message.clone(),
        }
    }
}

/// What can go wrong while building a registry or runtime, writing spilled data, or using the
/// files of a conversation ([`ConversationFiles`](crate::files::ConversationFiles)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolsError {
    /// Two tools share a name.
    #[error("a tool named `{name}` is already registered")]
    DuplicateTool {
        /// The name registered twice.
        name: String,
    },
    /// A tool's name cannot be sent to a model.
    #[error("the tool name `{name}` is not valid: {reason}")]
    InvalidToolName {
        /// The rejected name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A tool's input schema is not a valid JSON Schema.
    #[error("the input schema of tool `{tool}` is not a valid JSON Schema: {reason}")]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// What the schema compiler said.
        reason: String,
    },
    /// A configuration value is out of range.
    #[error("the configuration field `{field}` is invalid: {reason}")]
    InvalidConfig {
        /// The field path (`defaults.retry.backoff_multiplier`, `tools.search.timeout_ms`).
        field: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The configuration text is not valid JSON for the configuration struct.
    #[error("the tools configuration could not be read: {source}")]
    ConfigSyntax {
        /// The parser's error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// A data sink could not write a file.
    #[error("could not write the data file `{path}`: {source}")]
    SinkWrite {
        /// The file that was being written.
        path: String,
        /// The I/O failure.
        #[source]
        source: std::io::Error,
    },
    /// A data sink refused a name (for example one that would escape its directory).
    #[error("the data file name `{name}` is not allowed: {reason}")]
    SinkName {
        /// The rejected name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The conversation has no file of that id or name.
    #[error("no file `{reference}` in this conversation")]
    NoSuchFile {
        /// The id or name as given.
        reference: String,
    },
    /// A file is over the largest size the conversation's files take.
    #[error("`{name}` is {size} bytes, over the limit of {limit} bytes a file")]
    FileTooLarge {
        /// The file's name.
        name: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A file name or id cannot be used for a file of the conversation.
    #[error("the file name `{name}` is not allowed: {reason}")]
    FileName {
        /// The rejected name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The conversation's files could not be read or written. The message names the file and
    /// never a local path.
    #[error("the conversation's files could not be used: {message}")]
    Files {
        /// What failed.
        message: String,
    },
}
