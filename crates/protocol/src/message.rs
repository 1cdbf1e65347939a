//! Messages: the normalised, provider-neutral form the pipeline works with.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::content::{Content, ContentBlock, ToolResultBlock, ToolUseBlock};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(test, derive(strum::EnumIter))]
pub enum Role {
    /// The person, and tool results (which the Anthropic protocol sends as user messages).
    User,
    /// The model.
    Assistant,
    /// Instructions from the application.
    System,
}

impl Role {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::System => "system",
        }
    }
}

/// One message: a role and its content blocks, with optional metadata.
///
/// Plain-string content is accepted on input and becomes one text block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    /// Stable id of the message, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Who wrote it.
    pub role: Role,
    /// Its blocks, in order.
    #[serde(deserialize_with = "blocks_or_string")]
    #[schemars(with = "Content")]
    pub content: Vec<ContentBlock>,
    /// When it was written (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The conversation it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
}

fn blocks_or_string<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ContentBlock>, D::Error> {
    Content::deserialize(d).map(Content::into_blocks)
}

impl Message {
    /// A message with the given role and blocks and no metadata.
    pub fn new(role: Role, content: Vec<ContentBlock>) -> Self {
        Self {
            id: None,
            role,
            content,
            timestamp: None,
            conversation_id: None,
        }
    }

    /// A user message holding one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, vec![ContentBlock::text(text)])
    }

    /// An assistant message holding one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, vec![ContentBlock::text(text)])
    }

    /// A system message holding one text block.
    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, vec![ContentBlock::text(text)])
    }

    /// Sets the id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The text blocks joined by newlines.
    pub fn text(&self) -> String {
        crate::content::join_text(&self.content)
    }

    /// The tool calls in this message, in order.
    pub fn tool_uses(&self) -> impl Iterator<Item = &ToolUseBlock> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolUse(u) => Some(u),
            _ => None,
        })
    }

    /// The tool results in this message, in order.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResultBlock> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolResult(r) => Some(r),
            _ => None,
        })
    }
}
