//! # ba-tools
//!
//! The tool trait and the tool runtime of the BA-Agent pipeline. A tool returns raw
//! JSON data; the runtime turns every call into one protocol
//! [`ToolResult`](ba_protocol::ToolResult) whose `observation` is the single string the model
//! reasons with.
//!
//! - [`Tool`] — the async tool trait; [`typed_tool`] makes one from a plain async function
//!   of a `Deserialize + JsonSchema` argument struct, [`dynamic_tool`] from raw JSON and a
//!   schema (an MCP server's tools). [`ToolRegistry`] holds them with compiled schemas.
//! - [`ToolRuntime`] — runs a call through the layers, one private module each: lookup → input
//!   size (checked on the serialized arguments before anything runs) → schema validation →
//!   permissions ([`ToolCapabilities`] and a skill's `allowed_tools`) → idempotency cache →
//!   retry ([`RetryPolicy`], [`Backoff`], [`Jitter`]) → timeout (with panic capture) → the
//!   tool → output levels (which level a call gets, then formatting bounded at that level:
//!   [`format_observation`], [`FormatBounds`]) → spill of large data (the [`DataSink`] trait
//!   and the [`FsSink`]). [`ToolRuntime::run_all`] runs up to six calls at once. A failure
//!   carries a [`ToolErrorCode`](ba_protocol::ToolErrorCode).
//! - [`MetricsRecorder`] — per-call records, per-tool and per-conversation aggregates and a
//!   report; every call runs in a `tool_call` tracing span with one `tool_attempt` span
//!   per attempt. The `otel` feature (off by default) also publishes the call metrics
//!   through the OpenTelemetry metrics API.
//! - [`ToolsConfig`]: the specified numbers as defaults, per-tool overrides ([`ToolOverride`]).
//! - [`ConversationFiles`]: the files of the conversation a call belongs to (uploads, code,
//!   outputs, spilled data; ids and names, never paths), handed to each call in
//!   [`CallContext::files`] through [`CallOptions::files`]; spilled data then becomes a data
//!   file of the conversation (`data_001`). [`DirFiles`] keeps them in a folder, for tests and
//!   simple embedders. [`RunScope`]: what the calls of one run of the caller share.
//!
//! Every public item has one path, at the crate's root.
//!
//! The crate depends on `ba-protocol` only. The orchestrator (`ba-agent`) registers its
//! built-in tools, adapts the storage crate's conversation workspace to [`ConversationFiles`]
//! (and its data-file store to [`DataSink`]) and the context crate's counter to
//! [`TokenCounter`](ba_protocol::TokenCounter).
//!
//! ```
//! use ba_protocol::{InvocationContext, OutputLevel, ToolCall};
//! use ba_tools::{typed_tool, ToolRegistry, ToolRuntime, ToolsConfig};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use serde_json::json;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Args { prefix: String }
//!
//! let mut registry = ToolRegistry::new();
//! registry.register(typed_tool("list_customers", "Customers whose name starts with a prefix.",
//!     |a: Args, _ctx| async move {
//!         Ok((1..=12).map(|i| format!("{}{i}", a.prefix)).collect::<Vec<_>>())
//!     }))?;
//! let runtime = ToolRuntime::new(registry, ToolsConfig::default())?;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let mut call = ToolCall::new("call_1", "list_customers", json!({"prefix": "acme-"}));
//! call.output_level = Some(OutputLevel::Brief);
//! let result = runtime.run(&call, &InvocationContext::default()).await;
//! assert!(result.success);
//! assert_eq!(result.observation, "Found 12 items");
//!
//! let bad = ToolCall::new("call_2", "list_customers", json!({"prefix": 7}));
//! let result = runtime.run(&bad, &InvocationContext::default()).await;
//! assert!(!result.success);
//! assert!(result.observation.contains("Error Type: invalid_parameters"));
//! assert!(result.observation.contains("/prefix"));
//! # });
//! # Ok::<(), ba_tools::ToolsError>(())
//! ```
#![deny(missing_docs)]

mod config;
mod error;
mod files;
mod idempotency;
mod levels;
mod lookup;
mod metrics;
#[cfg(feature = "otel")]
mod otel;
mod permissions;
mod registry;
mod retry;
mod runtime;
mod scope;
mod search;
mod size;
mod spill;
mod timeout;
mod tool;
mod typed;
mod validate;

pub use ba_protocol::{FileId, FileKind};
pub use config::{IdempotencyConfig, RetryConfig, ToolOverride, ToolsConfig};
pub use error::{ToolError, ToolsError};
pub use files::{ConversationFiles, DirFiles, FileInfo, find_in};
pub use levels::{
    FormatBounds, format_brief, format_full, format_observation, format_standard, summarize,
    truncate_middle,
};
pub use metrics::{Aggregate, MetricsRecorder, ToolMetrics};
pub use registry::{MAX_TOOL_NAME_LEN, RegisteredTool, ToolRegistry};
pub use retry::{Backoff, Jitter, NoJitter, RandomJitter, RetryPolicy, TimeoutGrowth};
pub use runtime::{CallOptions, ToolRuntime};
pub use scope::RunScope;
pub use search::{MAX_PATTERN_BYTES, PatternError, ToolHit, ToolIndex};
pub use spill::{DataSink, FsSink, data_hash};
pub use timeout::MAX_PARTIAL_BYTES;
pub use tool::{CallContext, PartialOutput, Tool, ToolCapabilities};
pub use typed::{DynamicTool, TypedTool, dynamic_tool, typed_tool};
