//! The `task` tool: a child agent on a sub-task, in its own conversation and context.

use async_trait::async_trait;
use ba_protocol::{Mode, ToolErrorKind};
use ba_storage::NewConversation;
use ba_tools::{CallContext, Tool, ToolCapabilities, ToolError};
use serde_json::{Value, json};

use crate::agent::{Agent, Input};
use crate::events::RunStatus;

/// The tool's name.
pub const TASK_TOOL: &str = "task";

/// Runs a child agent and returns its final report and conversation id as the observation.
#[derive(Debug, Clone)]
pub struct TaskTool {
    child: Agent,
}

impl TaskTool {
    /// The tool over `child`, the agent that runs sub-tasks (it should not offer `task`
    /// itself, or sub-tasks could nest without end).
    pub fn new(child: Agent) -> Self {
        Self { child }
    }

    /// The owner of the calling conversation: a sub-agent's conversation is theirs (its
    /// calls count against their month).
    async fn parent_owner(&self, ctx: &CallContext) -> Option<String> {
        let id = ctx.invocation.conversation_id.as_deref()?;
        let id = ba_storage::ConversationId::new(id).ok()?;
        self.child.store().metadata(&id).await.ok().map(|m| m.owner)
    }
}

#[async_trait]
impl Tool for TaskTool {
    fn name(&self) -> &str {
        TASK_TOOL
    }

    fn description(&self) -> &str {
        "Hand a self-contained sub-task to a sub-agent with its own, empty context. Give it \
         everything it needs in `prompt`; it returns its final report and the id of its \
         conversation (pass that id as `resume` to send it a follow-up)."
    }

    fn capabilities(&self) -> ToolCapabilities {
        // A child run is long, and must not be started twice by a retry (the configuration's
        // `tools.task` still wins).
        ToolCapabilities::default()
            .with_timeout_ms(30 * 60 * 1000)
            .with_max_retries(0)
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "A short title of the sub-task."},
                "prompt": {"type": "string", "description": "The sub-task, self-contained."},
                "resume": {"type": "string", "description": "The conversation id of an earlier sub-agent to send the prompt to."}
            },
            "required": ["prompt"],
            "additionalProperties": false
        })
    }

    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        let bad = |m: String| ToolError::new(ToolErrorKind::InvalidParameters, m);
        let prompt = input
            .get("prompt")
            .and_then(Value::as_str)
            .filter(|p| !p.trim().is_empty())
            .ok_or_else(|| bad("`prompt` must be a non-empty string".into()))?
            .to_owned();
        let failed = |m: String| ToolError::new(ToolErrorKind::ExecutionError, m);
        let id = match input.get("resume").and_then(Value::as_str) {
            Some(id) => {
                ba_storage::ConversationId::new(id).map_err(|e| bad(format!("`resume`: {e}")))?
            }
            None => self
                .child
                .new_conversation(NewConversation {
                    title: input
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    mode: Some(Mode::Agent),
                    parent: ctx.invocation.conversation_id.clone(),
                    owner: self.parent_owner(ctx).await,
                })
                .await
                .map_err(|e| failed(format!("the sub-agent's conversation: {e}")))?,
        };
        let summary = self.child.send(&id, Input::message(prompt)).finish().await;
        match (summary.status, summary.final_answer) {
            (RunStatus::Answered, Some(report)) => Ok(json!({
                "conversation_id": id.as_str(),
                "report": report,
                "rounds": summary.rounds,
            })),
            (status, _) => Err(failed(format!(
                "the sub-agent (conversation {id}) ended without a report ({status:?}): {}; \
                 resume it with this id",
                summary.error.unwrap_or_default()
            ))),
        }
    }

    fn default_level(&self) -> Option<ba_protocol::OutputLevel> {
        Some(ba_protocol::OutputLevel::Full)
    }
}
