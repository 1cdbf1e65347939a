//! # ba-protocol
//!
//! The wire and log types of the BA-Agent pipeline, and the conversions between them. This
//! crate does no I/O: it reads and writes JSON text and values, and everything else in the
//! workspace builds on it.
//!
//! The log and message model is flat at the root, one path per item:
//! - content blocks: [`ContentBlock`], [`Content`] — text, thinking with signatures, tool use
//!   and results, images; unknown block types survive as raw JSON;
//! - the normalised [`Message`] and the conversation log entry [`LogEntry`], versioned
//!   ([`LOG_SCHEMA_VERSION`], with migrations from older versions), with the agent loop's typed
//!   records ([`EntryRecords`], [`CompactionRecord`]);
//! - tool calls and results ([`ToolSpec`], [`ToolCall`], [`ToolResult`], with the typed
//!   [`ToolErrorKind`] and [`ToolErrorCode`]), skill activation ([`SkillActivationRequest`]),
//!   one user turn of the reasoning loop ([`ConversationRound`]);
//! - the structured model response ([`StructuredResponse`]) and the API response
//!   ([`ApiResponse`]);
//! - the [`TokenCounter`] seam that `ba-context` implements; conversation-level checks that
//!   name the bad field ([`validate_log`]); the media-type table ([`media_type_for`]);
//! - the vocabulary of a conversation's files: [`FileId`] (the one id check), [`FileKind`], and
//!   [`find_file`] (the one rule for a file named by id or name).
//!
//! Wire formats keep their namespace, since their names repeat across them:
//! - [`anthropic`], [`openai`] (Chat Completions), [`responses`] (the OpenAI Responses API) —
//!   provider wire types, each keeping unknown fields;
//! - [`convert`] — Anthropic ⇄ log ⇄ Chat Completions ⇄ Responses, reporting what a
//!   target cannot express;
//! - [`claude_code`] — Claude Code session transcripts → log entries; [`codex`] — Codex
//!   rollouts → log entries;
//! - [`stream`] — SSE parsing and accumulators that rebuild a final message from a stream.
//!
//! ```
//! use ba_protocol::anthropic::AnthropicRequest;
//! use ba_protocol::convert::{anthropic_to_log, log_to_openai, SequentialStamp};
//!
//! let req = AnthropicRequest::from_json(r#"{
//!   "system": "Be brief.",
//!   "messages": [
//!     {"role": "user", "content": "Weather in Paris?"},
//!     {"role": "assistant", "content": [
//!       {"type": "thinking", "thinking": "Use the tool.", "signature": "sig"},
//!       {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
//!     ]},
//!     {"role": "user", "content": [
//!       {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18°C"}
//!     ]}
//!   ]
//! }"#)?;
//! let log = anthropic_to_log(&req, &mut SequentialStamp::default())?.value;
//! assert_eq!(log.len(), 4); // system, user, assistant (one call), tool
//!
//! let openai = log_to_openai(&log);
//! assert_eq!(openai.value.messages[2].tool_calls.as_ref().map(Vec::len), Some(1));
//! // OpenAI has no thinking blocks: the conversion says so instead of dropping it silently.
//! assert!(openai.losses.iter().any(|l| l.what.contains("thinking")));
//! # Ok::<(), ba_protocol::ProtocolError>(())
//! ```
#![deny(missing_docs)]

// The README's example, compiled and run with the documentation tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExample;

pub mod anthropic;
mod approval;
pub mod claude_code;
pub mod codex;
mod content;
pub mod convert;
mod error;
mod fields;
mod file;
mod hook;
mod log;
mod media;
mod message;
pub mod openai;
mod records;
pub mod responses;
mod round;
mod skill;
pub mod stream;
mod structured;
mod tokens;
mod tool;
mod validate;
#[cfg(test)]
mod wire_names;
mod workflow;

pub use approval::{ApprovalDecision, ApprovalMode, Decision, PendingApproval, ToolApproval};
pub use content::{
    CacheControl, Content, ContentBlock, ImageBlock, ImageSource, JsonMap, RedactedThinkingBlock,
    TextBlock, ThinkingBlock, ToolResultBlock, ToolResultContent, ToolUseBlock, join_text, kind_of,
};
pub use error::{ProtocolError, Result};
pub use file::{FileId, FileIdError, FileKind, MAX_FILE_ID_LEN, NamedFile, find_file};
pub use hook::{HookEvent, HookRecord, HookVerdict};
pub use log::{
    FunctionCall, LOG_SCHEMA_VERSION, LlmError, LlmErrorKind, LogEntry, LogRole, LogToolCall, Mode,
};
pub use media::media_type_for;
pub use message::{Message, Role};
pub use records::{
    AttachmentRecord, COMPACTION_VERSION, ChangeKind, Changed, CompactionRecord, ContextRecord,
    DropReason, Dropped, EntryKind, EntryRecords, MemoryChangeRecord, MemoryVersionRef,
    ModelRecord, RewindRecord, ServerInventoryRecord, ServerRecord, SkillActivationRecord, Usage,
    WindowItem, WindowRecord,
};
pub use round::{ConversationRound, RoundStatus};
pub use skill::{
    ContextModifier, DEFAULT_MAX_SKILL_DEPTH, SkillActivationRequest, SkillActivationResult,
    SkillMessage, SkillMessageKind, Visibility,
};
pub use structured::{
    Action, ActionType, ApiMetadata, ApiResponse, CodeBlock, CodeRef, ContentType, FileRef,
    MAX_STRUCTURED_TOOL_CALLS, ResponseStatus, SavedCode, StructuredError, StructuredResponse,
    StructuredToolCall, ToolCallInfo, contains_html, replace_refs,
};
pub use tokens::{ApproxCounter, TokenCounter};
pub use tool::{
    DEFAULT_TOOL_TIMEOUT_MS, InvocationContext, OutputLevel, PermissionLevel, ToolCall,
    ToolErrorCode, ToolErrorKind, ToolResult, ToolResultError, ToolSpec, error_observation,
};
pub use validate::{MAX_INPUT_BYTES, Problem, check_log, check_size, validate_log};
pub use workflow::{WorkflowEventKind, WorkflowRecord};
