//! What a run tells its consumer as it goes: typed events, in order, ending with
//! [`AgentEvent::Finished`].

use ba_context::UsageStatus;
use ba_protocol::ApiResponse;
use ba_protocol::{ApprovalDecision, LogEntry, Mode, PendingApproval};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::error::ErrorKind;

/// One event of a run.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// The run began: a new user message, a `continue`, or a resume from the log.
    RunStarted {
        /// The conversation.
        conversation_id: String,
        /// The mode the run is in.
        mode: Mode,
        /// How the run began.
        input: InputKind,
    },
    /// A round (one model call and its tool calls) begins.
    RoundStarted {
        /// Round number within the task, from 1.
        round: u32,
        /// The model asked (after any skill's model override).
        model: String,
    },
    /// The context went over its trigger and was compressed before the call.
    ContextCompressed {
        /// Round.
        round: u32,
        /// Message tokens before compression.
        tokens_before: usize,
        /// Message tokens after.
        tokens_after: usize,
        /// Strategies applied.
        strategies: Vec<String>,
        /// Entries left out of the window.
        dropped: usize,
        /// Active skills whose instructions were put back into the system prompt because
        /// their activation left the window.
        skills_reinjected: Vec<String>,
    },
    /// How full the context of the round's call is (the page's context meter); sent every round when
    /// the run was started with [`crate::RunOptions::context_status`].
    ContextStatus {
        /// Round.
        round: u32,
        /// Tokens the request uses (system prompt and messages).
        used: usize,
        /// The budget's total.
        total: usize,
        /// `used` as a percentage of `total`.
        percent: f64,
        /// `normal`, `warning` (within ten points of the trigger) or `compressing` (the window
        /// was compressed for this call, or the next build will compress).
        status: ContextLevel,
    },
    /// An entry was appended to the log (durable); sent for every append when the run was
    /// started with [`crate::RunOptions::entry_events`].
    Entry {
        /// Its sequence number in the conversation.
        seq: u64,
        /// When its append returned (ms since the Unix epoch): durable from then on.
        appended_ms: i64,
        /// The entry.
        entry: Box<LogEntry>,
    },
    /// The run was cancelled ([`crate::RunCanceller::cancel`]); what the model had streamed
    /// is in the log as an `llm_error` of kind `cancelled`, so `continue` goes on from it, and
    /// tool calls left without a result are run by a resume.
    Cancelled {
        /// Round.
        round: u32,
        /// Whether a model call was cut and its partial answer appended.
        partial_saved: bool,
    },
    /// More thinking streamed.
    ThinkingDelta {
        /// Round.
        round: u32,
        /// The text.
        text: String,
    },
    /// More answer text streamed.
    TextDelta {
        /// Round.
        round: u32,
        /// The text.
        text: String,
    },
    /// The model answered (the answer is in the log).
    ModelAnswered {
        /// Round.
        round: u32,
        /// Why it stopped (`end_turn`, `tool_use`, …).
        stop_reason: String,
        /// Input tokens billed.
        input_tokens: u64,
        /// Output tokens.
        output_tokens: u64,
        /// Retries of the call.
        retries: u32,
    },
    /// A structured answer's analysis and plan (structured mode).
    Plan {
        /// Round.
        round: u32,
        /// The model's reading of the task.
        task_analysis: String,
        /// Its plan across rounds.
        execution_plan: String,
    },
    /// A tool call is about to run.
    ToolCallStarted {
        /// Round.
        round: u32,
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        arguments: Value,
    },
    /// A tool call finished and its result is in the log.
    ToolResult {
        /// Round.
        round: u32,
        /// Call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// Whether it succeeded.
        success: bool,
        /// What the model reads.
        observation: String,
        /// Where spilled data went.
        data_ref: Option<String>,
        /// Wall time.
        duration_ms: u64,
    },
    /// A skill was activated; its modifier now applies.
    SkillActivated {
        /// Round.
        round: u32,
        /// The skill.
        skill: String,
        /// The activation id.
        activation_id: String,
        /// Tools the skill allows (`None`: all).
        allowed_tools: Option<Vec<String>>,
        /// The model the skill asks for.
        model: Option<String>,
    },
    /// The answer is final.
    FinalAnswer {
        /// Round.
        round: u32,
        /// The answer as the model wrote it.
        text: String,
        /// The processed answer (placeholders, code and file lists, HTML flag).
        response: ApiResponse,
    },
    /// Something went wrong; `resumable` failures are in the log and `continue` resumes.
    Error {
        /// Round (0 before the first).
        round: u32,
        /// What kind of failure.
        kind: ErrorKind,
        /// What happened.
        message: String,
        /// Whether `continue` (or a resume) can pick up from here.
        resumable: bool,
    },
    /// Calls of the round wait for a person (recorded in the log); the run ends
    /// `awaiting_approval` after this, and a decision ([`crate::Input::Decide`]) goes on.
    ApprovalRequested {
        /// Round.
        round: u32,
        /// Every call that waits now.
        calls: Vec<PendingApproval>,
    },
    /// A person's decision about a waiting call was recorded.
    ApprovalDecided {
        /// Round.
        round: u32,
        /// The decision as the log keeps it.
        decision: ApprovalDecision,
    },
    /// A workflow run started (its user entry is in the log).
    WorkflowStarted {
        /// The workflow.
        workflow: String,
        /// The workflow run's id (its entries' `run_id`).
        workflow_run_id: String,
        /// The inputs, read by type.
        inputs: serde_json::Map<String, serde_json::Value>,
        /// The nodes, `{id, title}`, in the definition's order.
        nodes: Vec<WorkflowNodeInfo>,
    },
    /// A node of a workflow run became active.
    NodeStarted {
        /// The workflow run.
        workflow_run_id: String,
        /// The node.
        node: String,
        /// Its title.
        title: String,
    },
    /// A node's outputs were accepted.
    NodeCompleted {
        /// The workflow run.
        workflow_run_id: String,
        /// The node.
        node: String,
        /// Its outputs.
        outputs: serde_json::Map<String, serde_json::Value>,
        /// The node that comes next (absent after the last).
        next: Option<String>,
    },
    /// The last node of a workflow run was completed; only the run directive and the post-run
    /// protocol remain, and the conversation goes on about the results.
    WorkflowCompleted {
        /// The workflow.
        workflow: String,
        /// The workflow run.
        workflow_run_id: String,
        /// Every node's outputs, by node.
        outputs: serde_json::Map<String, serde_json::Value>,
    },
    /// The run is over; always the last event.
    Finished(RunSummary),
}

/// A node of a workflow as events name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct WorkflowNodeInfo {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
}

/// Where a context's usage stands (the page's context meter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContextLevel {
    /// Below the compression trigger by more than ten points.
    Normal,
    /// Within ten points of the trigger.
    Warning,
    /// Compressed for this call, or over the trigger.
    Compressing,
}

impl From<UsageStatus> for ContextLevel {
    fn from(s: UsageStatus) -> Self {
        match s {
            UsageStatus::Normal => Self::Normal,
            UsageStatus::Warning => Self::Warning,
            UsageStatus::Compressing => Self::Compressing,
        }
    }
}

/// How a run began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// A new user message.
    Message,
    /// `continue` after a failure.
    Continue,
    /// A resume from the log alone (after a crash or a cancellation).
    Resume,
    /// Decisions about calls that waited for a person.
    Decide,
    /// The start of a workflow run.
    Workflow,
}

impl InputKind {
    /// The wire name (as serialised).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Message => "message",
            Self::Continue => "continue",
            Self::Resume => "resume",
            Self::Decide => "decide",
            Self::Workflow => "workflow",
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// A final answer was given.
    Answered,
    /// The round limit was reached first.
    RoundLimit,
    /// A spending cap was reached before the next model call (the call in flight finished);
    /// everything so far is in the log and `continue` goes on once the cap is raised or the
    /// month turns.
    BudgetReached,
    /// The model failed; the failure is in the log and `continue` resumes.
    ModelFailed,
    /// Something else failed (store, context, configuration); see the error event.
    Failed,
    /// Asked to stop: it did at the end of a round, with everything so far in the log.
    Stopped,
    /// Cancelled: the model call in flight was cut (its partial answer appended) or the tool
    /// calls under way were left to a resume.
    Cancelled,
    /// Calls wait for a person's decision (in the log); nothing runs until one comes.
    AwaitingApproval,
}

impl RunStatus {
    /// The wire name (as serialised).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Answered => "answered",
            Self::RoundLimit => "round_limit",
            Self::BudgetReached => "budget_reached",
            Self::ModelFailed => "model_failed",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
            Self::Cancelled => "cancelled",
            Self::AwaitingApproval => "awaiting_approval",
        }
    }
}

/// The end of a run.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RunSummary {
    /// The conversation.
    pub conversation_id: String,
    /// How it ended.
    pub status: RunStatus,
    /// Rounds run (model calls made) by this run.
    pub rounds: u32,
    /// The final answer, when there is one.
    pub final_answer: Option<String>,
    /// The processed final answer.
    pub response: Option<ApiResponse>,
    /// The error, when the run failed.
    pub error: Option<String>,
}

impl RunSummary {
    /// A run of `conversation_id` that failed before any round, with `error`.
    pub fn failed(conversation_id: impl Into<String>, error: impl Into<String>) -> Self {
        Self {
            conversation_id: conversation_id.into(),
            status: RunStatus::Failed,
            rounds: 0,
            final_answer: None,
            response: None,
            error: Some(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{InputKind, RunStatus};

    #[test]
    fn an_input_kind_name_is_its_wire_name() {
        for kind in [InputKind::Message, InputKind::Continue, InputKind::Resume] {
            assert_eq!(
                serde_json::to_value(kind).ok(),
                Some(serde_json::Value::from(kind.as_str()))
            );
        }
    }

    #[test]
    fn a_run_status_name_is_its_wire_name() {
        for status in [
            RunStatus::Answered,
            RunStatus::RoundLimit,
            RunStatus::BudgetReached,
            RunStatus::ModelFailed,
            RunStatus::Failed,
            RunStatus::Stopped,
            RunStatus::Cancelled,
        ] {
            assert_eq!(
                serde_json::to_value(status).ok(),
                Some(serde_json::Value::from(status.as_str()))
            );
        }
    }
}
