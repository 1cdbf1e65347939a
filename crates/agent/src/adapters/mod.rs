//! Adapters where the middle crates meet without depending on each other: the skills crate's
//! `activate_skill` as a `ba_tools::Tool` ([`SkillTool`]), the storage crate's data files as
//! the tool runtime's `DataSink` ([`DataFileSink`]), a model as the context crate's
//! `Summarizer` ([`ModelSummarizer`]), a model provider's embeddings as its `Embedder`
//! ([`ModelEmbedder`]), a child agent as the `task` tool ([`TaskTool`]), the
//! conversation's own log as the `recall` tool (what a trace left out, [`RecallTool`]), a
//! conversation's workspace as the files a tool call sees ([`WorkspaceFiles`]), the tools left
//! out of the requests as the `tool_search` tool ([`ToolSearchTool`]), the storage crate's
//! memory as the `memory` tool and the system prompt's index ([`MemoryTool`],
//! [`memory_index`]), and
//! (feature `mcp`) MCP servers' tools as tools ([`McpTool`], offered through [`McpToolSource`]).

mod datafile;
mod embedder;
#[cfg(feature = "mcp")]
mod mcp;
mod memory;
mod recall;
mod skill;
mod summarizer;
mod task;
mod tool_search;
mod workflow;
mod workspace;

pub use datafile::DataFileSink;
pub use embedder::ModelEmbedder;
#[cfg(feature = "mcp")]
pub use mcp::{DEFAULT_MCP_MAX_CALL, McpTool, McpToolSource};
pub use memory::{
    MEMORY_INDEX_FILE, MEMORY_INDEX_LINES, MEMORY_INDEX_TOKENS, MEMORY_TOOL, MemoryChanged,
    MemoryMode, MemoryTool, memory_index, memory_input_schema, writes_team,
};
pub(crate) use memory::{MemoryRunState, index_due, index_in_log};
pub use recall::{RECALL_PAGE_CHARS, RECALL_TOOL, RecallTool};
pub use skill::{SkillTool, activation_text};
pub use summarizer::{ModelSummarizer, SUMMARY_INSTRUCTION, TITLE_INSTRUCTION, transcript};
pub use task::{TASK_TOOL, TaskTool};
pub(crate) use tool_search::DeferredTools;
pub use tool_search::{SearchKind, TOOL_SEARCH_TOOL, ToolSearchTool};
pub use workflow::CompleteNodeTool;
pub use workspace::{WorkspaceFiles, file_info};
pub(crate) use workspace::{attachment_note, attachment_records};
