//! # ba-protocol
//!
//! The wire and log types of the BA-Agent pipeline, and the conversions between them. This
//! crate does no I/O: it reads and writes JSON text and values, and everything else in the
//! workspace builds on it.
//!
//! - [`content`] — content blocks (P2): text, thinking with signatures, tool use and results,
//!   images; unknown block types survive as raw JSON.
//! - [`message`] — the normalised [`Message`] (P1).
//! - [`log`] — the unified conversation log entry [`LogEntry`] (P9), versioned (P12).
//! - [`anthropic`], [`openai`] — provider wire types, each keeping unknown fields.
//! - [`convert`] — Anthropic ⇄ log ⇄ OpenAI (P3), reporting what a target cannot express.
//! - [`claude_code`] — Claude Code session transcripts → log entries; [`codex`] — Codex
//!   rollouts → log entries.
//! - [`stream`] — SSE parsing and accumulators that rebuild a final message from a stream.
//! - [`tool`], [`skill`], [`round`] — tool calls and results (P4–P6), skill activation (P7),
//!   the ReAct round (P8).
//! - [`structured`] — the structured model response (P10) and the API response (P11).
//! - [`tokens`] — the [`TokenCounter`] seam that `ba-context` implements.
//! - [`validate`] — conversation-level checks (P13): pairs, empty lists, sizes.
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

pub mod anthropic;
pub mod claude_code;
pub mod codex;
pub mod content;
pub mod convert;
pub mod error;
mod fields;
pub mod log;
pub mod media;
pub mod message;
pub mod openai;
mod records;
pub mod round;
pub mod skill;
pub mod stream;
pub mod structured;
pub mod tokens;
pub mod tool;
pub mod validate;

pub use content::{Content, ContentBlock, JsonMap};
pub use error::{ProtocolError, Result};
pub use log::{LOG_SCHEMA_VERSION, LlmError, LlmErrorKind, LogEntry, LogRole, LogToolCall, Mode};
pub use message::{Message, Role};
pub use records::{
    COMPACTION_VERSION, ChangeKind, Changed, CompactionRecord, ContextRecord, DropReason, Dropped,
    EntryKind, EntryRecords, ModelRecord, ServerInventoryRecord, ServerRecord,
    SkillActivationRecord, Usage, WindowItem,
};
pub use tokens::TokenCounter;
pub use tool::{OutputLevel, ToolCall, ToolErrorKind, ToolResult, ToolSpec};
