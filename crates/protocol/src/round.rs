//! One user turn of the ReAct loop.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::skill::SkillActivationResult;
use crate::tool::ToolCall;

/// Where a round is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RoundStatus {
    /// Not started.
    #[default]
    Pending,
    /// Running.
    InProgress,
    /// Finished with an answer.
    Completed,
    /// Stopped by an error.
    Error,
}

/// One user turn: the request, the loop's thoughts, calls and observations, and the answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ConversationRound {
    /// Round id.
    pub round_id: String,
    /// Conversation id.
    pub conversation_id: String,
    /// What the person asked.
    pub user_message: String,
    /// The model's reasoning, in order.
    #[serde(default)]
    pub thoughts: Vec<String>,
    /// Tool calls, in order.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// One observation per call, in call order.
    #[serde(default)]
    pub tool_observations: Vec<String>,
    /// Skills activated during the round.
    #[serde(default)]
    pub skill_activations: Vec<SkillActivationResult>,
    /// The final answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_answer: Option<String>,
    /// Tokens used (input + output).
    #[serde(default)]
    pub tokens_used: u64,
    /// Wall time.
    #[serde(default)]
    pub latency_ms: u64,
    /// Where the round is.
    #[serde(default)]
    pub status: RoundStatus,
}
