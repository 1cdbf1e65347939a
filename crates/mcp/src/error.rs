//! The crate's one error type.

use std::path::PathBuf;
use std::time::Duration;

use ba_protocol::{ToolErrorCode, ToolErrorKind};

use crate::result::McpProgress;

/// What went wrong with an MCP server, a call or a configuration.
///
/// Each variant carries what a caller needs to act on it: the server, the tool, the stderr tail
/// of a failed server. [`McpError::kind`] maps it onto the tool runtime's error kinds,
/// [`McpError::model_message`] is the text a model may read (no stderr, no paths outside the
/// call) and [`McpError::detail`] the operator's detail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// No tool has this model name.
    #[error("no MCP tool is named `{model_name}`")]
    UnknownTool {
        /// The name asked for.
        model_name: String,
    },
    /// The server no longer offers the tool (its list changed since the name was given).
    #[error("MCP server `{server}` no longer offers the tool `{tool}`")]
    ToolGone {
        /// The server.
        server: String,
        /// The tool's raw name.
        tool: String,
    },
    /// The arguments are not a JSON object, or the server refused them (JSON-RPC's invalid
    /// parameters, `-32602`).
    #[error("invalid arguments for `{tool}` on MCP server `{server}`: {message}")]
    InvalidArguments {
        /// The server.
        server: String,
        /// The tool's raw name.
        tool: String,
        /// Why.
        message: String,
    },
    /// The tool ran and reported a failure (`isError: true`); `text` is what it said.
    #[error("the tool `{tool}` on MCP server `{server}` failed: {text}")]
    ToolFailed {
        /// The server.
        server: String,
        /// The tool's raw name.
        tool: String,
        /// The text of the result (bounded).
        text: String,
    },
    /// The server answered the request with a JSON-RPC error.
    #[error("MCP server `{server}` refused the call to `{tool}`: {message} (code {code})")]
    Protocol {
        /// The server.
        server: String,
        /// The tool's raw name.
        tool: String,
        /// The JSON-RPC error code.
        code: i64,
        /// The error message (bounded).
        message: String,
    },
    /// The server's answer could not be read (a shape that is not a tool result).
    #[error("MCP server `{server}` sent an answer to `{tool}` that could not be read: {message}")]
    BadReply {
        /// The server.
        server: String,
        /// The tool's raw name.
        tool: String,
        /// What was wrong.
        message: String,
    },
    /// No answer within the timeout; the request was cancelled on the server.
    #[error("the tool `{tool}` on MCP server `{server}` gave no answer within {}{}", fmt_duration(*after), progress_note(.progress.as_ref()))]
    Timeout {
        /// The server.
        server: String,
        /// The tool's raw name.
        tool: String,
        /// The timeout that ran out (idle time since the last progress, or the total cap).
        after: Duration,
        /// The last progress the server reported, if any.
        progress: Option<McpProgress>,
        /// How many progress notifications arrived.
        progress_count: u64,
    },
    /// The server's reply (one JSON-RPC message) was over the size limit and was discarded.
    #[error(
        "MCP server `{server}` sent a reply of {bytes} bytes to `{tool}`, over the {limit}-byte limit; it was discarded"
    )]
    ReplyTooLarge {
        /// The server.
        server: String,
        /// The tool's raw name.
        tool: String,
        /// The size of the reply.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// The server is not running: it failed to start, died, was disabled or shut down.
    #[error("MCP server `{server}` is unavailable: {reason}")]
    ServerUnavailable {
        /// The server.
        server: String,
        /// Why (exit status, handshake timeout, …).
        reason: String,
        /// The last lines the server wrote to stderr.
        stderr_tail: Option<String>,
    },
    /// A server marked `required` did not become ready.
    #[error("required MCP server `{server}` did not start: {reason}")]
    RequiredServerFailed {
        /// The server.
        server: String,
        /// Why.
        reason: String,
        /// The last lines the server wrote to stderr.
        stderr_tail: Option<String>,
    },
    /// A configuration is invalid.
    #[error("invalid MCP configuration{}: {message}", in_place(.server.as_deref(), .path.as_ref()))]
    Config {
        /// The file, when it came from one.
        path: Option<PathBuf>,
        /// The server, when one is to blame.
        server: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A file could not be read or written.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done (`read`, `write`).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn fmt_duration(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

fn progress_note(progress: Option<&McpProgress>) -> String {
    match progress {
        None => String::new(),
        Some(p) => format!(" (last progress: {p})"),
    }
}

fn in_place(server: Option<&str>, path: Option<&PathBuf>) -> String {
    match (server, path) {
        (Some(s), Some(p)) => format!(" for server `{s}` in {}", p.display()),
        (Some(s), None) => format!(" for server `{s}`"),
        (None, Some(p)) => format!(" in {}", p.display()),
        (None, None) => String::new(),
    }
}

impl McpError {
    /// The tool runtime's kind of this error: what the retry policy and the model see.
    pub fn kind(&self) -> ToolErrorKind {
        match self {
            Self::UnknownTool { .. } | Self::ToolGone { .. } | Self::InvalidArguments { .. } => {
                ToolErrorKind::InvalidParameters
            }
            Self::ToolFailed { .. } | Self::Protocol { .. } | Self::BadReply { .. } => {
                ToolErrorKind::ExecutionError
            }
            Self::Timeout { .. } => ToolErrorKind::Timeout,
            Self::ReplyTooLarge { .. }
            | Self::ServerUnavailable { .. }
            | Self::RequiredServerFailed { .. }
            | Self::Io { .. } => ToolErrorKind::ResourceError,
            Self::Config { .. } => ToolErrorKind::ExecutionError,
        }
    }

    /// A machine-readable code for observations and logs (`MCP_TOOL_ERROR`, …).
    pub fn code(&self) -> ToolErrorCode {
        match self {
            Self::UnknownTool { .. } => ToolErrorCode::McpUnknownTool,
            Self::ToolGone { .. } => ToolErrorCode::McpToolGone,
            Self::InvalidArguments { .. } => ToolErrorCode::McpInvalidArguments,
            Self::ToolFailed { .. } => ToolErrorCode::McpToolError,
            Self::Protocol { .. } => ToolErrorCode::McpProtocolError,
            Self::BadReply { .. } => ToolErrorCode::McpBadReply,
            Self::Timeout { .. } => ToolErrorCode::McpTimeout,
            Self::ReplyTooLarge { .. } => ToolErrorCode::McpReplyTooLarge,
            Self::ServerUnavailable { .. } => ToolErrorCode::McpServerUnavailable,
            Self::RequiredServerFailed { .. } => ToolErrorCode::McpRequiredServerFailed,
            Self::Config { .. } => ToolErrorCode::McpConfig,
            Self::Io { .. } => ToolErrorCode::McpIo,
        }
    }

    /// Whether a retry may succeed (the runtime's rule: timeouts and resource errors).
    pub fn is_retryable(&self) -> bool {
        self.kind().is_retryable()
    }

    /// What the model reads: for a failed tool its own text, otherwise the sentence of
    /// [`Display`](std::fmt::Display) — never a stderr tail.
    pub fn model_message(&self) -> String {
        match self {
            Self::ToolFailed { text, .. } => text.clone(),
            other => other.to_string(),
        }
    }

    /// What the operator reads besides the message: the stderr tail of a failed server.
    pub fn detail(&self) -> Option<String> {
        match self {
            Self::ServerUnavailable { stderr_tail, .. }
            | Self::RequiredServerFailed { stderr_tail, .. } => stderr_tail
                .as_ref()
                .filter(|t| !t.trim().is_empty())
                .map(|t| format!("stderr (last lines):\n{t}")),
            _ => None,
        }
    }

    /// The stderr tail a failed server left, when there is one.
    pub fn stderr_tail(&self) -> Option<&str> {
        match self {
            Self::ServerUnavailable { stderr_tail, .. }
            | Self::RequiredServerFailed { stderr_tail, .. } => stderr_tail.as_deref(),
            _ => None,
        }
    }

    pub(crate) fn config(message: impl Into<String>) -> Self {
        Self::Config {
            path: None,
            server: None,
            message: message.into(),
        }
    }

    pub(crate) fn server_config(server: &str, message: impl Into<String>) -> Self {
        Self::Config {
            path: None,
            server: Some(server.to_owned()),
            message: message.into(),
        }
    }

    /// The same error, saying which file it came from.
    pub(crate) fn in_file(self, file: &std::path::Path) -> Self {
        match self {
            Self::Config {
                path: None,
                server,
                message,
            } => Self::Config {
                path: Some(file.to_path_buf()),
                server,
                message,
            },
            other => other,
        }
    }
}

impl McpError {
    /// The errors of one call of `tool` on `server`: each names the two without repeating them.
    pub(crate) fn for_call<'a>(server: &'a str, tool: &'a str) -> CallErrors<'a> {
        CallErrors { server, tool }
    }
}

/// Builds the [`McpError`]s of one call ([`McpError::for_call`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallErrors<'a> {
    server: &'a str,
    tool: &'a str,
}

impl CallErrors<'_> {
    fn names(self) -> (String, String) {
        (self.server.to_owned(), self.tool.to_owned())
    }

    /// The arguments were refused, here or by the server.
    pub(crate) fn invalid_arguments(self, message: String) -> McpError {
        let (server, tool) = self.names();
        McpError::InvalidArguments {
            server,
            tool,
            message,
        }
    }

    /// The server no longer lists the tool.
    pub(crate) fn tool_gone(self) -> McpError {
        let (server, tool) = self.names();
        McpError::ToolGone { server, tool }
    }

    /// The tool ran and said it failed.
    pub(crate) fn tool_failed(self, text: String) -> McpError {
        let (server, tool) = self.names();
        McpError::ToolFailed { server, tool, text }
    }

    /// The answer could not be read.
    pub(crate) fn bad_reply(self, message: String) -> McpError {
        let (server, tool) = self.names();
        McpError::BadReply {
            server,
            tool,
            message,
        }
    }

    /// The reply was over the size limit.
    pub(crate) fn reply_too_large(self, bytes: u64, limit: u64) -> McpError {
        let (server, tool) = self.names();
        McpError::ReplyTooLarge {
            server,
            tool,
            bytes,
            limit,
        }
    }

    /// No answer in time.
    pub(crate) fn timeout(
        self,
        after: Duration,
        progress: Option<McpProgress>,
        progress_count: u64,
    ) -> McpError {
        let (server, tool) = self.names();
        McpError::Timeout {
            server,
            tool,
            after,
            progress,
            progress_count,
        }
    }

    /// A JSON-RPC error answer: invalid parameters are the arguments refused, the rest a
    /// protocol error with its code.
    pub(crate) fn rpc(self, code: i64, message: String) -> McpError {
        if code == crate::framing::INVALID_PARAMS {
            return self.invalid_arguments(message);
        }
        let (server, tool) = self.names();
        McpError::Protocol {
            server,
            tool,
            code,
            message,
        }
    }

    /// The server cannot be reached.
    pub(crate) fn unavailable(self, reason: String) -> McpError {
        McpError::ServerUnavailable {
            server: self.server.to_owned(),
            reason,
            stderr_tail: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_runtime_rules() {
        let timeout = McpError::Timeout {
            server: "s".into(),
            tool: "t".into(),
            after: Duration::from_millis(1500),
            progress: Some(McpProgress {
                progress: 2.0,
                total: Some(5.0),
                message: Some("copying".into()),
            }),
            progress_count: 2,
        };
        assert_eq!(timeout.kind(), ToolErrorKind::Timeout);
        assert!(timeout.is_retryable());
        assert_eq!(
            timeout.to_string(),
            "the tool `t` on MCP server `s` gave no answer within 1500 ms (last progress: 2/5 copying)"
        );
        let failed = McpError::ToolFailed {
            server: "s".into(),
            tool: "t".into(),
            text: "no such table".into(),
        };
        assert_eq!(failed.kind(), ToolErrorKind::ExecutionError);
        assert_eq!(failed.model_message(), "no such table");
        let dead = McpError::ServerUnavailable {
            server: "s".into(),
            reason: "exited with status 3 during a call".into(),
            stderr_tail: Some("panic: boom".into()),
        };
        assert_eq!(dead.kind(), ToolErrorKind::ResourceError);
        assert!(!dead.model_message().contains("boom"));
        assert!(dead.detail().unwrap_or_default().contains("boom"));
        let config = McpError::server_config("files", "both `command` and `url`")
            .in_file(std::path::Path::new(".mcp.json"));
        assert_eq!(
            config.to_string(),
            "invalid MCP configuration for server `files` in .mcp.json: both `command` and `url`"
        );
    }

    #[test]
    fn a_call_names_its_server_and_tool_in_every_error() {
        let call = McpError::for_call("files", "read");
        let invalid = call.rpc(crate::framing::INVALID_PARAMS, "path is required".into());
        assert!(
            matches!(invalid, McpError::InvalidArguments { .. }),
            "{invalid}"
        );
        assert_eq!(invalid.code(), ToolErrorCode::McpInvalidArguments);
        assert_eq!(
            invalid.to_string(),
            "invalid arguments for `read` on MCP server `files`: path is required"
        );
        let other = call.rpc(-32601, "no such method".into());
        assert_eq!(
            other.to_string(),
            "MCP server `files` refused the call to `read`: no such method (code -32601)"
        );
        for e in [
            call.tool_gone(),
            call.tool_failed("x".into()),
            call.bad_reply("x".into()),
            call.reply_too_large(2, 1),
            call.timeout(Duration::from_millis(5), None, 0),
        ] {
            let text = e.to_string();
            assert!(
                text.contains("`files`") && text.contains("`read`"),
                "{text}"
            );
        }
        assert_eq!(
            call.unavailable("gone".into()).code(),
            ToolErrorCode::McpServerUnavailable
        );
    }
}
