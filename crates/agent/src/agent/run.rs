//! The loop of one run.

use std::collections::HashSet;
use std::sync::Arc;

use ba_context::builder::BuildRequest;
use ba_protocol::convert::Stamp;
use ba_protocol::skill::{ContextModifier, SkillActivationResult};
use ba_protocol::structured::{Action, StructuredResponse};
use ba_protocol::tool::{InvocationContext, ToolCall, ToolResult};
use ba_protocol::{Content, LogEntry, LogRole, LogToolCall, Mode};
use ba_storage::{Clock, ConversationId, SystemClock};
use ba_tools::CallOptions;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use super::events::{AgentEvent, InputKind, RunStatus, RunSummary};
use super::response::{Stores, process_final};
use super::{AgentError, Compaction, Inner, Input, ResponseMode, keys, starts_task};
use crate::adapters::activation_text;
use crate::model::{ModelError, ModelRequest, ModelResponse, StreamDelta, ToolSpec};

/// Ids and times of new entries.
struct LiveStamp;

impl Stamp for LiveStamp {
    fn next_id(&mut self) -> String {
        new_id()
    }
    fn now(&mut self) -> String {
        now()
    }
}

fn new_id() -> String {
    format!("e_{}", uuid::Uuid::new_v4().simple())
}

fn now() -> String {
    ba_storage::store::rfc3339(SystemClock.now_ms())
}

/// Why a run stopped early, beyond the model failures the log records.
struct Stop {
    kind: &'static str,
    message: String,
}

impl From<AgentError> for Stop {
    fn from(e: AgentError) -> Self {
        let kind = match &e {
            AgentError::Store(_) => "store",
            AgentError::Context(_) => "context",
            AgentError::Config { .. } | AgentError::Tools(_) => "config",
        };
        Self {
            kind,
            message: e.to_string(),
        }
    }
}

impl From<ba_storage::StorageError> for Stop {
    fn from(e: ba_storage::StorageError) -> Self {
        AgentError::from(e).into()
    }
}

/// An active skill, found in the log.
#[derive(Debug, Clone)]
pub(crate) struct ActiveSkill {
    pub(crate) name: String,
    pub(crate) entry_id: String,
    pub(crate) modifier: ContextModifier,
}

/// The context of one call.
struct Built {
    system: String,
    entries: Vec<LogEntry>,
    usage: f64,
    record: Value,
}

struct Runner {
    inner: Arc<Inner>,
    id: ConversationId,
    tx: UnboundedSender<AgentEvent>,
    log: Vec<LogEntry>,
    last_seq: u64,
    mode: Mode,
    round: u32,
    rounds_run: u32,
    format_retries: u32,
    usage: f64,
}

pub(crate) async fn run(
    inner: Arc<Inner>,
    id: ConversationId,
    input: Input,
    tx: UnboundedSender<AgentEvent>,
) {
    let Some(_running) = inner.runs.try_lock(id.as_str()) else {
        let message = format!("conversation {id} already has a run going");
        let _ = tx.send(AgentEvent::Error {
            round: 0,
            kind: "busy".into(),
            message: message.clone(),
            resumable: false,
        });
        let _ = tx.send(AgentEvent::Finished(RunSummary::failed(
            id.as_str(),
            message,
        )));
        return;
    };
    let mut runner = Runner {
        inner,
        id,
        tx,
        log: Vec::new(),
        last_seq: 0,
        mode: Mode::default(),
        round: 0,
        rounds_run: 0,
        format_retries: 0,
        usage: 0.0,
    };
    let summary = match runner.go(input).await {
        Ok(summary) => summary,
        Err(stop) => {
            runner.emit(AgentEvent::Error {
                round: runner.round,
                kind: stop.kind.to_owned(),
                message: stop.message.clone(),
                resumable: false,
            });
            runner.summary(RunStatus::Failed, None, Some(stop.message))
        }
    };
    runner.emit(AgentEvent::Finished(summary));
}

impl Runner {
    fn emit(&self, event: AgentEvent) {
        // A closed receiver means the caller stopped listening; the run goes on to a
        // consistent point anyway (it is aborted at the next await).
        let _ = self.tx.send(event);
    }

    fn summary(
        &self,
        status: RunStatus,
        answer: Option<(String, ba_protocol::structured::ApiResponse)>,
        error: Option<String>,
    ) -> RunSummary {
        let (final_answer, response) = match answer {
            Some((text, response)) => (Some(text), Some(response)),
            None => (None, None),
        };
        RunSummary {
            conversation_id: self.id.to_string(),
            status,
            rounds: self.rounds_run,
            final_answer,
            response,
            error,
        }
    }

    async fn append(&mut self, entry: LogEntry) -> Result<(), Stop> {
        let seq = self
            .inner
            .store
            .append(&self.id, &entry, Some(self.last_seq))
            .await?;
        self.last_seq = seq;
        self.log.push(entry);
        Ok(())
    }

    fn user_entry(&self, text: &str, kind: Option<&str>) -> LogEntry {
        let mut e = LogEntry::new(new_id(), LogRole::User, now()).with_text(text);
        e.mode = Some(self.mode);
        if let Some(kind) = kind {
            e.extra.insert(keys::KIND.into(), kind.into());
        }
        e
    }

    async fn go(&mut self, input: Input) -> Result<RunSummary, Stop> {
        let meta = self.inner.store.metadata(&self.id).await?;
        self.mode = meta.mode.unwrap_or_default();
        let loaded = self.inner.store.load(&self.id).await?;
        self.last_seq = loaded.entries.last().map_or(0, |s| s.seq);
        self.log = loaded.into_entries();
        let kind = match &input {
            Input::Message(_) => InputKind::Message,
            Input::Continue => InputKind::Continue,
            Input::Resume => InputKind::Resume,
        };
        self.emit(AgentEvent::RunStarted {
            conversation_id: self.id.to_string(),
            mode: self.mode,
            input: kind,
        });
        let mut pending: Vec<LogToolCall> = Vec::new();
        match input {
            Input::Message(text) => {
                if text.trim().is_empty() {
                    return Err(Stop {
                        kind: "input",
                        message: "the message is empty".into(),
                    });
                }
                let e = self.user_entry(&text, None);
                self.append(e).await?;
            }
            Input::Continue => {
                let e = self.user_entry("continue", Some("continue"));
                self.append(e).await?;
            }
            Input::Resume => {
                let Some(last) = self.log.last().cloned() else {
                    return Err(Stop {
                        kind: "input",
                        message: "the conversation is empty: there is nothing to resume".into(),
                    });
                };
                self.round = rounds_in_task(&self.log);
                match last.role {
                    LogRole::Assistant if last.llm_error.is_some() => {
                        let e = self.user_entry("continue", Some("continue"));
                        self.append(e).await?;
                    }
                    LogRole::Assistant if last.calls().is_empty() => {
                        let text = last.text().into_owned();
                        let response = match last.extra.get(keys::API_RESPONSE) {
                            Some(v) => serde_json::from_value(v.clone()).ok(),
                            None => None,
                        }
                        .unwrap_or_else(|| process_final(&text, None, Stores::default()).response);
                        self.emit(AgentEvent::FinalAnswer {
                            round: self.round,
                            text: text.clone(),
                            response: response.clone(),
                        });
                        return Ok(self.summary(RunStatus::Answered, Some((text, response)), None));
                    }
                    _ => pending = unanswered_calls(&self.log),
                }
            }
        }
        if !matches!(kind, InputKind::Resume) {
            self.round = rounds_in_task(&self.log);
        }
        loop {
            if !pending.is_empty() {
                let calls = std::mem::take(&mut pending);
                self.run_calls(&calls).await?;
            }
            if self.rounds_run >= self.inner.settings.max_rounds {
                let message = format!(
                    "the round limit of {} was reached before a final answer; send `continue` to go on",
                    self.inner.settings.max_rounds
                );
                self.emit(AgentEvent::Error {
                    round: self.round,
                    kind: "round_limit".into(),
                    message: message.clone(),
                    resumable: true,
                });
                return Ok(self.summary(RunStatus::RoundLimit, None, Some(message)));
            }
            self.round += 1;
            self.rounds_run += 1;
            match self.round_once().await? {
                Next::Calls(calls) => pending = calls,
                Next::Again => {}
                Next::Done(summary) => return Ok(*summary),
            }
        }
    }

    /// One model call and what follows from its answer.
    async fn round_once(&mut self) -> Result<Next, Stop> {
        let active = active_skills(&self.log);
        let modifier = current_modifier(&active);
        let model = modifier
            .as_ref()
            .and_then(|m| m.model.clone())
            .filter(|m| !m.is_empty() && m != "inherit")
            .unwrap_or_else(|| self.inner.settings.model.clone());
        self.emit(AgentEvent::RoundStarted {
            round: self.round,
            model: model.clone(),
        });
        let built = self.build_context(&active).await?;
        self.usage = built.usage;
        let settings = &self.inner.settings;
        let mut request = ModelRequest::new(model, built.entries)
            .with_system(built.system)
            .with_tools(self.tool_specs(modifier.as_ref()))
            .with_max_tokens(settings.max_tokens)
            .with_stream(settings.stream);
        request.thinking_budget = settings.thinking_budget;
        let round = self.round;
        let tx = self.tx.clone();
        let result = self
            .inner
            .client
            .complete_streaming(&request, &mut |delta| {
                let event = match delta {
                    StreamDelta::Text { text, .. } => AgentEvent::TextDelta { round, text },
                    StreamDelta::Thinking { text, .. } => AgentEvent::ThinkingDelta { round, text },
                    _ => return,
                };
                let _ = tx.send(event);
            })
            .await;
        match result {
            Err(err) => self.model_failed(err, built.record).await,
            Ok(response) => self.answered(response, built.record).await,
        }
    }

    async fn model_failed(&mut self, err: ModelError, record: Value) -> Result<Next, Stop> {
        let mut entry = err.to_log_entry(new_id(), now());
        entry.extra.insert(keys::ROUND.into(), self.round.into());
        entry.extra.insert(keys::CONTEXT.into(), record);
        entry.extra.insert(
            keys::MODEL.into(),
            json!({"provider": self.inner.client.provider()}),
        );
        self.append(entry).await?;
        let message = err.to_string();
        self.emit(AgentEvent::Error {
            round: self.round,
            kind: llm_kind(&err),
            message: message.clone(),
            resumable: true,
        });
        Ok(Next::Done(Box::new(self.summary(
            RunStatus::ModelFailed,
            None,
            Some(message),
        ))))
    }

    async fn answered(&mut self, response: ModelResponse, record: Value) -> Result<Next, Stop> {
        let mut entries = response.to_log_entries(&mut LiveStamp).map_err(|e| Stop {
            kind: "model",
            message: e.to_string(),
        })?;
        let Some(mut entry) = entries.pop() else {
            return Err(Stop {
                kind: "model",
                message: "the model's answer became no log entry".into(),
            });
        };
        entry.mode = Some(self.mode);
        let stop_reason = stop_reason_name(&response);
        entry.extra.insert(keys::ROUND.into(), self.round.into());
        entry
            .extra
            .insert(keys::STOP_REASON.into(), stop_reason.clone().into());
        entry
            .extra
            .insert(keys::RETRIES.into(), response.retries.into());
        entry.extra.insert(
            keys::USAGE.into(),
            serde_json::to_value(response.usage).unwrap_or(Value::Null),
        );
        entry.extra.insert(
            keys::MODEL.into(),
            json!({"provider": self.inner.client.provider(), "name": response.model}),
        );
        entry.extra.insert(keys::CONTEXT.into(), record);
        if !response.problems.is_empty() {
            entry
                .extra
                .insert("problems".into(), json!(response.problems.clone()));
        }
        let model_answered = AgentEvent::ModelAnswered {
            round: self.round,
            stop_reason,
            input_tokens: response.usage.input_tokens,
            output_tokens: response.usage.output_tokens,
            retries: response.retries,
        };
        let text = entry.text().into_owned();
        let mut structured: Option<StructuredResponse> = None;
        if self.inner.settings.response_mode == ResponseMode::Structured && entry.calls().is_empty()
        {
            match StructuredResponse::parse_lenient(&text) {
                Ok(s) => {
                    if let Action::ToolCall { content } = &s.action {
                        let used: HashSet<String> = self
                            .log
                            .iter()
                            .flat_map(|e| e.calls().iter().map(|c| c.id.clone()))
                            .collect();
                        let mut calls = Vec::new();
                        for (n, c) in content.iter().enumerate() {
                            let mut id = c.tool_call_id.trim().to_owned();
                            if id.is_empty()
                                || used.contains(&id)
                                || calls.iter().any(|x: &LogToolCall| x.id == id)
                            {
                                id = format!("call_r{}_{}", self.round, n + 1);
                            }
                            calls.push(LogToolCall::new(id, c.tool_name.clone(), &c.arguments));
                        }
                        entry.tool_calls = Some(calls);
                    }
                    self.emit(AgentEvent::Plan {
                        round: self.round,
                        task_analysis: s.task_analysis.clone(),
                        execution_plan: s.execution_plan.clone(),
                    });
                    structured = Some(s);
                }
                Err(err) if self.format_retries < self.inner.settings.format_retries => {
                    self.format_retries += 1;
                    self.append(entry).await?;
                    self.emit(model_answered);
                    self.emit(AgentEvent::Error {
                        round: self.round,
                        kind: "format".into(),
                        message: format!("the answer is not the structured JSON: {err}"),
                        resumable: true,
                    });
                    let fix = self.user_entry(
                        &format!(
                            "FORMAT_ERROR: your answer could not be read as the JSON format ({err}). \
                             Reply again with one JSON object in the required format."
                        ),
                        Some("format_error"),
                    );
                    self.append(fix).await?;
                    return Ok(Next::Again);
                }
                Err(_) => {}
            }
        }
        let calls = entry.calls().to_vec();
        if !calls.is_empty() {
            self.append(entry).await?;
            self.emit(model_answered);
            return Ok(Next::Calls(calls));
        }
        // A final answer.
        let answer = match &structured {
            Some(StructuredResponse {
                action: Action::Complete { content, .. },
                ..
            }) => content.clone(),
            _ => text,
        };
        let processed = process_final(
            &answer,
            structured.as_ref(),
            Stores {
                code: self.inner.code.as_ref(),
                uploads: self.inner.uploads.as_ref(),
                conversation_id: Some(self.id.as_str()),
            },
        );
        for w in &processed.warnings {
            tracing::warn!(conversation = %self.id, "{w}");
        }
        entry.extra.insert(
            keys::API_RESPONSE.into(),
            serde_json::to_value(&processed.response).unwrap_or(Value::Null),
        );
        if !processed.warnings.is_empty() {
            entry
                .extra
                .insert("warnings".into(), json!(processed.warnings));
        }
        self.append(entry).await?;
        self.emit(model_answered);
        self.emit(AgentEvent::FinalAnswer {
            round: self.round,
            text: answer.clone(),
            response: processed.response.clone(),
        });
        Ok(Next::Done(Box::new(self.summary(
            RunStatus::Answered,
            Some((answer, processed.response)),
            None,
        ))))
    }

    /// The tools offered this round: the runtime's, filtered by the active skill's
    /// `allowed_tools`, and `activate_skill` when skills are configured.
    fn tool_specs(&self, modifier: Option<&ContextModifier>) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = self
            .inner
            .runtime
            .registry()
            .specs()
            .into_iter()
            .filter(|s| modifier.is_none_or(|m| m.allows(&s.name)))
            .map(|s| ToolSpec::new(s.name, s.description, s.input_schema))
            .collect();
        if let Some(skills) = &self.inner.skills {
            use ba_tools::Tool as _;
            specs.push(ToolSpec::new(
                skills.name(),
                skills.description(),
                skills.input_schema(),
            ));
        }
        specs
    }

    /// Runs calls in parallel (at most the runtime's concurrency), appending each result in
    /// call order as soon as it and the ones before it are in.
    async fn run_calls(&mut self, calls: &[LogToolCall]) -> Result<(), Stop> {
        let inner = Arc::clone(&self.inner);
        let modifier = current_modifier(&active_skills(&self.log));
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
        let opts = CallOptions {
            context_usage: self.usage,
            modifier: modifier.as_ref(),
            idempotency_key: None,
        };
        for c in calls {
            self.emit(AgentEvent::ToolCallStarted {
                round: self.round,
                call_id: c.id.clone(),
                name: c.function.name.clone(),
                arguments: arguments_of(c),
            });
        }
        let conversation = self.id.to_string();
        let pending: Vec<_> = calls
            .iter()
            .map(|c| {
                let inner = &inner;
                let ctx = &ctx;
                let conversation = conversation.as_str();
                async move {
                    let arguments = arguments_of(c);
                    if c.function.name == ba_skills::ACTIVATE_SKILL
                        && let Some(skills) = &inner.skills
                    {
                        let start = std::time::Instant::now();
                        let result = skills.activate(&arguments, Some(conversation)).await;
                        let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
                        return (skill_tool_result(&c.id, &result, ms), Some(result));
                    }
                    let call = ToolCall::new(c.id.clone(), c.function.name.clone(), arguments);
                    (inner.runtime.run_with(&call, ctx, opts).await, None)
                }
            })
            .collect();
        let concurrency = inner.runtime.config().max_concurrency.max(1);
        let mut results = futures::stream::iter(pending).buffered(concurrency);
        let mut index = 0;
        while let Some((result, activation)) = results.next().await {
            let Some(call) = calls.get(index) else { break };
            index += 1;
            // The stream borrows locals only, so the runner can append meanwhile.
            self.append(tool_entry(call, &result, activation.as_ref()))
                .await?;
            self.emit(AgentEvent::ToolResult {
                round: self.round,
                call_id: call.id.clone(),
                name: call.function.name.clone(),
                success: result.success,
                observation: result.observation.clone(),
                data_ref: result.data_ref.clone(),
                duration_ms: result.duration_ms,
            });
            if let Some(a) = activation.filter(|a| a.success) {
                self.emit(AgentEvent::SkillActivated {
                    round: self.round,
                    skill: a.skill_name,
                    activation_id: a.activation_id,
                    allowed_tools: a.context_modifier.allowed_tools,
                    model: a.context_modifier.model,
                });
            }
        }
        Ok(())
    }

    /// Builds the context of the next call: the system prompt for the mode with the skills
    /// catalogue (and the reply format in structured mode), the budgeted window, and the
    /// instructions of active skills when a compression took their activation out.
    async fn build_context(&self, active: &[ActiveSkill]) -> Result<Built, Stop> {
        let inner = &self.inner;
        let view = context_view(&self.log);
        let task = view
            .iter()
            .rev()
            .find(|e| starts_task(e))
            .map(|e| e.text().into_owned());
        let request = BuildRequest {
            entries: view,
            mode: self.mode,
            task,
            ..BuildRequest::default()
        };
        let mut system = inner.builder.system_prompt(&request);
        if let Some(skills) = &inner.skills {
            let catalogue = skills.skills().render_catalogue();
            if !catalogue.trim().is_empty() {
                system.push_str(
                    "\n\nSKILLS\nActivate a skill with the activate_skill tool before a task it covers.\n",
                );
                system.push_str(catalogue.trim_end());
            }
        }
        if inner.settings.response_mode == ResponseMode::Structured {
            system.push_str("\n\nRESPONSE FORMAT\n");
            system.push_str(&inner.prompts.structured_format);
        }
        let mut prepared = inner.builder.prepare_entries(&request);
        // Skill instructions are read in full while their activation is in the window.
        for (out, original) in prepared.iter_mut().zip(view) {
            if original.extra.contains_key(keys::SKILL) {
                out.content.clone_from(&original.content);
            }
        }
        let budget = &inner.settings.budget;
        let mut compressed = inner
            .pipeline
            .run(&prepared, &system, budget, &inner.counter)
            .await
            .map_err(AgentError::from)?;
        let mut reinjected = Vec::new();
        if compressed.compressed {
            let kept: HashSet<String> = compressed.window.kept_ids().into_iter().collect();
            let missing: Vec<&ActiveSkill> = active
                .iter()
                .filter(|s| !kept.contains(&s.entry_id))
                .collect();
            if !missing.is_empty() {
                let text = self.reinjection(&missing, &mut reinjected);
                if !text.is_empty() {
                    system.push_str(&text);
                    compressed = inner
                        .pipeline
                        .run(&prepared, &system, budget, &inner.counter)
                        .await
                        .map_err(AgentError::from)?;
                }
            }
            self.emit(AgentEvent::ContextCompressed {
                round: self.round,
                tokens_before: compressed.window.tokens_before,
                tokens_after: compressed.window.tokens(),
                strategies: compressed.window.strategies.clone(),
                dropped: compressed.window.dropped.len(),
                skills_reinjected: reinjected.clone(),
            });
        }
        let record = json!({
            "compressed": compressed.compressed,
            "tokens_before": compressed.window.tokens_before,
            "tokens_after": compressed.window.tokens(),
            "system_tokens": compressed.system_tokens,
            "used": compressed.used,
            "strategies": compressed.window.strategies,
            "dropped": compressed.window.dropped.len(),
            "skills_reinjected": reinjected,
        });
        let usage = if budget.total == 0 {
            0.0
        } else {
            compressed.used as f64 / budget.total as f64
        };
        Ok(Built {
            system,
            entries: compressed.window.entries(),
            usage,
            record,
        })
    }

    /// The instructions of `skills`, each cut to the per-skill cap, all within the total cap.
    fn reinjection(&self, skills: &[&ActiveSkill], names: &mut Vec<String>) -> String {
        let settings = &self.inner.settings;
        let counter = &self.inner.counter;
        let mut left = settings.skill_reinject_total;
        let mut out = String::new();
        for s in skills {
            let Some(entry) = self.log.iter().find(|e| e.id == s.entry_id) else {
                continue;
            };
            let text = entry.text();
            let cap = settings.skill_reinject_tokens.min(left);
            if cap == 0 {
                break;
            }
            let body = cut_to_tokens(&text, cap, |t| counter.text(t));
            let used = counter.text(&body);
            left = left.saturating_sub(used);
            out.push_str(&format!(
                "\n\nACTIVE SKILL {} (instructions kept after compression)\n{}",
                s.name, body
            ));
            names.push(s.name.clone());
        }
        out
    }
}

enum Next {
    Calls(Vec<LogToolCall>),
    Again,
    Done(Box<RunSummary>),
}

/// The longest prefix of `text` (on a line boundary when possible) within `max` tokens.
fn cut_to_tokens(text: &str, max: usize, count: impl Fn(&str) -> usize) -> String {
    if count(text) <= max {
        return text.to_owned();
    }
    let mut out = String::new();
    for line in text.lines() {
        let candidate = format!("{out}{line}\n");
        if count(&candidate) > max {
            break;
        }
        out = candidate;
    }
    out.push_str("[… cut to fit]");
    out
}

fn stop_reason_name(response: &ModelResponse) -> String {
    serde_json::to_value(&response.stop_reason)
        .ok()
        .and_then(|v| match v {
            Value::String(s) => Some(s),
            Value::Object(m) => m
                .values()
                .next()
                .and_then(|v| v.as_str())
                .map(str::to_owned),
            _ => None,
        })
        .unwrap_or_else(|| "other".to_owned())
}

fn llm_kind(err: &ModelError) -> String {
    serde_json::to_value(err.kind())
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "other".to_owned())
}

fn arguments_of(call: &LogToolCall) -> Value {
    call.arguments_json()
        .unwrap_or_else(|_| Value::String(call.function.arguments.clone()))
}

fn skill_tool_result(call_id: &str, result: &SkillActivationResult, ms: u64) -> ToolResult {
    let text = activation_text(result);
    if result.success {
        ToolResult {
            tool_call_id: call_id.to_owned(),
            observation: text,
            output_level: ba_protocol::OutputLevel::Full,
            data_ref: None,
            data_size_bytes: 0,
            data_hash: None,
            data_summary: None,
            success: true,
            error: None,
            retry_count: 0,
            duration_ms: ms,
        }
    } else {
        let mut r = ToolResult::failure(
            call_id,
            ba_protocol::ToolErrorKind::InvalidParameters,
            "SKILL_NOT_ACTIVATED",
            text,
        );
        r.duration_ms = ms;
        r
    }
}

fn tool_entry(
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
        e.extra.insert(keys::DATA_REF.into(), r.clone().into());
    }
    if result.retry_count > 0 {
        e.extra
            .insert(keys::TOOL_RETRIES.into(), result.retry_count.into());
    }
    if let Some(err) = &result.error {
        e.extra
            .insert(keys::ERROR_KIND.into(), err.kind.as_str().into());
    }
    if let Some(a) = activation.filter(|a| a.success) {
        e.extra.insert(
            keys::SKILL.into(),
            json!({
                "name": a.skill_name,
                "activation_id": a.activation_id,
                "allowed_tools": a.context_modifier.allowed_tools,
                "model": a.context_modifier.model,
            }),
        );
    }
    e
}

/// The entries the context is built from: everything after the last compaction, starting with
/// its summary.
pub(crate) fn context_view(log: &[LogEntry]) -> &[LogEntry] {
    let start = log
        .iter()
        .rposition(|e| e.extra.get(keys::KIND).and_then(Value::as_str) == Some("compact_boundary"))
        .unwrap_or(0);
    &log[start..]
}

/// Where the current task starts: its user message (0 when there is none).
fn task_start(log: &[LogEntry]) -> usize {
    log.iter().rposition(starts_task).unwrap_or(0)
}

/// The modifier in force: each field as the latest skill that sets it left it, so the tools
/// offered to the model and the tools the runtime lets run always agree.
fn current_modifier(active: &[ActiveSkill]) -> Option<ContextModifier> {
    active.iter().fold(None, |acc: Option<ContextModifier>, s| {
        let m = &s.modifier;
        if m.allowed_tools.is_none() && m.model.is_none() {
            return acc;
        }
        let mut out = acc.unwrap_or_default();
        if m.allowed_tools.is_some() {
            out.allowed_tools.clone_from(&m.allowed_tools);
        }
        if m.model.is_some() {
            out.model.clone_from(&m.model);
        }
        Some(out)
    })
}

/// Rounds already made for the current task (assistant entries since it started).
fn rounds_in_task(log: &[LogEntry]) -> u32 {
    let start = task_start(log);
    let n = log[start..]
        .iter()
        .filter(|e| e.role == LogRole::Assistant)
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Skills activated since the current task started, oldest first.
pub(crate) fn active_skills(log: &[LogEntry]) -> Vec<ActiveSkill> {
    let start = task_start(log);
    log[start..]
        .iter()
        .filter_map(|e| {
            let s = e.extra.get(keys::SKILL)?;
            let list = |v: Option<&Value>| -> Option<Vec<String>> {
                v?.as_array().map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_owned))
                        .collect()
                })
            };
            Some(ActiveSkill {
                name: s.get("name")?.as_str()?.to_owned(),
                entry_id: e.id.clone(),
                modifier: ContextModifier {
                    allowed_tools: list(s.get("allowed_tools")),
                    model: s.get("model").and_then(Value::as_str).map(str::to_owned),
                    disable_model_invocation: false,
                },
            })
        })
        .collect()
}

/// Calls of the last assistant entry that have no result in the log.
fn unanswered_calls(log: &[LogEntry]) -> Vec<LogToolCall> {
    let Some(pos) = log
        .iter()
        .rposition(|e| e.role == LogRole::Assistant && !e.calls().is_empty())
    else {
        return Vec::new();
    };
    let answered: HashSet<&str> = log[pos..]
        .iter()
        .filter_map(|e| e.tool_call_id.as_deref())
        .collect();
    log[pos]
        .calls()
        .iter()
        .filter(|c| !answered.contains(c.id.as_str()))
        .cloned()
        .collect()
}

pub(crate) async fn compact(inner: &Inner, id: &ConversationId) -> Result<Compaction, AgentError> {
    let _running = inner
        .runs
        .try_lock(id.as_str())
        .ok_or_else(|| AgentError::Config {
            message: format!("conversation {id} has a run going; compact it when the run is over"),
        })?;
    let loaded = inner.store.load(id).await?;
    let last_seq = loaded.entries.last().map_or(0, |s| s.seq);
    let log = loaded.into_entries();
    let view = context_view(&log);
    let entries: Vec<LogEntry> = view
        .iter()
        .filter(|e| e.include_in_context)
        .cloned()
        .collect();
    if entries.is_empty() {
        return Err(AgentError::Context(ba_context::ContextError::NoUserMessage));
    }
    let tokens_before = inner.counter.entries(&entries);
    let summarizer: Arc<dyn ba_context::Summarizer> = inner
        .summarizer
        .clone()
        .unwrap_or_else(|| Arc::new(ba_context::ExtractiveSummarizer));
    let max = (inner.settings.budget.target_tokens() / 4).clamp(200, 4_000);
    let text = summarizer.summarize(&entries, max).await.map_err(|e| {
        ba_context::ContextError::Summary {
            entries: entries.len(),
            message: e.to_string(),
        }
    })?;
    let mut entry = LogEntry::new(new_id(), LogRole::System, now()).with_text(format!(
        "{}\n{text}",
        ba_protocol::claude_code::SUMMARY_PREFIX
    ));
    entry
        .extra
        .insert(keys::KIND.into(), "compact_boundary".into());
    let tokens_after = inner.counter.entry(&entry);
    inner.store.append(id, &entry, Some(last_seq)).await?;
    Ok(Compaction {
        entries: entries.len(),
        tokens_before,
        tokens_after,
    })
}
