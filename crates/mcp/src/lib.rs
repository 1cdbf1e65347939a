//! # ba-mcp
//!
//! The Model Context Protocol client of BA-Agent: tools from MCP servers, offered to the model
//! under names the model APIs accept, called with bounds, from servers that never block the
//! session and never outlive it.
//!
//! - [`McpServerConfig`] — one server: a child process over stdio (`command`, `args`, `env`,
//!   `cwd`) or a streamable-HTTP endpoint (`url`, `headers`), with `enabled`, `required`,
//!   `startup` (eager or lazy), `enabled_tools`, `disabled_tools`, `startup_timeout_ms`
//!   (30 000), `tool_timeout_ms` (120 000), `default_level` and `permission`.
//!   [`read_mcp_json`] reads Claude Code's `.mcp.json` (`${VAR}`, `${VAR:-default}`);
//!   [`load_plugin`] reads a Claude Code plugin folder: its servers (named `PLUGIN__SERVER`) and
//!   its skill folders, which the skills crate loads.
//! - [`McpManager`] — [`McpManager::start`] starts every server in parallel and waits only for
//!   the `required` ones; the others join when ready, a lazy one with a cached tool list starts
//!   on its first call. [`McpManager::tools`] lists what is offered ([`McpToolInfo`]: model name,
//!   server, raw name, description, input schema), [`McpManager::call`] calls a tool by its model
//!   name, [`McpManager::servers`] / [`McpManager::inventory`] report each server's state
//!   (starting, ready, lazy, failed with its reason and stderr tail, disabled, stopped) in the
//!   JSON shape of `mcp list --json`, [`McpManager::shutdown`] stops them.
//! - Names: `server__tool` in `[A-Za-z0-9_-]`, at most 64 bytes, with a 12-hex hash of the raw
//!   identity when too long or colliding; the manager maps names back through a table.
//! - Schemas: `type: object` and `properties` added, the top-level `$schema` dropped, nested
//!   schemas untouched; a tool whose top-level schema the APIs refuse is skipped with the reason.
//!   One bad tool or server never stops the others.
//! - Calls: an idle timeout reset by progress notifications (cancelling the request on the
//!   server when it runs out, or when the call's future is dropped), text and
//!   `structuredContent` both kept and bounded ([`ResultLimits`], with what was cut),
//!   images, audio and blobs returned decoded as [`BinaryItem`]s for the caller to store. No
//!   retries. Failures are [`McpError`]s whose [`McpError::kind`] is the tool runtime's
//!   [`ToolErrorKind`](ba_protocol::ToolErrorKind): `isError` an execution error with the
//!   tool's text, a dead server a resource error with its stderr tail.
//! - Processes: each stdio server in its own process group, with a cleared environment but for
//!   [`ENV_ALLOW_LIST`] and its `env`; shutdown closes stdin, then SIGTERM, then SIGKILL to the
//!   group; a dropped manager kills the groups, a watchdog covers a killed agent.
//!
//! The crate depends on `ba-protocol` only among the workspace's crates. The agent adapts each
//! [`McpToolInfo`] to a `ba_tools::Tool` whose call is [`McpManager::call`], mapping
//! [`McpError`] to a tool error and storing [`BinaryItem`]s through its data sink.
//!
//! rmcp, the official Rust SDK, is used behind one private module; its types do not appear in
//! this API.
//!
//! ```no_run
//! use ba_mcp::{CallOptions, McpManager, McpOptions, McpServerConfig};
//! use serde_json::json;
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), ba_mcp::McpError> {
//! let servers = [(
//!     "files",
//!     McpServerConfig::stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "/data"])
//!         .with_required(true),
//! )];
//! let manager = McpManager::start(servers, McpOptions::default()).await;
//! manager.check_required()?;
//! for tool in manager.tools() {
//!     println!("{} ({} on {})", tool.model_name, tool.raw_name, tool.server);
//! }
//! let result = manager
//!     .call(
//!         "files__list_directory",
//!         json!({"path": "/data"}),
//!         CallOptions::default().with_timeout(Duration::from_secs(10)),
//!     )
//!     .await?;
//! println!("{}", result.observation_data());
//! manager.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! Reading a `.mcp.json` needs no server:
//!
//! ```
//! let text = r#"{"mcpServers": {"db": {"command": "db-mcp", "args": ["--url", "${DB_URL:-sqlite://x}"]},
//!                                "old": {"type": "sse", "url": "https://example.com/sse"}}}"#;
//! let config = ba_mcp::parse_mcp_json(text, |_| None)?;
//! assert!(config.servers.contains_key("db"));
//! assert!(config.diagnostics[0].message.contains("not supported"));
//! # Ok::<(), ba_mcp::McpError>(())
//! ```
#![deny(missing_docs)]

mod cache;
mod catalog;
mod client;
mod config;
mod error;
mod expand;
mod framing;
mod manager;
mod mcp_json;
mod names;
mod options;
mod plugin;
mod process;
mod result;
mod schema;
mod status;

pub use client::ProgressFn;
pub use config::{
    DEFAULT_STARTUP_TIMEOUT_MS, DEFAULT_TOOL_TIMEOUT_MS, HttpServer, McpServerConfig, McpTransport,
    StartupMode, StdioServer,
};
pub use error::McpError;
pub use expand::{Expanded, expand_vars};
pub use manager::McpManager;
pub use mcp_json::{ConfigDiagnostic, McpJson, parse_mcp_json, read_mcp_json};
pub use names::{MAX_MODEL_NAME_BYTES, is_valid_model_name};
pub use options::{CallOptions, McpOptions};
pub use plugin::{PLUGIN_ROOT_VAR, Plugin, load_plugin, load_plugin_with};
pub use process::ENV_ALLOW_LIST;
pub use result::{
    BinaryItem, BinaryKind, Cut, McpCallResult, McpProgress, ResourceLink, ResultLimits,
};
pub use status::{McpInventory, McpToolInfo, ServerState, ServerStatus, SkippedTool};
