//! Adapters where the middle crates meet without depending on each other: the skills crate's
//! `activate_skill` as a `ba_tools::Tool` ([`SkillTool`]), the storage crate's data files as
//! the tool runtime's `DataSink` ([`DataFileSink`]), a model as the context crate's
//! `Summarizer` ([`ModelSummarizer`]), a child agent as the `task` tool ([`TaskTool`]), the
//! conversation's own log as the `recall` tool (what a trace left out, [`RecallTool`]), a
//! conversation's workspace as the files a tool call sees ([`WorkspaceFiles`]), the tools left
//! out of the requests as the `tool_search` tool ([`ToolSearchTool`]), and
//! (feature `mcp`) MCP servers' tools as tools ([`McpTool`], offered through [`McpToolSource`]).

mod datafile;
#[cfg(feature = "mcp")]
mod mcp;
mod recall;
mod skill;
mod summarizer;
mod task;
mod tool_search;
mod workflow;
mod workspace;

pub use datafile::DataFileSink;
#[cfg(feature = "mcp")]
pub use mcp::{DEFAULT_MCP_MAX_CALL, McpTool, McpToolSource};
pub use recall::{RECALL_PAGE_CHARS, RECALL_TOOL, RecallTool};
pub use skill::{SkillTool, activation_text};
pub use summarizer::{ModelSummarizer, SUMMARY_INSTRUCTION, TITLE_INSTRUCTION, transcript};
pub use task::{TASK_TOOL, TaskTool};
pub(crate) use tool_search::DeferredTools;
pub use tool_search::{SearchKind, TOOL_SEARCH_TOOL, ToolSearchTool};
pub use workflow::CompleteNodeTool;
pub use workspace::{WorkspaceFiles, file_info};
pub(crate) use workspace::{attachment_note, attachment_records};
