//! The ReAct orchestrator (O1): an [`Agent`] built once from its parts, running conversations
//! as async streams of [`AgentEvent`]s.
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
//!

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ba_context::{
    BuilderSettings, ContextBudget, ContextBuilder, MessageCounter, ModelTokenizer, Pipeline,
    Summarizer,
};
use ba_model::ModelClient;
use ba_protocol::PermissionLevel;
use ba_protocol::{LogEntry, Mode};
use ba_skills::SkillSet;
use ba_storage::Workspace;
use ba_storage::{
    ConversationId, ConversationStore, MetaUpdate, NewConversation, RunHolder, RunLease,
};
use ba_tools::{DataSink, Tool, ToolRegistry, ToolRuntime, ToolsConfig};
use serde::{Deserialize, Serialize};
use tracing::Instrument as _;

use crate::adapters::{SkillTool, TaskTool};
use crate::compact::{Compaction, Compactor};
use crate::error::AgentError;
use crate::events::InputKind;
use crate::history::{History, whole_log};
use crate::prompts::Prompts;
use crate::report::ConversationReport;
use crate::run::{CancelOutcome, Control, LiveRuns, Run, Signal};
use crate::sources::{Sources, ToolSource};

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
    /// How often a run looks in the store for a cancel request from another process.
    pub cancel_poll: Duration,
    /// Who runs, as a lease names it to anyone refused (`ba-agent serve`); the process id and
    /// host are added.
    pub holder: String,
    /// Which tool calls wait for a person's approval.
    pub approvals: crate::ApprovalSettings,
    /// Prices per model, for the cost in the metrics report and under each answer (none by
    /// default: tokens are reported, money is not guessed).
    pub prices: crate::Prices,
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
            cancel_poll: Duration::from_secs(1),
            holder: "ba-agent".to_owned(),
            approvals: crate::ApprovalSettings::default(),
            prices: crate::Prices::default(),
        }
    }
}

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
    /// Start a run of the workflow `name` (one of [`AgentBuilder::workflows`]) with `inputs`
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

    /// Which kind of input this is (as [`AgentEvent::RunStarted`] reports it).
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
    /// Builds every window of the configured budget: the strategy's pipeline and the one token
    /// cache.
    pub(crate) builder: Arc<ContextBuilder>,
    /// Builders of the budgets a conversation's learned window or calibration gives, made like
    /// `builder` (see `run::window`).
    pub(crate) builders: std::sync::Mutex<Vec<(ba_context::ContextBudget, Arc<ContextBuilder>)>>,
    /// Where spilled tool data goes, and the full output of a long result the window may later
    /// show as a preview or a trace.
    pub(crate) sink: Option<Arc<dyn DataSink>>,
    pub(crate) summarizer: Option<Arc<dyn Summarizer>>,
    /// The runs going on in this process, for cancels by run id.
    pub(crate) live: Arc<LiveRuns>,
    /// The operator's hooks, in order.
    pub(crate) hooks: Vec<Arc<dyn crate::Hook>>,
    /// The workflows a run can start ([`Input::Workflow`]).
    pub(crate) workflows: Arc<ba_skills::WorkflowSet>,
    /// How this process is named to a run refused the lease: the settings' `holder`, the
    /// process id and the host.
    pub(crate) holder: String,
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
    recall: bool,
    sources: Vec<Arc<dyn ToolSource>>,
    hooks: Vec<Arc<dyn crate::Hook>>,
    workflows: Arc<ba_skills::WorkflowSet>,
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
            recall: true,
            sources: Vec::new(),
            hooks: Vec::new(),
            workflows: Arc::default(),
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

    /// The workflows a run can start ([`Input::Workflow`]); none by default.
    pub fn workflows(mut self, workflows: Arc<ba_skills::WorkflowSet>) -> Self {
        self.workflows = workflows;
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

    /// Offers the `recall` tool (on by default): the model reads whole, a page at a time, an
    /// entry of the conversation that a compressed window shows only as a trace
    /// (`full output: recall m32`).
    pub fn recall(mut self, on: bool) -> Self {
        self.recall = on;
        self
    }

    /// Adds a hook (run in the order added; see [`crate::Hook`] and [`crate::CommandHook`]).
    pub fn hook(mut self, hook: Arc<dyn crate::Hook>) -> Self {
        self.hooks.push(hook);
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
        let skills = self.skills.clone().map(SkillTool::new);
        let mut registry = ToolRegistry::new();
        for tool in tools {
            registry.register_arc(tool)?;
        }
        // Last of the agent's own tools, as the model has always been offered it.
        if let Some(skill_tool) = &skills {
            registry.register_arc(Arc::new(skill_tool.clone()))?;
        }
        if self.recall {
            registry.register_arc(Arc::new(crate::adapters::RecallTool::new(Arc::clone(
                &store,
            ))))?;
        }
        // `complete_node`, offered in run mode, when there is a workflow to run.
        if self.workflows.workflows().next().is_some() {
            registry.register_arc(Arc::new(crate::adapters::CompleteNodeTool))?;
        }
        let config = self.tools_config.clone();
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
        let builder = Arc::new(ContextBuilder::new(
            self.prompts.parts(),
            self.settings.builder,
            self.settings.budget,
            pipeline,
            MessageCounter::new(tokenizer),
        ));
        let holder = format!(
            "{}, pid {} on {}",
            self.settings.holder,
            std::process::id(),
            host_name()
        );
        let inner = Inner {
            holder,
            client: self.client,
            settings: self.settings,
            prompts: self.prompts,
            runtime: Arc::new(runtime),
            sources: Sources::new(sources),
            skills,
            workspace: self.workspace.or_else(|| store.workspace()),
            store,
            builder,
            builders: std::sync::Mutex::default(),
            sink,
            summarizer: self.summarizer,
            live: Arc::default(),
            hooks: self.hooks,
            workflows: self.workflows,
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

    /// Starts a run on a tokio task and returns its events as a stream. The run takes the
    /// conversation's lease first; when another run holds it, the stream says so (an
    /// [`AgentEvent::Error`] of kind `busy` naming the holder, then a failed
    /// [`AgentEvent::Finished`]). Dropping the stream cancels the run; what was appended stays,
    /// and [`Input::Resume`] goes on from it. Must be called within a tokio runtime.
    pub fn send(&self, id: &ConversationId, input: Input) -> Run {
        self.send_with(id, input, RunOptions::default())
    }

    /// [`Agent::send`] with options: the caller's ids and more events.
    pub fn send_with(&self, id: &ConversationId, input: Input, options: RunOptions) -> Run {
        let run_id = run_id_of(&options);
        self.spawn(id, input, options, run_id, None)
    }

    /// Takes the conversation's lease, then starts the run as [`Agent::send_with`] does: a
    /// refusal comes back here, before anything runs.
    ///
    /// # Errors
    /// [`AgentError::Busy`] naming the run that holds the conversation; the store's.
    pub async fn start(
        &self,
        id: &ConversationId,
        input: Input,
        options: RunOptions,
    ) -> Result<Run, AgentError> {
        let run_id = run_id_of(&options);
        let lease = crate::run::take_lease(&self.inner, id, &run_id).await?;
        Ok(self.spawn(id, input, options, run_id, Some(lease)))
    }

    fn spawn(
        &self,
        id: &ConversationId,
        input: Input,
        options: RunOptions,
        run_id: String,
        lease: Option<RunLease>,
    ) -> Run {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (control, signal) = Control::new();
        let live = self.inner.live.insert(id, &run_id, control.clone());
        let launch = crate::run::Launch {
            inner: Arc::clone(&self.inner),
            id: id.clone(),
            input,
            options,
            run_id: run_id.clone(),
            lease,
            tx,
            control: control.clone(),
            signal,
            live,
        };
        // The caller's span (a `task` tool call, for a sub-agent) becomes the run's parent, so
        // a child agent's run nests in the call that started it; a front end has none.
        tokio::spawn(crate::run::run(launch).instrument(tracing::Span::current()));
        Run::new(run_id, rx, control)
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
        if let Some(control) = self.inner.live.get(id, &target) {
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
        let _lease = crate::run::take_lease(
            inner,
            id,
            &format!("compact_{}", uuid::Uuid::new_v4().simple()),
        )
        .await?;
        let mut history = History::open(Arc::clone(&inner.store), id.clone()).await?;
        let compactor = Compactor {
            hooks: &inner.hooks,
            counter: inner.builder.counter(),
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
        let history = History::open(Arc::clone(&self.inner.store), id.clone()).await?;
        crate::run::preview(&self.inner, &history, meta.mode.unwrap_or_default()).await
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

/// The run id of `options`, or a new one.
fn run_id_of(options: &RunOptions) -> String {
    options
        .run_id
        .clone()
        .unwrap_or_else(|| format!("run_{}", uuid::Uuid::new_v4().simple()))
}

/// The host's name, as the kernel has it; `localhost` where it cannot be read.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty() && h.len() <= 64 && !h.contains(char::is_control))
        .unwrap_or_else(|| "localhost".to_owned())
}

impl Inner {
    /// A builder like the agent's own (prompts, strategy, tokenizer) for another budget.
    pub(crate) fn make_builder(&self, budget: ba_context::ContextBudget) -> ContextBuilder {
        // The strategy's name was checked when the agent was built.
        let pipeline = Pipeline::named(&self.settings.strategy, self.summarizer.clone())
            .unwrap_or_else(|_| Pipeline::new(Vec::new()));
        ContextBuilder::new(
            self.prompts.parts(),
            self.settings.builder,
            budget,
            pipeline,
            MessageCounter::new(tokenizer_for(&self.settings.model)),
        )
    }
}

/// The tokenizer of `model`; `cl100k_base` for a model the context crate does not know.
fn tokenizer_for(model: &str) -> ModelTokenizer {
    ModelTokenizer::for_model(model)
        .unwrap_or_else(|| ModelTokenizer::exact(ba_context::Encoding::Cl100kBase))
}
