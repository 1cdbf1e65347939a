//! # ba-agent
//!
//! The thin orchestrator of the BA-Agent pipeline: the ReAct loop and the adapters where
//! the middle crates meet. It is generic over the model (`ba-model`'s `ModelClient`, with no
//! provider compiled in unless the caller asks for one), the tools (any `ba_tools::Tool`; the
//! business-analysis tools of `ba-builtins` are one choice), the store (`ba-storage`'s
//! `ConversationStore`), the skills (`ba-skills`) and the context strategy (`ba-context`).
//!
//! - [`Agent`], built once by an [`AgentBuilder`], runs a conversation's turn as a [`Run`]:
//!   an async stream of typed [`AgentEvent`]s ending with [`AgentEvent::Finished`]. Dropping it
//!   cancels the run; what was appended stays and [`Input::Resume`] goes on from it.
//! - Each round builds the window with the context crate's `ContextBuilder` (system prompt per
//!   mode with the skills catalogue, budgeted window, compression), calls the model (deltas
//!   become events), appends the answer before its tool calls run, runs the calls in parallel
//!   through the tool runtime and appends each result as it is in.
//! - [`response`] turns a final answer into the API response (code blocks saved,
//!   `<code_ref>`/`<file_ref>` placeholders, HTML detection); [`ConversationReport`] is the
//!   metrics report, computed from the log alone; [`Prompts`] holds the prompt texts.
//! - The records the loop writes on log entries are typed fields of the log schema
//!   ([`ba_protocol::EntryRecords`]).
//! - Inside, one part reads and extends a conversation's log (its `History`: loaded with the
//!   rewinds applied, appended to the store first); a run, `/compact`, a rewind, the context
//!   preview and [`Agent::pending_approvals`] all go through it. A failure an event reports
//!   has an [`ErrorKind`] ([`AgentError::kind`]).
//! - Adapters: [`SkillTool`] (`activate_skill`), [`DataFileSink`] (spilled tool data into the
//!   storage crate's data files), [`ModelSummarizer`] (a model as the context crate's
//!   summarizer) and [`TaskTool`] (a child agent on a sub-task).
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use ba_agent::{Agent, Input, RunStatus};
//! use ba_model::ReplayClient;
//! use ba_storage::{FileStore, NewConversation};
//!
//! let recording = r#"[{"expect": {"role": "user", "text": "Hello"},
//!     "response": {"message": {"role": "assistant", "content": "Hi, what shall we analyse?"},
//!                  "stop_reason": "end_turn"}}]"#;
//! let dir = tempfile::tempdir()?;
//! let agent = Agent::builder(Arc::new(ReplayClient::from_json(recording, "inline")?))
//!     .store(Arc::new(FileStore::open(dir.path())?))
//!     .build()?;
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let summary = rt.block_on(async {
//!     let id = agent.new_conversation(NewConversation::default()).await?;
//!     Ok::<_, ba_agent::AgentError>(agent.send(&id, Input::message("Hello")).finish().await)
//! })?;
//! assert_eq!(summary.status, RunStatus::Answered);
//! assert_eq!(summary.final_answer.as_deref(), Some("Hi, what shall we analyse?"));
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod adapters;
mod agent;
mod approvals;
mod branching;
mod budget;
mod builder;
mod compact;
mod cost;
mod deferral;
mod error;
mod events;
mod history;
mod hooks;
mod ids;
mod lease;
mod parts;
mod prompts;
mod report;
pub mod response;
mod run;
mod settings;
mod sources;
mod spend;
mod workflow;

#[cfg(feature = "mcp")]
pub use adapters::{DEFAULT_MCP_MAX_CALL, McpTool, McpToolSource};
pub use adapters::{
    DataFileSink, ModelEmbedder, ModelSummarizer, RECALL_PAGE_CHARS, RECALL_TOOL, RecallTool,
    SUMMARY_INSTRUCTION, SearchKind, SkillTool, TASK_TOOL, TITLE_INSTRUCTION, TOOL_SEARCH_TOOL,
    TaskTool, ToolSearchTool, WorkspaceFiles, activation_text, file_info, transcript,
};
pub use adapters::{
    MEMORY_INDEX_FILE, MEMORY_INDEX_LINES, MEMORY_INDEX_TOKENS, MEMORY_TOOL, MemoryChanged,
    MemoryMode, MemoryTool, memory_index, memory_input_schema, writes_team,
};
pub use agent::{Agent, Input, RunOptions};
pub use approvals::{ApprovalAnswer, ApprovalCheck, ApprovalSettings};
pub use budget::{Calibration, calibration, window_record};
pub use builder::AgentBuilder;
pub use compact::Compaction;
pub use cost::{ModelPrice, PriceError, Prices};
pub use deferral::{DeferMode, ToolSearchSettings};
pub use error::{AgentError, ErrorKind};
pub use events::{AgentEvent, ContextLevel, InputKind, RunStatus, RunSummary, WorkflowNodeInfo};
#[cfg(feature = "command-hooks")]
pub use hooks::CommandHook;
pub use hooks::{Hook, HookOutput};
pub use prompts::{BUILTIN_PROMPTS, Prompts};
pub use report::{
    ActorCounts, ConversationReport, HistoryReport, InventoryChange, WorkflowRunReport, money,
};
pub use run::{CancelOutcome, NO_SUMMARY, Run, RunCanceller};
pub use settings::{AgentSettings, EnvOverrides, ResponseMode};
pub use sources::{SourceSnapshot, ToolSource};
pub use spend::{BudgetError, Budgets, MonthSpend, SpendReport, Spent, spend_report};
pub use workflow::{COMPLETE_NODE, WorkflowRun, complete_node_spec, shown_inputs};
