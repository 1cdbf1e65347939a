//! Skill activation types.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a skill message carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SkillMessageKind {
    /// Level-1 metadata.
    Metadata,
    /// The skill's instructions (its body).
    Instruction,
    /// Permission changes.
    Permissions,
}

/// Whether a person sees an injected message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    /// Injected as a user message the UI shows.
    #[default]
    Visible,
    /// Injected as a meta message the UI does not show.
    Hidden,
}

/// A message a skill activation injects into the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SkillMessage {
    /// What it carries.
    #[serde(rename = "type")]
    pub kind: SkillMessageKind,
    /// The text.
    pub content: String,
    /// Who sees it.
    #[serde(default)]
    pub visibility: Visibility,
}

/// How an active skill changes the loop.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ContextModifier {
    /// When set, only these tools may run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// A model to use while the skill is active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model may not activate this skill by itself.
    #[serde(default)]
    pub disable_model_invocation: bool,
}

impl ContextModifier {
    /// Whether `tool` may run under this modifier.
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed_tools
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| t == tool))
    }
}

/// The default maximum nesting of skill activations.
pub const DEFAULT_MAX_SKILL_DEPTH: u32 = 3;

fn default_max_depth() -> u32 {
    DEFAULT_MAX_SKILL_DEPTH
}

fn default_load_level() -> u8 {
    2
}

/// A request to activate a skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SkillActivationRequest {
    /// The skill's name.
    pub skill: String,
    /// Disclosure level to load, 1..=3 (default 2).
    #[serde(default = "default_load_level")]
    pub load_level: u8,
    /// Current nesting depth.
    #[serde(default)]
    pub depth: u32,
    /// Maximum nesting depth (default 3).
    #[serde(default = "default_max_depth")]
    pub max_depth: u32,
    /// Skills already active, outermost first.
    #[serde(default)]
    pub chain: Vec<String>,
}

impl SkillActivationRequest {
    /// A top-level request at level 2.
    pub fn new(skill: impl Into<String>) -> Self {
        Self {
            skill: skill.into(),
            load_level: default_load_level(),
            depth: 0,
            max_depth: DEFAULT_MAX_SKILL_DEPTH,
            chain: Vec::new(),
        }
    }
}

/// The result of activating a skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SkillActivationResult {
    /// Id of this activation, used to pop it.
    pub activation_id: String,
    /// The skill's name.
    pub skill_name: String,
    /// Messages to inject, at the requested level.
    pub messages: Vec<SkillMessage>,
    /// How the loop changes while the skill is active.
    pub context_modifier: ContextModifier,
    /// Whether activation succeeded.
    pub success: bool,
    /// Why it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
