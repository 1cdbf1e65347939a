//! The tool calls of a round: the tools offered to the model, and the calls run in parallel
//! through the runtime — every one, `activate_skill` included — each result appended in call
//! order as soon as it and the ones before it are in.

use std::collections::HashMap;
use std::sync::Arc;

use ba_protocol::SkillActivationResult;
use ba_protocol::{Content, LogEntry, LogRole, LogToolCall, SkillActivationRecord, ToolSpec};
use ba_protocol::{InvocationContext, ToolCall, ToolResult};
use ba_tools::{CallOptions, ConversationFiles};
use futures::StreamExt;
use serde_json::Value;

use super::{Runner, Stop};
use crate::adapters::{CompleteNodeTool, SkillTool};
use crate::events::AgentEvent;
use crate::ids::{new_id, now};

impl Runner {
    /// Runs calls in parallel (at most the runtime's concurrency), appending each result in
    /// call order as soon as it and the ones before it are in. A call in `edits` runs with
    /// the arguments a person (or a hook) gave, and its result says so. The operator's
    /// post_tool_use hooks see each result before it is appended; what they say is added to
    /// it.
    pub(super) async fn run_calls(
        &mut self,
        calls: &[LogToolCall],
        edits: &HashMap<String, (Value, &'static str)>,
    ) -> Result<(), Stop> {
        let args = |c: &LogToolCall| given_arguments(c, edits);
        let inner = Arc::clone(&self.inner);
        let runtime = Arc::clone(&self.kit.tools.runtime);
        let mut modifier = self.history.modifier();
        if let Some(w) = &self.workflow {
            modifier = w.restrict(modifier);
        }
        let ctx = InvocationContext {
            caller_id: "agent".into(),
            permission_level: inner.settings.permission_level,
            storage_dir: inner
                .settings
                .storage_dir
                .as_ref()
                .map(|p| p.display().to_string()),
            conversation_id: Some(self.id.to_string()),
            ..InvocationContext::default()
        };
        let files: Option<Arc<dyn ConversationFiles>> = self
            .kit
            .files
            .as_ref()
            .map(|f| Arc::clone(f) as Arc<dyn ConversationFiles>);
        let scope = Arc::clone(&self.kit.scope);
        crate::adapters::MemoryRunState::set_run(&scope, self.options.run_id.as_deref());
        let opts = CallOptions {
            context_usage: self.usage,
            modifier: modifier.as_ref(),
            idempotency_key: None,
            files: files.as_ref(),
            scope: Some(&scope),
        };
        for c in calls {
            self.emit(AgentEvent::ToolCallStarted {
                round: self.round,
                call_id: c.id.clone(),
                name: c.function.name.clone(),
                arguments: args(c),
            });
        }
        let pending: Vec<_> = calls
            .iter()
            .map(|c| {
                let call = ToolCall::new(c.id.clone(), c.function.name.clone(), args(c));
                let runtime = &runtime;
                let ctx = &ctx;
                async move { runtime.run_with(&call, ctx, opts).await }
            })
            .collect();
        let concurrency = runtime.config().max_concurrency.max(1);
        let mut results = futures::stream::iter(pending).buffered(concurrency);
        let mut index = 0;
        while let Some(result) = results.next().await {
            let Some(call) = calls.get(index) else { break };
            index += 1;
            self.record_result(call, result, edits, &scope).await?;
        }
        Ok(())
    }

    /// One call's result, in: its full output kept, a person's edit and the post_tool_use
    /// hooks noted on it, appended, reported; a completed workflow node or an activated skill
    /// taken in.
    async fn record_result(
        &mut self,
        call: &LogToolCall,
        mut result: ToolResult,
        edits: &HashMap<String, (Value, &'static str)>,
        scope: &ba_tools::RunScope,
    ) -> Result<(), Stop> {
        // A workflow node the call completed, whichever tool it was.
        let completion = CompleteNodeTool::outcome(scope, &call.id);
        // What a skill activation did beyond its text (its modifier), whichever tool it was.
        let activation = SkillTool::outcome(scope, &call.id);
        // The tools a tool search found, sent from the next request on.
        let found = crate::adapters::DeferredTools::found(scope, &call.id);
        let memory = crate::adapters::MemoryRunState::changed(scope, &call.id);
        self.keep_full_output(call, &mut result).await;
        if let Some((edited, by)) = edits.get(&call.id) {
            result.observation = format!(
                "[run with the arguments {by} changed: {edited}]\n{}",
                result.observation
            );
        }
        let said = self
            .hooks(
                ba_protocol::HookEvent::PostToolUse,
                Some(call),
                serde_json::json!({
                    "tool_name": call.function.name,
                    "tool_input": given_arguments(call, edits),
                    "tool_response": {"success": result.success, "observation": result.observation},
                }),
            )
            .await?;
        for c in said.context.iter().chain(said.blocked.iter()) {
            result.observation = format!("{}\n\n[hook: {c}]", result.observation);
        }
        let mut entry = tool_entry(call, &result, activation.as_ref());
        entry.records.workflow = completion.clone().map(Box::new);
        entry.records.tools_found = found.filter(|f| !f.is_empty());
        entry.records.memory_change = memory.map(|m| ba_protocol::MemoryChangeRecord {
            command: m.command,
            versions: m
                .versions
                .into_iter()
                .map(|(path, version)| ba_protocol::MemoryVersionRef { path, version })
                .collect(),
        });
        self.append(entry).await?;
        self.emit(AgentEvent::ToolResult {
            round: self.round,
            call_id: call.id.clone(),
            name: call.function.name.clone(),
            success: result.success,
            observation: result.observation.clone(),
            data_ref: result.data_ref.clone(),
            duration_ms: result.duration_ms,
        });
        if let Some(record) = &completion {
            self.node_completed(record);
        }
        if let Some(a) = activation.filter(|a| a.success) {
            self.emit(AgentEvent::SkillActivated {
                round: self.round,
                skill: a.skill_name,
                activation_id: a.activation_id,
                allowed_tools: a.context_modifier.allowed_tools,
                model: a.context_modifier.model,
            });
        }
        Ok(())
    }
}

impl Runner {
    /// A result longer than the window shows whole is also kept — as a data file of the
    /// conversation (`data_001`) when the run has a workspace, else in the data sink — so a
    /// later preview or trace of it can name where the full output is (and `file_reader` can
    /// read it back). The observation itself is unchanged. A failed write only costs the
    /// reference.
    async fn keep_full_output(&self, call: &LogToolCall, result: &mut ToolResult) {
        let limit = self.inner.settings.builder.tool_preview_chars;
        if result.data_ref.is_some() || result.observation.chars().count() <= limit {
            return;
        }
        if let Some(files) = &self.kit.files {
            let name = format!("{}_output.txt", call.function.name);
            match files.add_data(&name, result.observation.as_bytes()).await {
                Ok(info) => result.data_ref = Some(info.id.into()),
                Err(e) => tracing::warn!(call = %call.id, "the full output was not kept: {e}"),
            }
            return;
        }
        let Some(sink) = &self.inner.sink else {
            return;
        };
        let mut hasher = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&result.observation, &mut hasher);
        let name = format!(
            "tool_data/{}_{:016x}.txt",
            call.id,
            std::hash::Hasher::finish(&hasher)
        );
        match sink.put(&name, result.observation.as_bytes()).await {
            Ok(path) => result.data_ref = Some(path),
            Err(e) => tracing::warn!(call = %call.id, "the full output was not kept: {e}"),
        }
    }
}

/// The tools offered to the model (see [`Runner::tool_specs`]) by a run starting now.
pub(super) fn tool_specs_of(inner: &crate::parts::Inner, mode: ba_protocol::Mode) -> Vec<ToolSpec> {
    inner.tools.for_run().specs(mode)
}

/// The arguments `call` runs with: a person's (or a hook's) edit, else the model's.
fn given_arguments(call: &LogToolCall, edits: &HashMap<String, (Value, &'static str)>) -> Value {
    edits
        .get(&call.id)
        .map_or_else(|| arguments_of(call), |e| e.0.clone())
}

pub(super) fn arguments_of(call: &LogToolCall) -> Value {
    call.arguments_json()
        .unwrap_or_else(|_| Value::String(call.function.arguments.clone()))
}

pub(super) fn tool_entry(
    call: &LogToolCall,
    result: &ToolResult,
    activation: Option<&SkillActivationResult>,
) -> LogEntry {
    let mut e = LogEntry::new(new_id(), LogRole::Tool, now());
    e.content = Some(Content::Text(result.observation.clone()));
    e.tool_call_id = Some(call.id.clone());
    e.tool_name = Some(call.function.name.clone());
    e.duration_ms = Some(result.duration_ms);
    if !result.success {
        e.is_error = Some(true);
    }
    if let Some(r) = &result.data_ref {
        e.records.data_ref = Some(r.clone());
    }
    if result.retry_count > 0 {
        e.records.tool_retries = Some(result.retry_count);
    }
    if let Some(err) = &result.error {
        e.records.error_kind = Some(err.kind.as_str().to_owned());
    }
    if let Some(a) = activation.filter(|a| a.success) {
        let record = SkillActivationRecord {
            name: a.skill_name.clone(),
            activation_id: a.activation_id.clone(),
            allowed_tools: a.context_modifier.allowed_tools.clone(),
            model: a.context_modifier.model.clone(),
        };
        e.records.skill = Some(record);
    }
    e
}
