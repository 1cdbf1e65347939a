//! What the log keeps of a hook's run (an entry of kind
//! [`EntryKind::Hook`](crate::EntryKind::Hook)): which event, which command, what it decided.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The points of a run where hooks are called (Claude Code's events, in snake case).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, derive(strum::EnumIter))]
pub enum HookEvent {
    /// Before a tool call runs: may block it or change its arguments.
    PreToolUse,
    /// After a tool call ran: may add feedback the model reads.
    PostToolUse,
    /// Before a user message is sent: may block it or add context.
    UserPromptSubmit,
    /// Before a `/compact`.
    PreCompact,
    /// When the run is about to end with an answer: may send the model back to work.
    Stop,
}

impl HookEvent {
    /// The wire name (`pre_tool_use`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PreToolUse => "pre_tool_use",
            Self::PostToolUse => "post_tool_use",
            Self::UserPromptSubmit => "user_prompt_submit",
            Self::PreCompact => "pre_compact",
            Self::Stop => "stop",
        }
    }

    /// The name Claude Code's hook scripts read in `hook_event_name` (`PreToolUse`, …).
    pub fn claude_name(self) -> &'static str {
        match self {
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::PreCompact => "PreCompact",
            Self::Stop => "Stop",
        }
    }
}

/// What a hook decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HookVerdict {
    /// Go on (perhaps with changed input or added context).
    Allow,
    /// Stop what it guards (exit code 2, or a `block` / `deny` decision); the reason is read
    /// by the model.
    Block,
    /// The hook failed (another exit code, or it could not start): reported, not blocking.
    Failed,
    /// The hook ran past its timeout and was killed: reported, not blocking.
    TimedOut,
}

/// One hook's run, as the log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HookRecord {
    /// The event.
    pub event: HookEvent,
    /// The hook (its command, or a library hook's name).
    pub hook: String,
    /// What it decided.
    pub verdict: HookVerdict,
    /// The tool of a tool event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The call of a tool event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The command's exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Whether it changed the tool's input.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub changed_input: bool,
    /// The reason of a block, or what a failure said (bounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How long it ran.
    pub duration_ms: u64,
}
