//! One run of a conversation: the state machine that turns an [`Input`] into rounds (context →
//! model → tool calls) until a final answer, the round limit, a failure or cancellation.
//!
//! The pieces live beside it: `handle` is the caller's [`Run`] and the signal that steers it,
//! `task` the run's task from its lease to its `Finished`, `context` assembles a round's window,
//! `answer` reads what the model said (structured parsing, format corrections, the final
//! answer's processing) and `tools` runs the calls. Everything is appended to the store, through
//! the run's [`History`], as it happens.

mod answer;
mod approve;
mod context;
mod handle;
mod hooked;
mod state;
mod task;

pub use handle::{CancelOutcome, NO_SUMMARY, Run, RunCanceller};
pub(crate) use handle::{Control, LiveEntry, LiveRuns, Signal};
use state::{LeaseWatch, Naming, RunKit};
mod tools;
mod window;
mod workflow;

use std::sync::Arc;

use ba_model::{CacheHint, ModelRequest, StreamDelta};
use ba_protocol::{ContextRecord, EntryKind, LogEntry, LogRole, LogToolCall, Mode};
use ba_storage::{Clock, ConversationId, SystemClock};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::agent::{Input, RunOptions};
use crate::error::{AgentError, ErrorKind};
use crate::events::{AgentEvent, RunStatus, RunSummary};
use crate::history::History;
use crate::ids::{new_id, now};
use crate::parts::Inner;
use crate::response::process_final;

/// Why a run stopped early, beyond the model failures the log records.
pub(crate) struct Stop {
    pub(crate) kind: ErrorKind,
    pub(crate) message: String,
}

impl From<AgentError> for Stop {
    fn from(e: AgentError) -> Self {
        Self {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

impl From<ba_storage::StorageError> for Stop {
    fn from(e: ba_storage::StorageError) -> Self {
        AgentError::from(e).into()
    }
}

/// The longest title taken from a question, in characters.
const TITLE_CHARS: usize = 60;

/// A title from a question: its first line, spaces collapsed, at most [`TITLE_CHARS`]
/// characters cut at a word (with `…`). `None` for a question with no words.
pub(crate) fn title_of(question: &str) -> Option<String> {
    let line = question.lines().find(|l| !l.trim().is_empty())?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut title = String::new();
    for w in &words {
        let next = title.chars().count() + usize::from(!title.is_empty()) + w.chars().count();
        if next > TITLE_CHARS {
            if title.is_empty() {
                title = w.chars().take(TITLE_CHARS).collect();
            }
            title.push('…');
            return Some(title);
        }
        if !title.is_empty() {
            title.push(' ');
        }
        title.push_str(w);
    }
    Some(title)
}

#[cfg(test)]
mod title_tests {
    use super::title_of;

    #[test]
    fn a_title_is_the_first_line_cut_at_a_word() {
        assert_eq!(
            title_of("  \n  Sales   by region?\nmore").as_deref(),
            Some("Sales by region?")
        );
        let long = "Why did the West region's sales jump in Q3 2024, and did it beat its target?";
        let t = title_of(long).unwrap();
        assert!(t.ends_with('…') && t.chars().count() <= 61, "{t}");
        assert_eq!(
            t,
            "Why did the West region's sales jump in Q3 2024, and did it…"
        );
        assert_eq!(title_of(" \n "), None);
        assert_eq!(title_of(&"x".repeat(100)).unwrap().chars().count(), 61);
    }
}

/// Times the stop hooks may send one run back to work before its answer stands.
pub(crate) const MAX_STOP_CONTINUES: u32 = 3;

/// What a model call streamed before it was cut.
#[derive(Default)]
pub(crate) struct Partial {
    pub(crate) text: String,
    pub(crate) thinking: String,
}

/// Resolves once `rx` says cancel (never when its sender is gone).
pub(crate) async fn wait_for_cancel(mut rx: watch::Receiver<Signal>) {
    if rx.wait_for(|s| *s == Signal::Cancel).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Where a run starts after its input.
enum Begun {
    /// Rounds, after these calls (a resume's; none otherwise).
    Pending(Vec<LogToolCall>),
    /// A resume found the final answer already given.
    Answered(Box<RunSummary>),
}

/// What follows a round.
pub(crate) enum Next {
    /// Run these calls, then call the model again.
    Calls(Vec<LogToolCall>),
    /// Call the model again (after a format correction).
    Again,
    /// The run is over.
    Done(Box<RunSummary>),
}

pub(crate) struct Runner {
    pub(crate) inner: Arc<Inner>,
    pub(crate) id: ConversationId,
    tx: UnboundedSender<AgentEvent>,
    /// How the run is steered (see [`Signal`]).
    signal: watch::Receiver<Signal>,
    pub(crate) options: RunOptions,
    /// The conversation as this run sees and extends it.
    pub(crate) history: History,
    pub(crate) mode: Mode,
    pub(crate) round: u32,
    rounds_run: u32,
    pub(crate) format_retries: u32,
    /// The share of the budget the last window used (drives the tools' output levels).
    pub(crate) usage: f64,
    /// The tools, tool list, skills catalogue, shared scope and files of this run.
    kit: RunKit,
    /// The conversation's title, as this run gives it one.
    naming: Naming,
    /// The conversation's latest workflow run, as the log tells it.
    pub(crate) workflow: Option<crate::workflow::WorkflowRun>,
    /// Times a stop hook sent this run back to work (at most [`MAX_STOP_CONTINUES`]).
    pub(crate) stop_continues: u32,
    /// The run's lease, looked at before every write.
    lease: LeaseWatch,
    /// Set while a round is sent again after the server refused it as too long: it is sent
    /// again once.
    pub(crate) overflow_retry: bool,
    /// What the conversation and its owner spent, against their caps (opened when the run
    /// takes its input).
    meter: Option<crate::spend::Meter>,
}

impl Runner {
    pub(crate) fn emit(&self, event: AgentEvent) {
        // A closed receiver means the caller stopped listening; the run goes on to a
        // consistent point anyway (it is aborted at the next await).
        let _ = self.tx.send(event);
    }

    pub(crate) fn summary(
        &self,
        status: RunStatus,
        answer: Option<(String, ba_protocol::ApiResponse)>,
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

    pub(crate) async fn append(&mut self, mut entry: LogEntry) -> Result<(), Stop> {
        if entry.run_id.is_none() {
            self.put_workflow_ids(&mut entry);
        }
        if self.lease.is_lost() {
            return Err(Stop {
                kind: ErrorKind::LeaseLost,
                message: task::LEASE_LOST.to_owned(),
            });
        }
        let (seq, entry) = self.history.append(entry).await?;
        if let Some(meter) = &mut self.meter {
            meter.record(entry).await;
        }
        if self.options.entry_events {
            let event = AgentEvent::Entry {
                seq,
                appended_ms: SystemClock.now_ms(),
                entry: Box::new(entry.clone()),
            };
            self.emit(event);
        }
        Ok(())
    }

    fn put_run_ids(&self, entry: &mut LogEntry) {
        if let Some(request) = &self.options.request_id {
            entry.records.request_id = Some(request.clone());
        }
        if let Some(run) = &self.options.run_id {
            entry.records.caller_run_id = Some(run.clone());
        }
        entry.records.actor.clone_from(&self.options.actor);
    }

    /// The end of a cancelled run.
    pub(crate) fn cancelled(&self, partial_saved: bool) -> RunSummary {
        self.emit(AgentEvent::Cancelled {
            round: self.round,
            partial_saved,
        });
        self.summary(RunStatus::Cancelled, None, None)
    }

    /// Names an untitled conversation after its first question (a failure costs only the
    /// title); where a summary model is configured, it then writes a better title while the
    /// run goes on, which replaces the first unless someone renamed the conversation since.
    async fn title_from(&mut self, question: &str) {
        let Some(title) = title_of(question) else {
            return;
        };
        let update = ba_storage::MetaUpdate {
            title: Some(title.clone()),
            ..ba_storage::MetaUpdate::default()
        };
        if let Err(e) = self.inner.store.update_metadata(&self.id, update).await {
            tracing::warn!(conversation = %self.id, "naming the conversation: {e}");
            return;
        }
        let Some(summarizer) = self.inner.summarizer.clone() else {
            return;
        };
        let (store, id, question) = (
            Arc::clone(&self.inner.store),
            self.id.clone(),
            question.to_owned(),
        );
        self.naming.task = Some(tokio::spawn(async move {
            let written = match summarizer.title(&question).await {
                Ok(Some(text)) => title_of(text.trim().trim_matches(['"', '\'', '“', '”', '.'])),
                Ok(None) => None,
                Err(e) => {
                    tracing::warn!(conversation = %id, "the summary model's title: {e}");
                    None
                }
            };
            let Some(written) = written.filter(|w| *w != title) else {
                return;
            };
            // A rename since the first title wins.
            match store.metadata(&id).await {
                Ok(meta) if meta.title.as_deref() == Some(title.as_str()) => {}
                _ => return,
            }
            let update = ba_storage::MetaUpdate {
                title: Some(written),
                ..ba_storage::MetaUpdate::default()
            };
            if let Err(e) = store.update_metadata(&id, update).await {
                tracing::warn!(conversation = %id, "naming the conversation: {e}");
            }
        }));
    }

    pub(crate) fn user_entry(&self, text: &str, kind: Option<EntryKind>) -> LogEntry {
        let mut e = LogEntry::new(new_id(), LogRole::User, now()).with_text(text);
        e.mode = Some(self.mode);
        if let Some(kind) = kind {
            e.records.kind = Some(kind);
        }
        e
    }

    /// The entry of a person's message: what they wrote as its first text block, then the
    /// note on the files they attached and the hooks' context, each a block of its own (one
    /// block alone stays plain text), and the files as its `attachments` record.
    fn message_entry(
        &self,
        text: String,
        attachments: &[ba_storage::FileMeta],
        context: Option<String>,
    ) -> LogEntry {
        let mut e = self.user_entry(&text, None);
        let more: Vec<String> = crate::adapters::attachment_note(attachments)
            .into_iter()
            .chain(context)
            .collect();
        if !more.is_empty() {
            let blocks = std::iter::once(text)
                .chain(more)
                .map(ba_protocol::ContentBlock::text)
                .collect();
            e.content = Some(ba_protocol::Content::Blocks(blocks));
        }
        if !attachments.is_empty() {
            e.records.attachments = Some(crate::adapters::attachment_records(attachments));
        }
        e
    }

    /// The run after its lease: the input taken, then rounds until the run is over.
    async fn go(&mut self, input: Input) -> Result<RunSummary, Stop> {
        let meta = self.inner.store.metadata(&self.id).await?;
        self.naming.untitled = meta.title.as_deref().is_none_or(|t| t.trim().is_empty());
        self.mode = meta.mode.unwrap_or_default();
        tracing::Span::current().record("mode", self.mode.as_str());
        // The log is read once: the history keeps what the model sees, the meter counts every
        // call made, the entries a rewind took back included.
        let (inner, mut meter) = (Arc::clone(&self.inner), None);
        let budgets = inner
            .settings
            .budgets
            .tightened(&self.options.conversation_caps);
        self.history
            .load_seeing(|log| {
                meter = Some(crate::spend::Meter::of_log(
                    &inner.store,
                    &meta,
                    log,
                    budgets,
                    inner.settings.prices.clone(),
                ));
            })
            .await?;
        self.meter = meter;
        self.offer_tools();
        self.load_workflow();
        self.emit(AgentEvent::RunStarted {
            conversation_id: self.id.to_string(),
            mode: self.mode,
            input: input.kind(),
        });
        let begun = self.take_input(input).await?;
        // A workflow's start puts the conversation in run mode, whose list may differ.
        self.offer_tools();
        match begun {
            Begun::Pending(calls) => self.rounds(calls).await,
            Begun::Answered(summary) => Ok(*summary),
        }
    }

    /// Appends what the input brings (the user's message, a `continue`), or for a resume
    /// finds where the log left off: calls without results, a failure to go on from, or a
    /// final answer already given.
    async fn take_input(&mut self, input: Input) -> Result<Begun, Stop> {
        let entry = match input {
            Input::Message { text, .. } if text.trim().is_empty() => {
                return Err(Stop {
                    kind: ErrorKind::Input,
                    message: "the message is empty".into(),
                });
            }
            Input::Message { text, attachments } => {
                if self.naming.take_untitled() {
                    self.title_from(&text).await;
                }
                let context = self.prompt_hooks(&text).await?;
                Some(self.message_entry(text, &attachments, context))
            }
            Input::Continue => Some(self.user_entry("continue", Some(EntryKind::Continue))),
            Input::Resume => None,
            Input::Decide(answers) => {
                self.record_decisions(answers).await?;
                None
            }
            Input::Workflow { name, inputs } => {
                self.start_workflow(&name, &inputs).await?;
                return Ok(Begun::Pending(Vec::new()));
            }
        };
        if let Some(mut e) = entry {
            self.record_inventory().await?;
            self.record_memory_index().await?;
            self.drop_waiting().await?;
            // Stamped when it is appended, after the records written before it.
            e.created_at = now();
            self.put_run_ids(&mut e);
            self.append(e).await?;
            // Counted from the task the message starts (or the `continue` goes on with).
            self.round = self.history.rounds_in_task();
            return Ok(Begun::Pending(Vec::new()));
        }
        self.round = self.history.rounds_in_task();
        let Some(last) = self.history.last().cloned() else {
            return Err(Stop {
                kind: ErrorKind::Input,
                message: "the conversation is empty: there is nothing to resume".into(),
            });
        };
        match last.role {
            LogRole::Assistant if last.llm_error.is_some() => {
                self.record_inventory().await?;
                let e = self.user_entry("continue", Some(EntryKind::Continue));
                self.append(e).await?;
                Ok(Begun::Pending(Vec::new()))
            }
            LogRole::Assistant if last.calls().is_empty() => {
                let text = last.text().into_owned();
                let response = match last.records.api_response.as_deref().cloned() {
                    Some(response) => response,
                    None => process_final(&text, None, None).await.response,
                };
                self.emit(AgentEvent::FinalAnswer {
                    round: self.round,
                    text: text.clone(),
                    response: response.clone(),
                });
                let summary = self.summary(RunStatus::Answered, Some((text, response)), None);
                Ok(Begun::Answered(Box::new(summary)))
            }
            _ => {
                let pending = self.history.pending_calls();
                self.record_inventory().await?;
                Ok(Begun::Pending(pending))
            }
        }
    }

    /// Rounds until a final answer, the round limit, a stop or a cancel, starting with the
    /// calls `pending` (a resume's).
    async fn rounds(&mut self, mut pending: Vec<LogToolCall>) -> Result<RunSummary, Stop> {
        // The span of the round whose calls are pending: they run inside it (calls a resume
        // finds pending belong to no round of this run, so they sit under the run's span).
        let mut round_span = tracing::Span::none();
        loop {
            if !pending.is_empty() {
                let calls = std::mem::take(&mut pending);
                // Results in so far stay in the log; the calls cut off are left to a resume.
                let cancel = self.signal.clone();
                let span = std::mem::replace(&mut round_span, tracing::Span::none());
                let done = tokio::select! {
                    done = self.run_gated(&calls).instrument(span) => Some(done),
                    () = wait_for_cancel(cancel) => None,
                };
                match done {
                    Some(done) => {
                        if let Some(paused) = done? {
                            return Ok(paused);
                        }
                    }
                    None => return Ok(self.cancelled(false)),
                }
            }
            if let Some(summary) = self.before_round() {
                return Ok(summary);
            }
            if let Some(summary) = self.at_budget().await? {
                return Ok(summary);
            }
            self.round += 1;
            self.rounds_run += 1;
            let span = tracing::info_span!("round", round = self.round);
            match self.round_once().instrument(span.clone()).await? {
                Next::Calls(calls) => {
                    pending = calls;
                    round_span = span;
                }
                Next::Again => {}
                Next::Done(summary) => {
                    if let Some(reason) = self.stop_hooks(&summary).await? {
                        // Sent back to work: the reason is the next user message.
                        let text = format!("[stop hook] {reason}");
                        let e = self.user_entry(&text, None);
                        self.append(e).await?;
                        continue;
                    }
                    return Ok(*summary);
                }
            }
        }
    }

    /// Whether the run ends before another round: cancelled, asked to stop, or at its limit.
    fn before_round(&self) -> Option<RunSummary> {
        let signal = *self.signal.borrow();
        if signal == Signal::Cancel {
            return Some(self.cancelled(false));
        }
        if signal == Signal::StopAfterRound {
            return Some(self.summary(RunStatus::Stopped, None, None));
        }
        if self.rounds_run < self.inner.settings.max_rounds {
            return None;
        }
        let message = format!(
            "the round limit of {} was reached before a final answer; send `continue` to go on",
            self.inner.settings.max_rounds
        );
        self.emit(AgentEvent::Error {
            round: self.round,
            kind: ErrorKind::RoundLimit,
            message: message.clone(),
            resumable: true,
        });
        Some(self.summary(RunStatus::RoundLimit, None, Some(message)))
    }

    /// The end of the run when a spending cap is reached: the call before finished and is in
    /// the log; the next one is not made.
    async fn at_budget(&self) -> Result<Option<RunSummary>, Stop> {
        let Some(meter) = &self.meter else {
            return Ok(None);
        };
        let Some(message) = meter.report().await?.reached else {
            return Ok(None);
        };
        self.emit(AgentEvent::Error {
            round: self.round,
            kind: ErrorKind::BudgetReached,
            message: message.clone(),
            resumable: true,
        });
        Ok(Some(self.summary(
            RunStatus::BudgetReached,
            None,
            Some(message),
        )))
    }

    /// Appends the inventory of the servers behind this run's tools when it differs from the
    /// last one in the log (a hidden system entry, never sent to a model). Nothing for an
    /// agent without tool sources.
    async fn record_inventory(&mut self) -> Result<(), Stop> {
        let Some(inventory) = self.kit.tools.inventory.clone() else {
            return Ok(());
        };
        if self.history.last_server_inventory().as_ref() == Some(&inventory) {
            return Ok(());
        }
        let mut e = LogEntry::new(new_id(), LogRole::System, now())
            .with_text(format!("Tool servers: {}", inventory.summary()));
        e.include_in_context = false;
        e.records.kind = Some(EntryKind::ServerInventory);
        e.records.server_inventory = Some(inventory);
        self.append(e).await
    }

    /// Writes the memory index the system prompt carries from here on (a hidden entry, empty
    /// when there is no memory) when the conversation has none yet or a compaction came after
    /// it: the prompt then stays the same, byte for byte, while the model changes memory
    /// (those changes reach it through the tool's results). A store that cannot be read
    /// leaves the index out rather than stop the run.
    async fn record_memory_index(&mut self) -> Result<(), Stop> {
        if self.inner.settings.memory.is_none() || !crate::adapters::index_due(self.history.all()) {
            return Ok(());
        }
        let Some(memory) = self.inner.store.memory() else {
            return Ok(());
        };
        let owner = match self.inner.store.metadata(&self.id).await {
            Ok(meta) => meta.owner,
            Err(_) => return Ok(()),
        };
        let counter = self.inner.builders.counter();
        let index = crate::adapters::memory_index(
            memory.as_ref(),
            &owner,
            crate::adapters::MEMORY_INDEX_TOKENS,
            |t| counter.text(t),
        )
        .await;
        let text = match index {
            Ok(index) => index.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(conversation = %self.id, "memory index not read: {e}");
                return Ok(());
            }
        };
        let mut e = LogEntry::new(new_id(), LogRole::System, now()).with_text(text);
        e.include_in_context = false;
        e.records.kind = Some(EntryKind::MemoryIndex);
        self.append(e).await
    }

    /// Takes the tool list of the conversation's mode, with the tools the searches of its log
    /// found (see [`crate::deferral`]).
    fn offer_tools(&mut self) {
        let found = self.history.tools_found();
        let settings = &self.inner.settings;
        let native = settings.tool_search.native && self.inner.client.searches_tools();
        self.kit.offer(
            self.mode,
            &self.inner.builders,
            &settings.tool_search,
            &found,
            settings.budget.total,
            native,
        );
    }

    /// One model call and what follows from its answer.
    async fn round_once(&mut self) -> Result<Next, Stop> {
        // A search in the last round found tools: they are sent from this request on.
        if self.history.tools_found_count() != self.kit.found_count() {
            self.offer_tools();
        }
        let active = self.history.active_skills();
        let modifier = self.history.modifier();
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
        let (request, record) = self.request_for(model, built);
        let (result, partial) = self.call_model(&request).await;
        if let Some(Err(ba_model::ModelError::ContextOverflow {
            limit, requested, ..
        })) = &result
            && !std::mem::replace(&mut self.overflow_retry, true)
        {
            // The server said its window: keep it for the conversation, and send the round
            // again in a window built (and compressed) for it, once.
            let (limit, requested) = (*limit, *requested);
            let learned = self.learn_window(limit, requested, &request.model).await?;
            if learned {
                let again = Box::pin(self.round_once()).await;
                self.overflow_retry = false;
                return again;
            }
        }
        self.overflow_retry = false;
        match result {
            None => self.call_cancelled(partial, record).await,
            Some(Err(err)) => self.model_failed(err, record).await,
            Some(Ok(response)) => self.answered(response, record).await,
        }
    }

    /// The request of a round for `model` over the window `built`, and the record of that
    /// window the answer's entry keeps.
    fn request_for(&self, model: String, built: context::Built) -> (ModelRequest, ContextRecord) {
        let settings = &self.inner.settings;
        // A learned window holds the answer too: its cap is what the budget keeps for it.
        let reserve = u32::try_from(self.budget().reserved_for_response).unwrap_or(u32::MAX);
        let max_tokens = match crate::budget::window_record(self.history.all()) {
            Some(_) => settings.max_tokens.min(reserve.max(1)),
            None => settings.max_tokens,
        };
        let mut request = ModelRequest::new(model, built.entries)
            .with_system(built.system)
            .with_tools(self.kit.specs().to_vec())
            .with_cache(CacheHint {
                stable_entries: built.stable,
                key: Some(self.id.to_string()),
            })
            .with_max_tokens(max_tokens)
            .with_stream(settings.stream);
        request.thinking_budget = settings.thinking_budget;
        let registry = self.kit.tools.runtime.registry();
        request.native_types = request
            .tools
            .iter()
            .filter_map(|t| {
                let native = registry.get(&t.name)?.tool().capabilities().native_type?;
                Some((t.name.clone(), native.to_owned()))
            })
            .collect();
        let held_back = self.kit.native_deferred();
        if !held_back.is_empty() {
            request.deferred = Some(ba_model::DeferredTools {
                tools: held_back.to_vec(),
                regex: settings.tool_search.search == crate::SearchKind::Regex,
            });
        }
        (request, built.record)
    }

    /// Calls the model with `request`, its deltas sent out as events, until it answers or the
    /// run is cancelled (`None`); what it streamed, for a cut call's record.
    async fn call_model(
        &self,
        request: &ModelRequest,
    ) -> (
        Option<Result<ba_model::ModelResponse, ba_model::ModelError>>,
        Partial,
    ) {
        let settings = &self.inner.settings;
        let round = self.round;
        let tx = self.tx.clone();
        let mut partial = Partial::default();
        // Names and figures only: neither the request nor the answer goes on a span.
        let call_span = tracing::info_span!(
            "model_call",
            provider = self.inner.client.provider(),
            model = %request.model,
            stream = settings.stream,
            outcome = Empty,
            input_tokens = Empty,
            output_tokens = Empty,
            retries = Empty,
        );
        let result = {
            let mut on_delta = |delta| {
                let event = match delta {
                    StreamDelta::Text { text, .. } => {
                        partial.text.push_str(&text);
                        AgentEvent::TextDelta { round, text }
                    }
                    StreamDelta::Thinking { text, .. } => {
                        partial.thinking.push_str(&text);
                        AgentEvent::ThinkingDelta { round, text }
                    }
                    _ => return,
                };
                let _ = tx.send(event);
            };
            let call = self.inner.client.complete_streaming(request, &mut on_delta);
            let cancel = self.signal.clone();
            async {
                tokio::select! {
                    result = call => Some(result),
                    () = wait_for_cancel(cancel) => None,
                }
            }
            .instrument(call_span.clone())
            .await
        };
        match &result {
            None => call_span.record("outcome", "cancelled"),
            Some(Err(err)) => call_span.record("outcome", ErrorKind::from(err.kind()).as_str()),
            Some(Ok(response)) => call_span
                .record("outcome", "answered")
                .record("input_tokens", response.usage.input_tokens)
                .record("output_tokens", response.usage.output_tokens)
                .record("retries", response.retries),
        };
        drop(call_span);
        (result, partial)
    }
}
