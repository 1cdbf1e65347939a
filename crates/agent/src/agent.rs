//! The orchestrator's face: an [`Agent`], built once from its parts ([`crate::AgentBuilder`]),
//! runs conversations as async streams of [`crate::AgentEvent`]s (see `run`, which also
//! holds [`Agent::send`] and [`Agent::start`]), and answers what a front end asks of a
//! conversation: its entries, report, pending approvals, a compaction, a cancel.
//!
//! A round builds the context (context crate: system prompt per mode with the skills
//! catalogue, budgeted window, compression), calls the model (streaming deltas out as events),
//! appends the answer to the store, runs the answer's tool calls in parallel (tools crate; the
//! `activate_skill` meta-tool through the skills crate) and appends each result as it is in.
//! Rounds repeat until a final answer, the round limit, a failure, or cancellation (dropping
//! the [`Run`]).
//!
//! Everything the loop needs to go on is in the log: a model failure is appended with its
//! partial output (`continue` resumes from it), and [`Input::Resume`] picks a crashed or
//! cancelled run up from the log alone, running the calls that have no result yet.

use std::sync::Arc;

use ba_protocol::{LogEntry, Mode};
use ba_skills::SkillSet;
use ba_storage::Workspace;
use ba_storage::{ConversationId, ConversationStore, MetaUpdate, NewConversation, RunHolder};
use ba_tools::ToolRuntime;

use crate::adapters::SkillTool;
// Named by the docs of `Input` and `RunOptions` only.
use crate::compact::{Compaction, Compactor};
use crate::error::AgentError;
use crate::events::InputKind;
use crate::history::{History, whole_log};
use crate::parts::Inner;
use crate::report::ConversationReport;
use crate::run::{CancelOutcome, Run, Signal};
use crate::settings::AgentSettings;
/// What a run starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A new user message: what the person wrote and the files of the conversation they
    /// attached. The entry keeps the two apart — the text as its first block, a note telling
    /// the model how to read each file as a second, and the files as its `attachments` record
    /// — so a front end shows what the person wrote, and the model reads both.
    Message {
        /// What the person wrote.
        text: String,
        /// The files attached, in order (uploads of the conversation).
        attachments: Vec<ba_storage::FileMeta>,
    },
    /// Go on after a failure: a `continue` message goes to the model with the failed turn
    /// (its partial output and `LLM_ERROR` block) before it.
    Continue,
    /// Pick up from the log alone: run calls that have no result yet, then call the model
    /// if the last turn is unanswered. A finished conversation gives its final answer back.
    Resume,
    /// A person's decisions about calls that wait for approval (see
    /// [`Agent::pending_approvals`]): recorded in the log, then the run goes on as a resume —
    /// decided calls run (or are refused), undecided ones keep waiting.
    Decide(Vec<crate::ApprovalAnswer>),
    /// Start a run of the workflow `name` (one of [`AgentBuilder::workflows`](crate::AgentBuilder::workflows)) with `inputs`
    /// (text, read by each input's type; defaults for those not given). The conversation
    /// goes to run mode; the run goes node by node until the model completes the last one or
    /// the run's rounds run out (the next run goes on at the node it was in).
    Workflow {
        /// The workflow's name.
        name: String,
        /// The inputs, as text.
        inputs: std::collections::BTreeMap<String, String>,
    },
}

impl Input {
    /// A user message without files.
    pub fn message(text: impl Into<String>) -> Self {
        Self::message_with(text, Vec::new())
    }

    /// A user message with the files the person attached to it.
    pub fn message_with(text: impl Into<String>, attachments: Vec<ba_storage::FileMeta>) -> Self {
        Self::Message {
            text: text.into(),
            attachments,
        }
    }

    /// Which kind of input this is (as [`AgentEvent::RunStarted`](crate::AgentEvent::RunStarted) reports it).
    pub fn kind(&self) -> InputKind {
        match self {
            Self::Message { .. } => InputKind::Message,
            Self::Continue => InputKind::Continue,
            Self::Resume => InputKind::Resume,
            Self::Decide(_) => InputKind::Decide,
            Self::Workflow { .. } => InputKind::Workflow,
        }
    }
}

/// How a run is started beyond its input: the caller's ids, recorded on the user entry it
/// appends, and the events a front end wants besides the default ones.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RunOptions {
    /// The caller's id of the request that started the run (kept in the user entry's
    /// `extra`, so a retried request finds its run after a restart).
    pub request_id: Option<String>,
    /// The caller's id of the run (kept beside the request id).
    pub run_id: Option<String>,
    /// The person the run acts for, recorded as the `actor` of the user entry it appends and
    /// of the approval decisions it records.
    pub actor: Option<String>,
    /// Send an [`AgentEvent::Entry`](crate::AgentEvent::Entry) for every entry appended.
    pub entry_events: bool,
    /// Send an [`AgentEvent::ContextStatus`](crate::AgentEvent::ContextStatus) every round.
    pub context_status: bool,
    /// Caps of this conversation on top of the configuration's (the lower of the two holds):
    /// a scheduled run's budget.
    pub conversation_caps: crate::Budgets,
}

impl RunOptions {
    /// Records the caller's request and run ids.
    pub fn with_ids(mut self, request_id: impl Into<String>, run_id: impl Into<String>) -> Self {
        self.request_id = Some(request_id.into());
        self.run_id = Some(run_id.into());
        self
    }

    /// Records `actor` as the person the run acts for.
    pub fn with_actor(mut self, actor: impl Into<String>) -> Self {
        self.actor = Some(actor.into());
        self
    }

    /// Caps what the conversation may spend, below the configuration's caps when those are
    /// lower; `None` leaves a cap as configured.
    pub fn with_conversation_caps(mut self, usd: Option<f64>, tokens: Option<u64>) -> Self {
        self.conversation_caps.conversation_usd = usd;
        self.conversation_caps.conversation_tokens = tokens;
        self
    }

    /// Sends entry and context status events too.
    pub fn with_durable_events(mut self) -> Self {
        self.entry_events = true;
        self.context_status = true;
        self
    }
}

/// The orchestrator. Cheap to clone; clones share everything (store, tools, caches).
#[derive(Clone)]
pub struct Agent {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("provider", &self.inner.client.provider())
            .field("settings", &self.inner.settings)
            .field("tools", self.inner.tools.own())
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// The workflows a run can start.
    pub fn workflows(&self) -> &ba_skills::WorkflowSet {
        &self.inner.workflows
    }

    /// The settings.
    pub fn settings(&self) -> &AgentSettings {
        &self.inner.settings
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ConversationStore> {
        &self.inner.store
    }

    /// The tool runtime of the agent's own tools (its registry and the metrics of every call,
    /// tool sources' included).
    pub fn tools(&self) -> &ToolRuntime {
        self.inner.tools.own()
    }

    /// The tool runtime a run starting now would use: the agent's own tools and the tool
    /// sources' tools as they are now.
    pub fn current_tools(&self) -> Arc<ToolRuntime> {
        Arc::clone(&self.inner.tools.for_run().runtime)
    }

    /// The skills, when configured.
    pub fn skills(&self) -> Option<&Arc<SkillSet>> {
        self.inner.tools.skills().map(SkillTool::skills)
    }

    /// The conversations' files, when the store (or the builder) has a workspace.
    pub fn workspace(&self) -> Option<&Arc<dyn Workspace>> {
        self.inner.workspace.as_ref()
    }

    /// Creates a conversation with a fresh id.
    ///
    /// # Errors
    /// The store's.
    pub async fn new_conversation(
        &self,
        new: NewConversation,
    ) -> Result<ConversationId, AgentError> {
        let id = ConversationId::random();
        self.inner.store.create(&id, new).await?;
        Ok(id)
    }

    /// Switches a conversation's mode; only the system prompt of later requests changes.
    ///
    /// # Errors
    /// The store's (`NotFound` for an unknown conversation).
    pub async fn set_mode(&self, id: &ConversationId, mode: Mode) -> Result<(), AgentError> {
        self.inner
            .store
            .update_metadata(
                id,
                MetaUpdate {
                    title: None,
                    mode: Some(mode),
                },
            )
            .await?;
        Ok(())
    }

    /// Cancels run `run_id` of a conversation wherever it goes on: in this process at once,
    /// in another process sharing the store through a request that process finds within its
    /// [`AgentSettings::cancel_poll`]. Without `run_id`, the run that holds the conversation.
    /// A run is found through its own conversation only: naming another conversation's run
    /// reaches nothing ([`CancelOutcome::NotRunning`]) and that run goes on.
    ///
    /// # Errors
    /// The store's.
    pub async fn cancel(
        &self,
        id: &ConversationId,
        run_id: Option<&str>,
    ) -> Result<CancelOutcome, AgentError> {
        let target = match run_id {
            Some(run_id) => run_id.to_owned(),
            None => match self.inner.store.run_holder(id).await? {
                Some(holder) if !holder.run_id.is_empty() => holder.run_id,
                _ => return Ok(CancelOutcome::NotRunning),
            },
        };
        if let Some(control) = self.inner.leases.live().get(id, &target) {
            control.raise(Signal::Cancel);
            return Ok(CancelOutcome::Cancelling);
        }
        Ok(Run::request_cancel(self.inner.store.as_ref(), id, Some(&target)).await?)
    }

    /// Who runs the conversation now (in any process sharing the store), if anyone.
    ///
    /// # Errors
    /// The store's.
    pub async fn run_holder(&self, id: &ConversationId) -> Result<Option<RunHolder>, AgentError> {
        Ok(self.inner.store.run_holder(id).await?)
    }

    /// Summarises the conversation so far into one entry; later requests start from it.
    ///
    /// # Errors
    /// The store's; [`AgentError::Context`] when there is nothing to summarise or the
    /// summarizer fails.
    pub async fn compact(&self, id: &ConversationId) -> Result<Compaction, AgentError> {
        let inner = &self.inner;
        // A compaction holds the conversation like a run: it never interleaves with one.
        let _lease = inner
            .leases
            .take(id, &format!("compact_{}", uuid::Uuid::new_v4().simple()))
            .await?;
        let mut history = History::open(Arc::clone(&inner.store), id.clone()).await?;
        let compactor = Compactor {
            hooks: &inner.hooks,
            counter: inner.builders.counter(),
            summarizer: inner
                .summarizer
                .clone()
                .unwrap_or_else(|| Arc::new(ba_context::ExtractiveSummarizer)),
            max_tokens: (inner.settings.budget.target_tokens() / 4).clamp(200, 4_000),
        };
        compactor.compact(&mut history).await
    }

    /// The metrics report of a conversation, computed from its log: the spend of every call
    /// made, and what the history holds after its rewinds
    /// ([`ConversationReport::from_stored`]).
    ///
    /// # Errors
    /// The store's.
    pub async fn report(&self, id: &ConversationId) -> Result<ConversationReport, AgentError> {
        let log = whole_log(self.inner.store.as_ref(), id).await?;
        Ok(ConversationReport::from_stored(
            id.as_str(),
            &log,
            &self.inner.settings.prices,
        ))
    }

    /// What the conversation and its owner's month spent, against their caps, and the cap
    /// reached, if any (a run started now would end `budget_reached` before calling the
    /// model).
    ///
    /// # Errors
    /// The store's (`NotFound` for an unknown conversation).
    pub async fn spend(&self, id: &ConversationId) -> Result<crate::SpendReport, AgentError> {
        let settings = &self.inner.settings;
        Ok(crate::spend_report(&self.inner.store, id, settings.budgets, &settings.prices).await?)
    }

    /// The tool calls of the conversation that wait for a person's decision, read from the
    /// log (the same on every process sharing the store). Decide with [`Input::Decide`].
    ///
    /// # Errors
    /// The store's.
    pub async fn pending_approvals(
        &self,
        id: &ConversationId,
    ) -> Result<Vec<ba_protocol::PendingApproval>, AgentError> {
        let history = History::open(Arc::clone(&self.inner.store), id.clone()).await?;
        Ok(history.pending_approvals())
    }

    /// The entries of a conversation.
    ///
    /// # Errors
    /// The store's.
    pub async fn entries(&self, id: &ConversationId) -> Result<Vec<LogEntry>, AgentError> {
        let log = whole_log(self.inner.store.as_ref(), id).await?;
        Ok(log.into_iter().map(|s| s.entry).collect())
    }
}
