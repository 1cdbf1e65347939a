//! What the model said: a failure (appended with its partial output), tool calls (native, or
//! read from a structured answer), a malformed structured answer (sent back for a fix), or the
//! final answer (processed into the API response).

use ba_model::{ModelError, ModelResponse};
use ba_protocol::{Action, StructuredResponse};
use ba_protocol::{ContextRecord, EntryKind, LogEntry, LogToolCall, ModelRecord};
use serde_json::Value;

use super::{Next, Partial, Runner, Stop};
use crate::error::ErrorKind;
use crate::events::{AgentEvent, RunStatus};
use crate::ids::{LiveStamp, new_id, now};
use crate::response::{Files, outputs_since, process_final};
use crate::settings::ResponseMode;

impl Runner {
    pub(super) async fn model_failed(
        &mut self,
        err: ModelError,
        record: ContextRecord,
    ) -> Result<Next, Stop> {
        let mut entry = err.to_log_entry(new_id(), now());
        entry.records.round = Some(self.round);
        entry.records.context = Some(record);
        entry.records.model = Some(ModelRecord {
            provider: self.inner.client.provider().to_owned(),
            name: None,
        });
        self.append(entry).await?;
        let message = err.to_string();
        self.emit(AgentEvent::Error {
            round: self.round,
            kind: err.kind().into(),
            message: message.clone(),
            resumable: true,
        });
        Ok(Next::Done(Box::new(self.summary(
            RunStatus::ModelFailed,
            None,
            Some(message),
        ))))
    }

    /// The call was cancelled: what it streamed goes to the log as an `llm_error` of kind
    /// `cancelled` (so `continue` resumes from it), and the run ends.
    pub(super) async fn call_cancelled(
        &mut self,
        partial: Partial,
        record: ContextRecord,
    ) -> Result<Next, Stop> {
        let mut entry =
            ba_protocol::LogEntry::new(new_id(), ba_protocol::LogRole::Assistant, now());
        let streamed = if partial.text.is_empty() {
            partial.thinking
        } else {
            partial.text
        };
        entry.llm_error = Some(ba_protocol::LlmError {
            kind: ba_protocol::LlmErrorKind::Cancelled,
            message: "the user cancelled the call".to_owned(),
            partial_output: (!streamed.is_empty()).then_some(streamed),
        });
        entry.mode = Some(self.mode);
        entry.records.round = Some(self.round);
        entry.records.context = Some(record);
        entry.records.model = Some(ModelRecord {
            provider: self.inner.client.provider().to_owned(),
            name: None,
        });
        self.append(entry).await?;
        Ok(Next::Done(Box::new(self.cancelled(true))))
    }

    /// What follows an answer of the model: its calls, a format correction, or the end.
    pub(super) async fn answered(
        &mut self,
        response: ModelResponse,
        record: ContextRecord,
    ) -> Result<Next, Stop> {
        let (mut entry, model_answered) = self.answer_entry(&response, record)?;
        let text = entry.text().into_owned();
        let structured = match self.read_structured(&mut entry, &text) {
            Ok(structured) => structured,
            Err(err) => return self.correct_format(entry, model_answered, &err).await,
        };
        let calls = entry.calls().to_vec();
        if !calls.is_empty() {
            self.append(entry).await?;
            self.emit(model_answered);
            return Ok(Next::Calls(calls));
        }
        self.final_answer(entry, model_answered, text, structured)
            .await
    }

    /// The log entry of an answer, with the loop's records of the call, and the event that
    /// reports it.
    fn answer_entry(
        &self,
        response: &ModelResponse,
        record: ContextRecord,
    ) -> Result<(LogEntry, AgentEvent), Stop> {
        let mut entries = response.to_log_entries(&mut LiveStamp).map_err(|e| Stop {
            kind: ErrorKind::Model,
            message: e.to_string(),
        })?;
        let Some(mut entry) = entries.pop() else {
            return Err(Stop {
                kind: ErrorKind::Model,
                message: "the model's answer became no log entry".into(),
            });
        };
        entry.mode = Some(self.mode);
        let stop_reason = stop_reason_name(response);
        let records = &mut entry.records;
        records.round = Some(self.round);
        records.stop_reason = Some(stop_reason.clone());
        records.retries = Some(response.retries);
        records.usage = Some(response.usage);
        records.model = Some(ModelRecord {
            provider: self.inner.client.provider().to_owned(),
            name: Some(response.model.clone()),
        });
        records.context = Some(record);
        if !response.problems.is_empty() {
            records.problems = Some(response.problems.clone());
        }
        let event = AgentEvent::ModelAnswered {
            round: self.round,
            stop_reason,
            input_tokens: response.usage.input_tokens,
            output_tokens: response.usage.output_tokens,
            retries: response.retries,
        };
        Ok((entry, event))
    }

    /// In structured mode, the answer read as the structured JSON (its calls put on the entry,
    /// its plan reported); `Err` with why when it is not that JSON and a correction may still
    /// be asked for. `None` in native mode, for native calls, and once the corrections are
    /// spent (the answer is then taken as plain text).
    fn read_structured(
        &mut self,
        entry: &mut LogEntry,
        text: &str,
    ) -> Result<Option<StructuredResponse>, String> {
        if self.inner.settings.response_mode != ResponseMode::Structured
            || !entry.calls().is_empty()
        {
            return Ok(None);
        }
        match StructuredResponse::parse_lenient(text) {
            Ok(s) => {
                if let Action::ToolCall { content } = &s.action {
                    entry.tool_calls = Some(self.structured_calls(content));
                }
                self.emit(AgentEvent::Plan {
                    round: self.round,
                    task_analysis: s.task_analysis.clone(),
                    execution_plan: s.execution_plan.clone(),
                });
                Ok(Some(s))
            }
            Err(err) if self.format_retries < self.inner.settings.format_retries => {
                Err(err.to_string())
            }
            Err(_) => Ok(None),
        }
    }

    /// Keeps an answer that was not the structured JSON and asks the model for the format.
    async fn correct_format(
        &mut self,
        entry: LogEntry,
        model_answered: AgentEvent,
        err: &str,
    ) -> Result<Next, Stop> {
        self.format_retries += 1;
        self.append(entry).await?;
        self.emit(model_answered);
        self.emit(AgentEvent::Error {
            round: self.round,
            kind: ErrorKind::Format,
            message: format!("the answer is not the structured JSON: {err}"),
            resumable: true,
        });
        let fix = self.user_entry(
            &format!(
                "FORMAT_ERROR: your answer could not be read as the JSON format ({err}). \
                 Reply again with one JSON object in the required format."
            ),
            Some(EntryKind::FormatError),
        );
        self.append(fix).await?;
        Ok(Next::Again)
    }

    /// A final answer: processed into the API response (code saved, file references
    /// resolved), appended with it, reported, and the run is over.
    async fn final_answer(
        &mut self,
        mut entry: LogEntry,
        model_answered: AgentEvent,
        text: String,
        structured: Option<StructuredResponse>,
    ) -> Result<Next, Stop> {
        let answer = match &structured {
            Some(StructuredResponse {
                action: Action::Complete { content, .. },
                ..
            }) => content.clone(),
            _ => text,
        };
        let files = self.kit.files.as_ref().map(|f| Files {
            workspace: f.workspace(),
            conversation: f.conversation(),
        });
        let mut processed = process_final(&answer, structured.as_ref(), files).await;
        // A plain answer names no downloads of its own: it offers the files the turn's tools
        // wrote (a structured answer lists the ones it means in `download_links`).
        if let (None, Some(files), Some(since)) =
            (&structured, files, self.history.task_started_at())
        {
            let links = &mut processed.response.metadata.download_links;
            for id in outputs_since(files, since).await {
                if !links.contains(&id) {
                    links.push(id);
                }
            }
        }
        for w in &processed.warnings {
            tracing::warn!(conversation = %self.id, "{w}");
        }
        entry.records.api_response = Some(Box::new(processed.response.clone()));
        if !processed.warnings.is_empty() {
            entry.records.warnings = Some(processed.warnings.clone());
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

    /// The calls of a structured answer as log calls; an id that is empty or already used
    /// (in the log or earlier in the answer) is replaced by `call_r{round}_{n}`.
    fn structured_calls(&self, content: &[ba_protocol::StructuredToolCall]) -> Vec<LogToolCall> {
        let used = self.history.call_ids();
        let mut calls: Vec<LogToolCall> = Vec::new();
        for (n, c) in content.iter().enumerate() {
            let mut id = c.tool_call_id.trim().to_owned();
            if id.is_empty() || used.contains(&id) || calls.iter().any(|x| x.id == id) {
                id = format!("call_r{}_{}", self.round, n + 1);
            }
            calls.push(LogToolCall::new(id, c.tool_name.clone(), &c.arguments));
        }
        calls
    }
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
