//! Adapters that let the lower crates meet here without depending on each other: the built-in
//! business-analysis tools and the skills crate's `activate_skill` as `ba_tools::Tool`s, the
//! storage crate's data files as the tool runtime's `DataSink`, and a model as the context
//! crate's `Summarizer`.

use std::sync::Arc;

use async_trait::async_trait;
use ba_protocol::tool::PermissionLevel;
use ba_tools::{CallContext, Tool, ToolCapabilities, ToolError, ToolRegistry, ToolsError};
use serde_json::Value;

use ba_context::Summarizer;
use ba_context::strategy::SummaryError;
use ba_protocol::skill::SkillActivationResult;
use ba_protocol::{LogEntry, LogRole};
use ba_skills::{ActivateSkill, ActivationStack, ConversationLocks, Invoker, SkillSet};
use ba_storage::datafile::{DataFileStore, DataOwner};
use ba_tools::DataSink;

use crate::builtin::{BuiltinError, Builtins, ToolSpec, file_reader, query_database};
use crate::model::{ModelClient, ModelRequest};

/// One configured built-in tool, served through the tool runtime.
#[derive(Debug, Clone)]
pub struct BuiltinTool {
    spec: ToolSpec,
    tools: Arc<Builtins>,
}

impl BuiltinTool {
    /// The configured tools of `tools`, one adapter each, in the order of [`Builtins::specs`].
    pub fn all(tools: Arc<Builtins>) -> Vec<Self> {
        tools
            .specs()
            .into_iter()
            .map(|spec| Self {
                spec,
                tools: Arc::clone(&tools),
            })
            .collect()
    }
}

/// Registers every configured built-in tool (`web_search` only when it has a backend).
pub fn register_builtins(
    registry: &mut ToolRegistry,
    tools: Arc<Builtins>,
) -> Result<(), ToolsError> {
    for tool in BuiltinTool::all(tools) {
        registry.register(tool)?;
    }
    Ok(())
}

fn tool_error(err: &BuiltinError) -> ToolError {
    ToolError::new(err.kind(), err.to_string())
}

#[async_trait]
impl Tool for BuiltinTool {
    fn name(&self) -> &str {
        self.spec.name
    }

    fn description(&self) -> &str {
        self.spec.description
    }

    fn input_schema(&self) -> Value {
        self.spec.parameters.clone()
    }

    async fn call(&self, input: Value, _ctx: &CallContext) -> Result<Value, ToolError> {
        match self.tools.call(self.spec.name, input).await {
            Some(Ok(value)) => Ok(value),
            Some(Err(err)) => Err(tool_error(&err)),
            // `all` only builds adapters for configured tools, so this means the set changed.
            None => Err(ToolError::new(
                ba_protocol::ToolErrorKind::ExecutionError,
                format!("`{}` is not configured", self.spec.name),
            )),
        }
    }

    fn capabilities(&self) -> ToolCapabilities {
        // Reading files and read-only queries give the same answer for the same arguments and
        // are safe at the restricted level; running code is not.
        match self.spec.name {
            file_reader::NAME | query_database::NAME => ToolCapabilities::default()
                .with_idempotent(true)
                .with_required_permission(PermissionLevel::Restricted),
            _ => ToolCapabilities::default(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// activate_skill

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

// ---------------------------------------------------------------------------------------------
// Data files

/// The storage crate's [`DataFileStore`] as the tool runtime's [`DataSink`]: spilled tool
/// output is written once per content hash, owned by the call that produced it, and the
/// reference handed back is the file's path, which `file_reader` accepts when the data root is
/// one of its roots.
#[derive(Debug, Clone)]
pub struct DataFileSink {
    store: DataFileStore,
    conversation_id: Option<String>,
}

impl DataFileSink {
    /// A sink writing into `store`.
    pub fn new(store: DataFileStore) -> Self {
        Self {
            store,
            conversation_id: None,
        }
    }

    /// Records `id` as the owner conversation of every file written.
    pub fn for_conversation(mut self, id: impl Into<String>) -> Self {
        self.conversation_id = Some(id.into());
        self
    }
}

#[async_trait]
impl DataSink for DataFileSink {
    async fn put(&self, name: &str, bytes: &[u8]) -> Result<String, ToolsError> {
        // `tool_data/{call}_{hash16}.json`: the file name is the hint, the call id its owner.
        let hint = name.rsplit('/').next().unwrap_or(name);
        let call_id = hint
            .rsplit_once('_')
            .map(|(call, _)| call.to_owned())
            .filter(|c| !c.is_empty());
        let owner = DataOwner {
            call_id,
            conversation_id: self.conversation_id.clone(),
        };
        let store = self.store.clone();
        let hint = hint.to_owned();
        let bytes = bytes.to_vec();
        let meta = tokio::task::spawn_blocking(move || store.put(&hint, &bytes, owner))
            .await
            .map_err(|e| ToolsError::SinkWrite {
                path: name.to_owned(),
                source: std::io::Error::other(e.to_string()),
            })?
            .map_err(|e| ToolsError::SinkWrite {
                path: name.to_owned(),
                source: std::io::Error::other(e.to_string()),
            })?;
        let path = self
            .store
            .resolve(&meta.name)
            .map_err(|e| ToolsError::SinkName {
                name: meta.name.clone(),
                reason: e.to_string(),
            })?;
        Ok(path.display().to_string())
    }
}

// ---------------------------------------------------------------------------------------------
// Summaries

/// The context crate's [`Summarizer`] backed by a model: the entries leaving the window are
/// rendered as a transcript and a (usually cheaper) model writes the summary.
#[derive(Clone)]
pub struct ModelSummarizer {
    client: Arc<dyn ModelClient>,
    model: String,
}

impl std::fmt::Debug for ModelSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSummarizer")
            .field("provider", &self.client.provider())
            .field("model", &self.model)
            .finish()
    }
}

/// The instruction the summarizing model gets.
pub const SUMMARY_INSTRUCTION: &str = "You summarise part of a business-analysis conversation \
so the analysis can go on without it. Keep every figure, table name, file path, query, decision \
and open question; drop pleasantries and repeated tool output. Write plain sentences and short \
lists, no preamble.";

impl ModelSummarizer {
    /// Summaries by `model` through `client`.
    pub fn new(client: Arc<dyn ModelClient>, model: impl Into<String>) -> Self {
        Self {
            client,
            model: model.into(),
        }
    }
}

/// The entries as one plain transcript: `[role] text`, tool calls with their arguments, tool
/// results with the call they answer.
pub fn transcript(entries: &[LogEntry]) -> String {
    let mut out = String::new();
    for e in entries.iter().filter(|e| e.include_in_context) {
        let text = e.text();
        if !text.trim().is_empty() {
            let who = match (&e.role, &e.tool_call_id) {
                (LogRole::Tool, Some(id)) => format!("tool result {id}"),
                (role, _) => role.as_str().to_owned(),
            };
            out.push_str(&format!("[{who}] {}\n", text.trim()));
        }
        for c in e.calls() {
            out.push_str(&format!(
                "[tool call {} {}] {}\n",
                c.id, c.function.name, c.function.arguments
            ));
        }
        if let Some(err) = &e.llm_error {
            out.push_str(&format!("[model error] {}\n", err.message));
        }
    }
    out
}

#[async_trait]
impl Summarizer for ModelSummarizer {
    async fn summarize(
        &self,
        entries: &[LogEntry],
        max_tokens: usize,
    ) -> Result<String, SummaryError> {
        let prompt = format!(
            "Summarise this part of the conversation in at most {max_tokens} tokens.\n\n{}",
            transcript(entries)
        );
        let user = LogEntry::new("summary-request", LogRole::User, "1970-01-01T00:00:00Z")
            .with_text(prompt);
        let request = ModelRequest::new(self.model.clone(), vec![user])
            .with_system(SUMMARY_INSTRUCTION)
            .with_max_tokens(u32::try_from(max_tokens.max(64)).unwrap_or(u32::MAX));
        let response = self.client.complete(&request).await?;
        let text = response.message.text();
        if text.trim().is_empty() {
            return Err("the summarizing model answered with no text".into());
        }
        Ok(text.trim().to_owned())
    }
}
