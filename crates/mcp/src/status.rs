//! What the manager reports: servers, their states and tools, in a JSON shape `mcp list --json`
//! prints as it is.

use ba_protocol::{OutputLevel, PermissionLevel};
use serde::Serialize;
use serde_json::{Map, Value};

/// Where a server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
#[cfg_attr(test, derive(strum::EnumIter))]
pub enum ServerState {
    /// Spawning, in the handshake or listing its tools.
    Starting,
    /// Connected; its tools are offered.
    Ready,
    /// Not started yet (`startup: lazy`); the tools of its cached list are offered and the first
    /// call starts it.
    Lazy,
    /// It could not start, or died; `reason` and `stderr_tail` say why. Its tools are withdrawn.
    Failed,
    /// `enabled: false`.
    Disabled,
    /// Shut down.
    Stopped,
}

impl ServerState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Ready => "ready",
            Self::Lazy => "lazy",
            Self::Failed => "failed",
            Self::Disabled => "disabled",
            Self::Stopped => "stopped",
        }
    }
}

/// One tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct McpToolInfo {
    /// The tool's name on its server.
    #[serde(rename = "name")]
    pub raw_name: String,
    /// The name the model calls it by (`server__tool`, see [`crate::MAX_MODEL_NAME_BYTES`]).
    pub model_name: String,
    /// The server.
    pub server: String,
    /// Its title, when the server gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its description (bounded).
    pub description: String,
    /// Its input schema, made acceptable to the model APIs (see the crate docs).
    pub input_schema: Map<String, Value>,
    /// Its output schema, as the server gave it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Its annotations (`readOnlyHint`, …): hints from the server, not guarantees.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// The server's `default_level`, for the tool runtime.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_level: Option<OutputLevel>,
    /// The server's `permission`, for the tool runtime.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission: Option<PermissionLevel>,
    /// The server's `approval`, for the agent's approval gate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<ba_protocol::ToolApproval>,
    /// The server's `tool_timeout_ms`.
    pub timeout_ms: u64,
}

impl McpToolInfo {
    /// Whether the tool may change something: not when its server says `readOnlyHint: true`
    /// (a hint, trusted only to refuse less in the `read_only` approval mode).
    pub fn writes(&self) -> bool {
        self.annotations
            .as_ref()
            .and_then(|a| a.get("readOnlyHint"))
            .and_then(Value::as_bool)
            != Some(true)
    }
}

/// A tool that is not offered, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SkippedTool {
    /// Its raw name (`#3` when it had none).
    pub name: String,
    /// Why it is not offered.
    pub reason: String,
}

/// One server's state and tools.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ServerStatus {
    /// The server's name.
    pub name: String,
    /// Its state.
    pub state: ServerState,
    /// Why it failed (or other detail of its state).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The last lines it wrote to stderr, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// Whether the first round waits for it.
    pub required: bool,
    /// The process id (and process group id) of a stdio server's process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// `name version` as the server introduced itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_info: Option<String>,
    /// The protocol version agreed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// Milliseconds from spawn to a listed set of tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_ms: Option<u64>,
    /// Its tools as offered.
    pub tools: Vec<McpToolInfo>,
    /// Its tools that are not offered.
    pub skipped: Vec<SkippedTool>,
}

/// All servers: `{"servers": [...]}`, the shape of `ba-agent mcp list --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct McpInventory {
    /// The servers, in configuration order.
    pub servers: Vec<ServerStatus>,
}

#[cfg(test)]
mod tests {
    use strum::IntoEnumIterator;

    use super::ServerState;

    /// `mcp list` and the status route print these names; serde writes the same.
    #[test]
    fn every_state_is_written_as_its_name() {
        for state in ServerState::iter() {
            assert_eq!(
                serde_json::to_value(state).unwrap(),
                serde_json::Value::from(state.as_str()),
                "{state:?}"
            );
        }
    }
}
