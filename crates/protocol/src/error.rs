//! The crate's one error type.

/// What went wrong reading or converting protocol data.
///
/// Every variant names where the problem is (a JSON path such as `messages[3].content[1]`, a
/// line number, a field), so that a caller can show the message as it is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The input is not valid JSON, or does not match the expected shape.
    #[error("{context}: {message} (line {line}, column {column})")]
    Json {
        /// What was being read (`Anthropic request`, `log line 7`, …).
        context: String,
        /// serde_json's description of the problem.
        message: String,
        /// 1-based line of the problem inside the JSON text.
        line: usize,
        /// 1-based column of the problem inside the JSON text.
        column: usize,
    },
    /// The JSON is well formed but a value breaks a protocol rule.
    #[error("{path}: {message}")]
    Invalid {
        /// Where the bad value is, as a JSON path.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// A persisted record was written by a newer schema than this build reads.
    #[error(
        "{context}: schema version {found} is newer than the newest this build reads ({supported})"
    )]
    UnsupportedSchemaVersion {
        /// What was being read.
        context: String,
        /// The version in the record.
        found: u64,
        /// The newest version this build reads.
        supported: u32,
    },
    /// The input is larger than the limit the caller set.
    #[error("{context}: {size} bytes is over the limit of {limit} bytes")]
    TooLarge {
        /// What was being read.
        context: String,
        /// The input's size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// A stream ended or broke before it produced a complete message.
    #[error("stream: {0}")]
    Stream(String),
}

impl ProtocolError {
    /// Wraps a serde_json error with what was being read.
    pub fn json(context: impl Into<String>, err: &serde_json::Error) -> Self {
        Self::Json {
            context: context.into(),
            message: strip_position(&err.to_string()),
            line: err.line(),
            column: err.column(),
        }
    }

    /// A rule broken at `path`.
    pub fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// serde_json appends " at line L column C" to its messages; the variant carries both apart.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// Result with [`ProtocolError`].
pub type Result<T, E = ProtocolError> = std::result::Result<T, E>;
