//! A person in the loop: the approval policy of tools, the calls that wait for a decision
//! and the decisions, as the log records them (entries of kind
//! [`EntryKind::ApprovalRequest`](crate::EntryKind::ApprovalRequest) and
//! [`EntryKind::ApprovalDecision`](crate::EntryKind::ApprovalDecision)). A pause is durable
//! because it is nothing but these entries: whoever reads the log knows which calls wait and
//! what was decided.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How much a person is asked before a tool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, derive(strum::EnumIter))]
pub enum ToolApproval {
    /// Runs without asking.
    #[default]
    Never,
    /// Asked in the `ask` mode; runs without asking in the `auto` mode.
    Ask,
    /// Asked in every mode, every time (even after "approve for the conversation").
    Always,
}

impl ToolApproval {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Never => "never",
            Self::Ask => "ask",
            Self::Always => "always",
        }
    }
}

/// A session's approval mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, derive(strum::EnumIter))]
pub enum ApprovalMode {
    /// Ask for every call whose policy is `ask` or `always`.
    #[default]
    Ask,
    /// Approve what the policy allows: ask only for `always`.
    Auto,
    /// Refuse every call of a tool that writes; ask as in `ask` for the others.
    ReadOnly,
}

impl ApprovalMode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Auto => "auto",
            Self::ReadOnly => "read_only",
        }
    }
}

/// A tool call waiting for a person's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PendingApproval {
    /// The call's id (what a decision names).
    pub call_id: String,
    /// The tool called.
    pub tool: String,
    /// The arguments as the model wrote them.
    pub arguments: Value,
    /// The id of the run that paused on it, when the caller gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// What a person decided about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, derive(strum::EnumIter))]
pub enum Decision {
    /// Run it.
    Approve,
    /// Run it, and every later call of the same tool in this conversation without asking
    /// (a tool whose policy is `always` is still asked).
    ApproveForConversation,
    /// Do not run it; the model reads the reason as the call's error.
    Reject,
    /// Run it with other arguments.
    Edit,
}

impl Decision {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::ApproveForConversation => "approve_for_conversation",
            Self::Reject => "reject",
            Self::Edit => "edit",
        }
    }

    /// Whether the call runs.
    pub fn runs(self) -> bool {
        !matches!(self, Self::Reject)
    }
}

/// A decision about one waiting call, as recorded in the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalDecision {
    /// The call decided on.
    pub call_id: String,
    /// The tool of the call.
    pub tool: String,
    /// What was decided.
    pub decision: Decision,
    /// Why (a rejection's reason reaches the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// An edit's arguments (a JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
}
