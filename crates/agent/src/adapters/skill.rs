//! The `activate_skill` meta-tool of the skills crate served as a `ba_tools::Tool`.

use std::sync::Arc;

use async_trait::async_trait;
use ba_protocol::skill::SkillActivationResult;
use ba_skills::{ActivateSkill, ActivationStack, ConversationLocks, Invoker, SkillSet};
use ba_tools::{CallContext, Tool, ToolError};
use serde_json::Value;

/// The `activate_skill` meta-tool of the skills crate served as a `ba_tools::Tool`.
///
/// An activation holds the conversation's activation lock while it reads the skill (two
/// activations of one conversation never interleave) and pushes its activation id on an
/// [`ActivationStack`] for the time it runs, so cycles and depth are checked. The agent calls
/// [`SkillTool::activate`] directly to get the whole [`SkillActivationResult`] (the modifier
/// included); through the runtime the tool returns the same result as JSON.
#[derive(Debug, Clone)]
pub struct SkillTool {
    meta: ActivateSkill,
    /// The description with the catalogue, fixed for the tool's lifetime.
    description: String,
    locks: Arc<ConversationLocks>,
}

impl SkillTool {
    /// The meta-tool over `skills`.
    pub fn new(skills: Arc<SkillSet>) -> Self {
        let meta = ActivateSkill::new(skills);
        Self {
            description: meta.description(),
            meta,
            locks: Arc::new(ConversationLocks::new(1024)),
        }
    }

    /// The skills it activates.
    pub fn skills(&self) -> &Arc<SkillSet> {
        self.meta.skills()
    }

    /// Activates the skill the model's `arguments` name, for `conversation_id`. Every outcome,
    /// a refusal included, comes back as a result (`success: false` with the reason).
    pub async fn activate(
        &self,
        arguments: &Value,
        conversation_id: Option<&str>,
    ) -> SkillActivationResult {
        let request = match self.meta.parse_arguments(arguments) {
            Ok(r) => r,
            Err(err) => return failed_activation(arguments, err.to_string()),
        };
        let _lock = match conversation_id {
            Some(id) => Some(self.locks.lock(id).await),
            None => None,
        };
        // The frame lives while the skill is read: a nested activation started meanwhile
        // would be checked against it (cycles, depth).
        let stack = ActivationStack::new();
        let guard = match stack.push(&request.skill) {
            Ok(guard) => guard,
            Err(err) => return failed_activation(arguments, err.to_string()),
        };
        let mut result = self.meta.activate_or_report(&request, Invoker::Model);
        if result.success {
            result.activation_id = guard.activation_id().to_owned();
        }
        guard.finish();
        result
    }
}

fn failed_activation(arguments: &Value, error: String) -> SkillActivationResult {
    SkillActivationResult {
        activation_id: String::new(),
        skill_name: arguments
            .get("skill")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        messages: Vec::new(),
        context_modifier: Default::default(),
        success: false,
        error: Some(error),
    }
}

/// The text the model reads for an activation: the visible and hidden messages in order, or
/// the reason it failed.
pub fn activation_text(result: &SkillActivationResult) -> String {
    if !result.success {
        return format!(
            "Skill \"{}\" was not activated: {}",
            result.skill_name,
            result.error.as_deref().unwrap_or("unknown error")
        );
    }
    result
        .messages
        .iter()
        .map(|m| m.content.trim())
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[async_trait]
impl Tool for SkillTool {
    fn name(&self) -> &str {
        self.meta.name()
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.meta.input_schema()
    }

    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        let result = self
            .activate(&input, ctx.invocation.conversation_id.as_deref())
            .await;
        if !result.success {
            return Err(ToolError::new(
                ba_protocol::ToolErrorKind::InvalidParameters,
                activation_text(&result),
            ));
        }
        Ok(Value::String(activation_text(&result)))
    }

    fn default_level(&self) -> Option<ba_protocol::OutputLevel> {
        Some(ba_protocol::OutputLevel::Full)
    }
}
