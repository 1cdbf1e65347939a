//! The ReAct orchestrator (O1): an [`Agent`] built once from its parts, running conversations
//! as async streams of [`AgentEvent`]s.
//!
//! A round builds the context (context crate: system prompt per mode with the skills
//! catalogue, budgeted window, compression), calls the model (streaming deltas out as events),
//! appends the answer to the store, runs the answer's tool calls in parallel (tools crate; the
//! `activate_skill` meta-tool through the skills crate) and appends each result as it is in.
//! Rounds repeat until a final answer, the round limit, a failure, or cancellation (dropping
//! the [`AgentRun`]).
//!
//! Everything the loop needs to go on is in the log: a model failure is appended with its
//! partial output (`continue` resumes from it), and [`Input::Resume`] picks a crashed or
//! cancelled run up from the log alone, running the calls that have no result yet.
//!

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ba_context::{
    BuilderSettings, ContextBudget, ContextBuilder, ContextError, MessageCounter, ModelTokenizer,
    Pipeline, Summarizer,
};
use ba_model::ModelClient;
use ba_protocol::tool::PermissionLevel;
use ba_protocol::{LogEntry, Mode};
use ba_skills::{ConversationLocks, SkillSet};
use ba_storage::workspace::Workspace;
use ba_storage::{ConversationId, ConversationStore, MetaUpdate, NewConversation, StorageError};
use ba_tools::{DataSink, Tool, ToolOverride, ToolRegistry, ToolRuntime, ToolsConfig, ToolsError};
use serde::{Deserialize, Serialize};
use tracing::Instrument as _;

use crate::adapters::{SkillTool, TASK_TOOL, TaskTool};
use crate::events::{AgentEvent, InputKind, RunSummary};
use crate::prompts::Prompts;
use crate::report::ConversationReport;
use crate::sources::{Sources, ToolSource};

/// Why an agent could not be built or a conversation could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A setting or a file of the configuration is wrong.
    #[error("configuration: {message}")]
    Config {
        /// What is wrong, naming the setting.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StorageError),
    /// The context could not be built.
    #[error(transparent)]
    Context(#[from] ContextError),
    /// A tool could not be registered.
    #[error(transparent)]
    Tools(#[from] ToolsError),
}

/// How the model is asked to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseMode {
    /// Native tool calling; the final answer is plain text (markdown or HTML).
    #[default]
    Native,
    /// Seed 003's structured JSON (P10): every answer is one JSON object whose action is a
    /// tool call or the complete report. Native tool calls are accepted too.
    Structured,
}

/// The settings of an agent; every field has a sensible default.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSettings {
    /// The model asked (a skill's `model` overrides it while the skill is active).
    pub model: String,
    /// Rounds (model calls) one run may make.
    pub max_rounds: u32,
    /// Output cap of a call.
    pub max_tokens: u32,
    /// Thinking budget; `None` leaves thinking off.
    pub thinking_budget: Option<u32>,
    /// Whether calls stream (deltas become events).
    pub stream: bool,
    /// Native or structured answers.
    pub response_mode: ResponseMode,
    /// The context budget.
    pub budget: ContextBudget,
    /// The compression strategy (see [`ba_context::STRATEGY_NAMES`]).
    pub strategy: String,
    /// The context builder's settings.
    pub builder: BuilderSettings,
    /// Tokens of one active skill's instructions put back after a compression, at most.
    pub skill_reinject_tokens: usize,
    /// Tokens of all re-injected instructions, at most.
    pub skill_reinject_total: usize,
    /// The permission level tools are called with.
    pub permission_level: PermissionLevel,
    /// Where spilled tool data goes when no data sink is configured.
    pub storage_dir: Option<PathBuf>,
    /// Times a malformed structured answer is sent back for a fix before it is taken as
    /// plain text.
    pub format_retries: u32,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            model: "claude-sonnet-4-5".to_owned(),
            max_rounds: 20,
            max_tokens: 4096,
            thinking_budget: None,
            stream: true,
            response_mode: ResponseMode::Native,
            budget: ContextBudget::new(200_000, 8_192),
            strategy: "key-messages".to_owned(),
            builder: BuilderSettings::default(),
            skill_reinject_tokens: 2_000,
            skill_reinject_total: 6_000,
            permission_level: PermissionLevel::Default,
            storage_dir: None,
            format_retries: 2,
        }
    }
}

/// What a run starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A new user message.
    Message(String),
    /// Go on after a failure: a `continue` message goes to the model with the failed turn
    /// (its partial output and `LLM_ERROR` block) before it.
    Continue,
    /// Pick up from the log alone: run calls that have no result yet, then call the model
    /// if the last turn is unanswered. A finished conversation gives its final answer back.
    Resume,
}

impl Input {
    /// A user message.
    pub fn message(text: impl Into<String>) -> Self {
        Self::Message(text.into())
    }

    /// Which kind of input this is (as [`AgentEvent::RunStarted`] reports it).
    pub fn kind(&self) -> InputKind {
        match self {
            Self::Message(_) => InputKind::Message,
            Self::Continue => InputKind::Continue,
            Self::Resume => InputKind::Resume,
        }
    }
}

/// How a run is started beyond its input: the caller's ids, recorded on the user entry it
/// appends, and the events a front end wants besides the default ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunOptions {
    /// The caller's id of the request that started the run (kept in the user entry's
    /// `extra`, so a retried request finds its run after a restart).
    pub request_id: Option<String>,
    /// The caller's id of the run (kept beside the request id).
    pub run_id: Option<String>,
    /// Send an [`AgentEvent::Entry`] for every entry appended.
    pub entry_events: bool,
    /// Send an [`AgentEvent::ContextStatus`] every round.
    pub context_status: bool,
}

impl RunOptions {
    /// Records the caller's request and run ids.
    pub fn with_ids(mut self, request_id: impl Into<String>, run_id: impl Into<String>) -> Self {
        self.request_id = Some(request_id.into());
        self.run_id = Some(run_id.into());
        self
    }

    /// Sends entry and context status events too.
    pub fn with_durable_events(mut self) -> Self {
        self.entry_events = true;
        self.context_status = true;
        self
    }
}

/// Cancels a run from anywhere (cheap to clone). Cancelling is cooperative and idempotent:
/// the model call in flight is cut and what it streamed is appended as an `llm_error` of kind
/// `cancelled`; tool calls under way are left to a resume; no new round starts.
#[derive(Debug, Clone)]
pub struct RunCanceller {
    tx: Arc<tokio::sync::watch::Sender<bool>>,
}

impl RunCanceller {
    /// Asks the run to stop now.
    pub fn cancel(&self) {
        self.tx.send_replace(true);
    }

    /// Whether the run was asked to stop.
    pub fn is_cancelled(&self) -> bool {
        *self.tx.borrow()
    }
}

/// What [`Agent::compact`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Compaction {
    /// Entries summarised.
    pub entries: usize,
    /// Message tokens before.
    pub tokens_before: usize,
    /// Tokens of the summary that replaces them.
    pub tokens_after: usize,
}

pub(crate) struct Inner {
    pub(crate) client: Arc<dyn ModelClient>,
    pub(crate) settings: AgentSettings,
    pub(crate) prompts: Prompts,
    /// The runtime over the agent's own tools; a run's runtime adds the sources' tools.
    pub(crate) runtime: Arc<ToolRuntime>,
    /// Tools that change between runs (MCP servers), read at each run's start.
    pub(crate) sources: Sources,
    pub(crate) skills: Option<SkillTool>,
    pub(crate) store: Arc<dyn ConversationStore>,
    /// The conversations' files: uploads, saved code, spilled data, outputs.
    pub(crate) workspace: Option<Arc<dyn Workspace>>,
    /// Builds every window: the strategy's pipeline and the one token cache.
    pub(crate) builder: ContextBuilder,
    /// Where spilled tool data goes, and the full output of a long result the window may later
    /// show as a preview or a trace.
    pub(crate) sink: Option<Arc<dyn DataSink>>,
    pub(crate) summarizer: Option<Arc<dyn Summarizer>>,
    pub(crate) runs: ConversationLocks,
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
            .field("tools", &self.inner.runtime)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Agent`]. Only the model client and the store are required.
#[derive(Clone)]
pub struct AgentBuilder {
    client: Arc<dyn ModelClient>,
    settings: AgentSettings,
    prompts: Prompts,
    tools: Vec<Arc<dyn Tool>>,
    tools_config: ToolsConfig,
    sink: Option<Arc<dyn DataSink>>,
    skills: Option<Arc<SkillSet>>,
    store: Option<Arc<dyn ConversationStore>>,
    workspace: Option<Arc<dyn Workspace>>,
    summarizer: Option<Arc<dyn Summarizer>>,
    sub_agents: bool,
    sources: Vec<Arc<dyn ToolSource>>,
    #[cfg(feature = "mcp")]
    mcp: Option<ba_mcp::McpManager>,
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("provider", &self.client.provider())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl AgentBuilder {
    /// A builder for an agent calling `client`.
    pub fn new(client: Arc<dyn ModelClient>) -> Self {
        Self {
            client,
            settings: AgentSettings::default(),
            prompts: Prompts::builtin(),
            tools: Vec::new(),
            tools_config: ToolsConfig::default(),
            sink: None,
            skills: None,
            store: None,
            workspace: None,
            summarizer: None,
            sub_agents: false,
            sources: Vec::new(),
            #[cfg(feature = "mcp")]
            mcp: None,
        }
    }

    /// Replaces all settings.
    pub fn settings(mut self, settings: AgentSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Changes the settings in place.
    pub fn configure(mut self, f: impl FnOnce(&mut AgentSettings)) -> Self {
        f(&mut self.settings);
        self
    }

    /// The model to ask.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.settings.model = model.into();
        self
    }

    /// The prompt texts.
    pub fn prompts(mut self, prompts: Prompts) -> Self {
        self.prompts = prompts;
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Adds a shared tool.
    pub fn tool_arc(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds shared tools (the business-analysis tools of `ba-builtins`, say).
    pub fn tools(mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Adds tools that may change between runs (an MCP server's): the source is read at the
    /// start of each run, and a run keeps the tool list it started with.
    pub fn tool_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.sources.push(source);
        self
    }

    /// Offers the tools of `manager`'s MCP servers, each under its model name, through the
    /// runtime like any tool (see [`crate::McpToolSource`]); binary results go to the data
    /// sink. Servers that are ready when a run starts are in its tool list; one that joins
    /// later is in the next run's.
    #[cfg(feature = "mcp")]
    pub fn mcp(mut self, manager: ba_mcp::McpManager) -> Self {
        self.mcp = Some(manager);
        self
    }

    /// The tool runtime's configuration.
    pub fn tools_config(mut self, config: ToolsConfig) -> Self {
        self.tools_config = config;
        self
    }

    /// Where spilled tool data goes.
    pub fn data_sink(mut self, sink: Arc<dyn DataSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// The skills the model may activate; their catalogue goes into the system prompt.
    pub fn skills(mut self, skills: Arc<SkillSet>) -> Self {
        self.skills = Some(skills);
        self
    }

    /// The conversation store (required).
    pub fn store(mut self, store: Arc<dyn ConversationStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The conversations' files (uploads, saved code, spilled data, outputs) when they are
    /// not the store's own ([`ConversationStore::workspace`], the default). Each tool call sees
    /// the files of its own conversation only; code blocks of final answers are saved there and
    /// `<code_ref>`s and `<file_ref>`s are resolved there.
    pub fn workspace(mut self, workspace: Arc<dyn Workspace>) -> Self {
        self.workspace = Some(workspace);
        self
    }

    /// The summarizer of the `summary` and `hybrid` strategies and of [`Agent::compact`]
    /// (for example a [`crate::ModelSummarizer`] on a cheaper model); the offline
    /// extractive one otherwise.
    pub fn summarizer(mut self, summarizer: Arc<dyn Summarizer>) -> Self {
        self.summarizer = Some(summarizer);
        self
    }

    /// Offers the `task` tool, which runs a child agent (with the same parts, without `task`)
    /// on a sub-task in its own conversation.
    pub fn sub_agents(mut self, on: bool) -> Self {
        self.sub_agents = on;
        self
    }

    /// Builds the agent.
    ///
    /// # Errors
    /// [`AgentError::Config`] without a store or with an unknown strategy;
    /// [`AgentError::Tools`] when two tools share a name or a schema is invalid.
    pub fn build(self) -> Result<Agent, AgentError> {
        let store = self.store.clone().ok_or_else(|| AgentError::Config {
            message: "no conversation store: call `.store(...)` on the builder".to_owned(),
        })?;
        let mut tools = self.tools.clone();
        if self.sub_agents {
            let child = self.clone().sub_agents(false).build()?;
            tools.push(Arc::new(TaskTool::new(child)));
        }
        let mut registry = ToolRegistry::new();
        for tool in tools {
            registry.register_arc(tool)?;
        }
        let mut config = self.tools_config.clone();
        if self.sub_agents {
            // A child run is long and must not be started twice by a retry.
            config
                .tools
                .entry(TASK_TOOL.to_owned())
                .or_insert_with(|| ToolOverride {
                    timeout_ms: Some(30 * 60 * 1000),
                    default_level: None,
                    retry: Some(ba_tools::RetryConfig {
                        max_retries: 0,
                        ..Default::default()
                    }),
                });
        }
        let tokenizer = tokenizer_for(&self.settings.model);
        let counter_for_tools = Arc::new(tokenizer);
        let mut runtime = ToolRuntime::new(registry, config)?.with_token_counter(counter_for_tools);
        if let Some(sink) = &self.sink {
            runtime = runtime.with_sink(Arc::clone(sink));
        }
        let sink = self.sink.clone();
        #[allow(unused_mut, reason = "only the `mcp` feature adds a source here")]
        let mut sources = self.sources.clone();
        #[cfg(feature = "mcp")]
        if let Some(manager) = &self.mcp {
            let mut source = crate::adapters::McpToolSource::new(manager.clone());
            if let Some(sink) = &sink {
                source = source.with_sink(Arc::clone(sink));
            }
            sources.push(Arc::new(source));
        }
        let pipeline =
            Pipeline::named(&self.settings.strategy, self.summarizer.clone()).map_err(|e| {
                AgentError::Config {
                    message: format!("strategy: {e}"),
                }
            })?;
        let builder = ContextBuilder::new(
            self.prompts.parts(),
            self.settings.builder,
            self.settings.budget,
            pipeline,
            MessageCounter::new(tokenizer),
        );
        let inner = Inner {
            client: self.client,
            settings: self.settings,
            prompts: self.prompts,
            runtime: Arc::new(runtime),
            sources: Sources::new(sources),
            skills: self.skills.map(SkillTool::new),
            workspace: self.workspace.or_else(|| store.workspace()),
            store,
            builder,
            sink,
            summarizer: self.summarizer,
            runs: ConversationLocks::new(1024),
        };
        Ok(Agent {
            inner: Arc::new(inner),
        })
    }
}

impl Agent {
    /// A builder for an agent calling `client`.
    pub fn builder(client: Arc<dyn ModelClient>) -> AgentBuilder {
        AgentBuilder::new(client)
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
        &self.inner.runtime
    }

    /// The tool runtime a run starting now would use: the agent's own tools and the tool
    /// sources' tools as they are now.
    pub fn current_tools(&self) -> Arc<ToolRuntime> {
        Arc::clone(&self.inner.sources.for_run(&self.inner.runtime).runtime)
    }

    /// The skills, when configured.
    pub fn skills(&self) -> Option<&Arc<SkillSet>> {
        self.inner.skills.as_ref().map(SkillTool::skills)
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

    /// Starts a run on a tokio task and returns its events as a stream. Dropping the stream
    /// cancels the run; what was appended stays, and [`Input::Resume`] goes on from it.
    /// Must be called within a tokio runtime.
    pub fn send(&self, id: &ConversationId, input: Input) -> AgentRun {
        self.send_with(id, input, RunOptions::default())
    }

    /// [`Agent::send`] with options: the caller's ids and more events.
    pub fn send_with(&self, id: &ConversationId, input: Input, options: RunOptions) -> AgentRun {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let inner = Arc::clone(&self.inner);
        let id = id.clone();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
        let signals = crate::run::Signals {
            stop: flag,
            cancel: cancel_rx,
        };
        // The caller's span (a `task` tool call, for a sub-agent) becomes the run's parent, so
        // a child agent's run nests in the call that started it; a front end has none.
        let task = tokio::spawn(
            async move {
                crate::run::run(inner, id, input, tx, signals, options).await;
            }
            .instrument(tracing::Span::current()),
        );
        AgentRun {
            rx,
            task: Some(task),
            stop,
            cancel: RunCanceller {
                tx: Arc::new(cancel_tx),
            },
        }
    }

    /// Summarises the conversation so far into one entry; later requests start from it.
    ///
    /// # Errors
    /// The store's; [`AgentError::Context`] when there is nothing to summarise or the
    /// summarizer fails.
    pub async fn compact(&self, id: &ConversationId) -> Result<Compaction, AgentError> {
        crate::compact::compact(&self.inner, id).await
    }

    /// The metrics report of a conversation, computed from its log.
    ///
    /// # Errors
    /// The store's.
    pub async fn report(&self, id: &ConversationId) -> Result<ConversationReport, AgentError> {
        let entries = self.inner.store.load(id).await?.into_entries();
        Ok(ConversationReport::from_log(id.as_str(), &entries))
    }

    /// What the next model call of a conversation would see, computed without changing the
    /// log: the entries kept, dropped (with the reason) and changed, and the budget's usage.
    ///
    /// # Errors
    /// The store's; [`AgentError::Context`] when the window cannot be built.
    pub async fn context_debug(
        &self,
        id: &ConversationId,
    ) -> Result<ba_context::DebugData, AgentError> {
        let meta = self.inner.store.metadata(id).await?;
        let log = self.inner.store.load(id).await?.into_entries();
        crate::run::preview(&self.inner, &log, meta.mode.unwrap_or_default()).await
    }

    /// The entries of a conversation.
    ///
    /// # Errors
    /// The store's.
    pub async fn entries(&self, id: &ConversationId) -> Result<Vec<LogEntry>, AgentError> {
        Ok(self.inner.store.load(id).await?.into_entries())
    }
}

/// The error of a run whose stream ended without [`AgentEvent::Finished`].
pub const NO_SUMMARY: &str = "the run ended without a summary (it was cancelled or panicked)";

/// A running conversation turn: a stream of [`AgentEvent`]s ending with
/// [`AgentEvent::Finished`]. Dropping it cancels the run.
#[derive(Debug)]
pub struct AgentRun {
    rx: tokio::sync::mpsc::UnboundedReceiver<AgentEvent>,
    task: Option<tokio::task::JoinHandle<()>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    cancel: RunCanceller,
}

impl AgentRun {
    /// A handle that cancels the run (see [`RunCanceller`]); keep reading the stream to its
    /// end, which comes with [`AgentEvent::Cancelled`] and [`AgentEvent::Finished`].
    pub fn canceller(&self) -> RunCanceller {
        self.cancel.clone()
    }

    /// Asks the run to stop at the end of its round: the model call and tool calls under way
    /// finish and land in the log, no new round starts, and the run ends with
    /// [`RunStatus::Stopped`](crate::RunStatus::Stopped). Keep reading the stream to its end.
    pub fn stop_after_round(&self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Waits for the end of the run, dropping the other events.
    pub async fn finish(mut self) -> RunSummary {
        use futures::StreamExt;
        while let Some(event) = self.next().await {
            if let AgentEvent::Finished(summary) = event {
                return summary;
            }
        }
        RunSummary::failed("", NO_SUMMARY)
    }

    /// Collects every event up to the end.
    pub async fn collect_events(mut self) -> Vec<AgentEvent> {
        use futures::StreamExt;
        let mut out = Vec::new();
        while let Some(event) = self.next().await {
            out.push(event);
        }
        out
    }
}

impl futures::Stream for AgentRun {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for AgentRun {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The tokenizer of `model`; `cl100k_base` for a model the context crate does not know.
fn tokenizer_for(model: &str) -> ModelTokenizer {
    ModelTokenizer::for_model(model)
        .unwrap_or_else(|| ModelTokenizer::exact(ba_context::Encoding::Cl100kBase))
}
