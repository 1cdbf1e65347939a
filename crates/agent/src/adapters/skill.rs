//! The `activate_skill` meta-tool of the skills crate served as a `ba_tools::Tool`, called
//! through the tool runtime like every tool (timeouts, metrics, permissions, spans).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use ba_protocol::{SkillActivationResult, ToolErrorCode};
use ba_skills::{ActivateSkill, ActivationGuard, ActivationStack, Invoker, SkillSet};
use ba_tools::{CallContext, RunScope, Tool, ToolCapabilities, ToolError};
use serde_json::Value;

/// The `activate_skill` meta-tool of the skills crate served as a `ba_tools::Tool`.
///
/// Within one run (the [`RunScope`] the caller hands to every call) the skills activated so
/// far stay on one [`ActivationStack`]: a skill activated again — the same round or rounds later
/// — is refused as a cycle, and the run's depth limit counts every skill it activated. Outside a
/// run (no scope) each call stands alone. The whole [`SkillActivationResult`] of a call (its
/// modifier included) is kept in the scope for the caller ([`SkillTool::outcome`]); the model
/// reads the activation text, whole.
#[derive(Debug, Clone)]
pub struct SkillTool {
    meta: ActivateSkill,
    /// The description with the catalogue, fixed for the tool's lifetime.
    description: String,
}

/// What the activations of one run share: their stack, the guards that keep each activated
/// skill on it until the run ends, and each call's result until the caller takes it.
#[derive(Debug, Default)]
struct RunActivations {
    stack: ActivationStack,
    state: Mutex<RunActivationsState>,
}

#[derive(Debug, Default)]
struct RunActivationsState {
    active: Vec<ActivationGuard>,
    outcomes: HashMap<String, SkillActivationResult>,
}

impl SkillTool {
    /// The meta-tool over `skills`.
    pub fn new(skills: Arc<SkillSet>) -> Self {
        let meta = ActivateSkill::new(skills);
        Self {
            description: meta.description(),
            meta,
        }
    }

    /// The skills it activates.
    pub fn skills(&self) -> &Arc<SkillSet> {
        self.meta.skills()
    }

    /// The whole result of call `call_id` of the run whose scope is `scope`, taken out of it
    /// (`None` when that call was no activation).
    pub fn outcome(scope: &RunScope, call_id: &str) -> Option<SkillActivationResult> {
        let run = scope.get::<RunActivations>()?;
        let mut state = run.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.outcomes.remove(call_id)
    }

    /// Activates the skill the model's `arguments` name, on the run's stack when there is
    /// one. Every outcome, a refusal included, comes back as a result (`success: false` with
    /// the reason).
    pub fn activate(&self, arguments: &Value, scope: Option<&RunScope>) -> SkillActivationResult {
        let request = match self.meta.parse_arguments(arguments) {
            Ok(r) => r,
            Err(err) => return failed_activation(arguments, err.to_string()),
        };
        let run = scope.map_or_else(
            || Arc::new(RunActivations::default()),
            |s| s.get_or_default::<RunActivations>(),
        );
        let guard = match run.stack.push(&request.skill) {
            Ok(guard) => guard,
            Err(err) => return failed_activation(arguments, err.to_string()),
        };
        let mut result = self.meta.activate_or_report(&request, Invoker::Model);
        if result.success {
            result.activation_id = guard.activation_id().to_owned();
            // The skill stays on the run's stack until the run ends.
            let mut state = run.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.active.push(guard);
        }
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

    fn capabilities(&self) -> ToolCapabilities {
        // Another skill may be activated under any skill's `allowed_tools`, its instructions
        // are read whole, and a refusal is not worth a retry.
        ToolCapabilities::default()
            .with_always_allowed(true)
            .with_verbatim(true)
            .with_max_retries(0)
    }

    async fn call(&self, input: Value, ctx: &CallContext) -> Result<Value, ToolError> {
        let result = self.activate(&input, ctx.scope.as_deref());
        let text = activation_text(&result);
        let success = result.success;
        if let Some(scope) = &ctx.scope {
            let run = scope.get_or_default::<RunActivations>();
            let mut state = run.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.outcomes.insert(ctx.call_id.to_string(), result);
        }
        if !success {
            return Err(
                ToolError::new(ba_protocol::ToolErrorKind::InvalidParameters, text)
                    .with_code(ToolErrorCode::SkillNotActivated),
            );
        }
        Ok(Value::String(text))
    }
}
