//! The `activate_skill` meta-tool as a plain type: its name, description and input schema
//! for the model, and the activation that turns a request into the messages to inject and the
//! [`ContextModifier`] for the loop. The `Tool` adapter lives where the tools crate and this one
//! meet (the agent crate), so the middle crates stay independent.

use std::fmt::Write as _;
use std::sync::Arc;

use ba_protocol::{
    ContextModifier, SkillActivationRequest, SkillActivationResult, SkillMessage, SkillMessageKind,
    Visibility,
};
use serde_json::{Value, json};

use crate::activation::check_request;
use crate::error::{Result, SkillsError};
use crate::resource::references;
use crate::set::{Skill, SkillSet};

/// The tool's name.
pub const ACTIVATE_SKILL: &str = "activate_skill";

/// Who asked for an activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invoker {
    /// The model, through the meta-tool: skills with `disable-model-invocation` are refused.
    Model,
    /// The user (a slash command or a UI action): every skill may be activated.
    User,
}

/// The `activate_skill` meta-tool over a shared [`SkillSet`].
#[derive(Debug, Clone)]
pub struct ActivateSkill {
    skills: Arc<SkillSet>,
    max_level3_bytes: usize,
}

impl ActivateSkill {
    /// The tool over `skills`. Level 3 activations inline at most 64 KiB of resources.
    pub fn new(skills: Arc<SkillSet>) -> Self {
        Self {
            skills,
            max_level3_bytes: 64 * 1024,
        }
    }

    /// Sets how many bytes of resources a Level 3 activation may inline.
    pub fn with_max_level3_bytes(mut self, bytes: usize) -> Self {
        self.max_level3_bytes = bytes;
        self
    }

    /// The skills it activates.
    pub fn skills(&self) -> &Arc<SkillSet> {
        &self.skills
    }

    /// `activate_skill`.
    pub fn name(&self) -> &'static str {
        ACTIVATE_SKILL
    }

    /// The description the model sees: what the tool does and the catalogue of skills it may
    /// activate.
    pub fn description(&self) -> String {
        format!(
            "Activate a skill: load its instructions into the conversation before doing a task \
             the skill covers. Pass the skill's name; load_level 1 loads only its description, \
             2 (default) its full instructions, 3 also the files it references.\n{}",
            self.skills.render_catalogue()
        )
    }

    /// The JSON Schema of the arguments: `{"skill": name, "load_level"?: 1..=3}`.
    pub fn input_schema(&self) -> Value {
        let names: Vec<String> = self
            .skills
            .skills()
            .iter()
            .filter(|s| !s.frontmatter.disable_model_invocation)
            .map(|s| s.name.clone())
            .collect();
        json!({
            "type": "object",
            "properties": {
                "skill": {
                    "type": "string",
                    "description": "Name of the skill to activate.",
                    "enum": names,
                },
                "load_level": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 3,
                    "default": 2,
                    "description": "1 = description only, 2 = instructions, 3 = instructions and referenced files.",
                },
            },
            "required": ["skill"],
            "additionalProperties": false,
        })
    }

    /// Reads the model's arguments into a top-level request.
    pub fn parse_arguments(&self, arguments: &Value) -> Result<SkillActivationRequest> {
        let bad = |message: String| SkillsError::InvalidArguments { message };
        let object = arguments
            .as_object()
            .ok_or_else(|| bad("the arguments must be a JSON object".into()))?;
        if let Some(key) = object.keys().find(|k| *k != "skill" && *k != "load_level") {
            return Err(bad(format!("unknown field `{key}`")));
        }
        let skill = match object.get("skill") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
            Some(_) => return Err(bad("field `skill` must be a non-empty string".into())),
            None => return Err(bad("the required field `skill` is missing".into())),
        };
        let mut request = SkillActivationRequest::new(skill);
        match object.get("load_level") {
            None | Some(Value::Null) => {}
            Some(v) => {
                request.load_level = v
                    .as_u64()
                    .and_then(|n| u8::try_from(n).ok())
                    .filter(|n| (1..=3).contains(n))
                    .ok_or_else(|| bad(format!("field `load_level` must be 1, 2 or 3, not {v}")))?;
            }
        }
        Ok(request)
    }

    /// Activates a skill for the model.
    pub fn activate(&self, request: &SkillActivationRequest) -> Result<SkillActivationResult> {
        self.activate_as(request, Invoker::Model)
    }

    /// Activates a skill; on failure returns a result with `success: false` and the error
    /// text, for callers that hand every outcome back to the model.
    pub fn activate_or_report(
        &self,
        request: &SkillActivationRequest,
        invoker: Invoker,
    ) -> SkillActivationResult {
        self.activate_as(request, invoker)
            .unwrap_or_else(|err| SkillActivationResult {
                activation_id: uuid::Uuid::new_v4().to_string(),
                skill_name: request.skill.clone(),
                messages: Vec::new(),
                context_modifier: ContextModifier::default(),
                success: false,
                error: Some(err.to_string()),
            })
    }

    /// Activates a skill for `invoker`: checks the level, the chain (cycles, depth) and the
    /// invocation rule, then builds the messages of the requested level and the modifier.
    pub fn activate_as(
        &self,
        request: &SkillActivationRequest,
        invoker: Invoker,
    ) -> Result<SkillActivationResult> {
        if !(1..=3).contains(&request.load_level) {
            return Err(SkillsError::InvalidLoadLevel {
                level: request.load_level,
            });
        }
        check_request(request)?;
        let skill = self
            .skills
            .get(&request.skill)
            .ok_or_else(|| SkillsError::UnknownSkill {
                name: request.skill.clone(),
            })?;
        if invoker == Invoker::Model && skill.frontmatter.disable_model_invocation {
            return Err(SkillsError::ModelInvocationDisabled {
                skill: skill.name.clone(),
            });
        }
        let mut messages = vec![SkillMessage {
            kind: SkillMessageKind::Metadata,
            content: format!("The \"{}\" skill is loading.", skill.name),
            visibility: Visibility::Visible,
        }];
        if request.load_level == 1 {
            messages.push(hidden(
                SkillMessageKind::Metadata,
                format!("Skill \"{}\": {}", skill.name, skill.description().trim()),
            ));
        } else {
            messages.push(hidden(
                SkillMessageKind::Instruction,
                self.instructions(&skill)?,
            ));
            if request.load_level == 3 {
                messages.extend(self.level3(&skill)?);
            }
        }
        let modifier = ContextModifier {
            allowed_tools: skill.frontmatter.allowed_tools.clone(),
            model: skill.frontmatter.model.clone(),
            disable_model_invocation: skill.frontmatter.disable_model_invocation,
        };
        if let Some(text) = permissions_text(&modifier) {
            messages.push(hidden(SkillMessageKind::Permissions, text));
        }
        Ok(SkillActivationResult {
            activation_id: uuid::Uuid::new_v4().to_string(),
            skill_name: skill.name.clone(),
            messages,
            context_modifier: modifier,
            success: true,
            error: None,
        })
    }

    fn instructions(&self, skill: &Skill) -> Result<String> {
        let body = self.skills.body(&skill.name)?;
        // No folder of the server's disk goes to the model: the skill's files are named relative
        // to the skill and loaded through `load_level` 3.
        let mut text = format!("Skill \"{}\":\n\n{}", skill.name, body.trim());
        let resources = self.skills.resources(&skill.name)?;
        if !resources.is_empty() {
            text.push_str("\n\nFiles of this skill, readable on demand (path relative to the skill folder):\n");
            for r in &resources {
                let _ = writeln!(text, "- {} ({} bytes)", r.path, r.bytes);
            }
        }
        Ok(text)
    }

    /// Level 3: the files the body references, then the other files, as long as they fit the
    /// byte budget; binary, oversized or missing files are named instead.
    fn level3(&self, skill: &Skill) -> Result<Vec<SkillMessage>> {
        let body = self.skills.body(&skill.name)?;
        let listed: Vec<String> = self
            .skills
            .resources(&skill.name)?
            .into_iter()
            .map(|r| r.path)
            .collect();
        let mut order: Vec<String> = references(&body)
            .into_iter()
            .filter(|r| listed.contains(r))
            .collect();
        for path in listed {
            if !order.contains(&path) {
                order.push(path);
            }
        }
        let mut budget = self.max_level3_bytes;
        let mut messages = Vec::new();
        let mut left_out = Vec::new();
        for path in order {
            match self.skills.read_resource(&skill.name, &path) {
                Ok(text) if text.len() <= budget => {
                    budget -= text.len();
                    messages.push(hidden(
                        SkillMessageKind::Instruction,
                        format!("File {path} of skill \"{}\":\n\n{text}", skill.name),
                    ));
                }
                Ok(_) => left_out.push(format!("{path} (over the remaining budget)")),
                Err(err) => left_out.push(format!("{path} ({err})")),
            }
        }
        if !left_out.is_empty() {
            messages.push(hidden(
                SkillMessageKind::Instruction,
                format!(
                    "Files of skill \"{}\" not included:\n- {}",
                    skill.name,
                    left_out.join("\n- ")
                ),
            ));
        }
        Ok(messages)
    }
}

fn hidden(kind: SkillMessageKind, content: String) -> SkillMessage {
    SkillMessage {
        kind,
        content,
        visibility: Visibility::Hidden,
    }
}

fn permissions_text(modifier: &ContextModifier) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(tools) = &modifier.allowed_tools {
        parts.push(if tools.is_empty() {
            "No tools may run while this skill is active.".to_owned()
        } else {
            format!(
                "While this skill is active only these tools may run: {}.",
                tools.join(", ")
            )
        });
    }
    if let Some(model) = &modifier.model {
        parts.push(format!("This skill runs with the model `{model}`."));
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}
