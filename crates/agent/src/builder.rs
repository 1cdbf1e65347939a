//! Building an [`Agent`]: [`AgentBuilder`] takes the model client, the store and every
//! optional part, and checks them once.

use std::sync::Arc;

use ba_context::{Embedder, Summarizer};
use ba_model::ModelClient;
use ba_skills::SkillSet;
use ba_storage::{ConversationStore, Workspace};
use ba_tools::{DataSink, Tool, ToolRegistry, ToolRuntime, ToolsConfig};

use crate::adapters::{SkillTool, TaskTool};
use crate::agent::Agent;
use crate::budget::{Builders, Strategy, tokenizer_for};
use crate::error::AgentError;
use crate::lease::Leases;
use crate::parts::Inner;
use crate::prompts::Prompts;
use crate::settings::AgentSettings;
use crate::sources::{AgentTools, Sources, ToolSource};

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
    embedder: Option<Arc<dyn Embedder>>,
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
            embedder: None,
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

    /// The workflows a run can start ([`crate::Input::Workflow`]); none by default.
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

    /// Embeddings for the `retrieval` strategy (an OpenAI-compatible endpoint through
    /// [`ba_model::OpenAiEmbeddings`], say): passages are ranked by BM25 and by the cosine of
    /// their vectors to the latest question's. A compaction during which the endpoint fails
    /// ranks by BM25 alone and logs a warning; the turn goes on.
    pub fn embeddings(mut self, embeddings: Arc<dyn ba_model::Embeddings>) -> Self {
        self.embedder = Some(Arc::new(crate::adapters::ModelEmbedder::new(embeddings)));
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
        if let Some(mode) = self.settings.memory
            && let Some(tool) = crate::adapters::MemoryTool::new(Arc::clone(&store), mode)
        {
            registry.register_arc(Arc::new(tool))?;
        }
        if self.recall {
            registry.register_arc(Arc::new(crate::adapters::RecallTool::new(Arc::clone(
                &store,
            ))))?;
        }
        // The tool search, offered when a request leaves tools out.
        if self.settings.tool_search.defer != crate::DeferMode::Never {
            registry.register_arc(Arc::new(crate::adapters::ToolSearchTool))?;
        }
        // `complete_node`, offered in run mode, when there is a workflow to run.
        if self.workflows.workflows().next().is_some() {
            registry.register_arc(Arc::new(crate::adapters::CompleteNodeTool))?;
        }
        let config = self.tools_config.clone();
        let counter_for_tools = Arc::new(tokenizer_for(&self.settings.model));
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
        let builders = Builders::new(
            self.prompts,
            self.settings.builder,
            self.settings.budget,
            Strategy {
                name: self.settings.strategy.clone(),
                summarizer: self.summarizer.clone(),
                embedder: self.embedder.clone(),
                retrieval_share: self.settings.retrieval_share,
            },
            &self.settings.model,
        )
        .map_err(|e| AgentError::Config {
            message: format!("strategy: {e}"),
        })?;
        let holder = format!(
            "{}, pid {} on {}",
            self.settings.holder,
            std::process::id(),
            host_name()
        );
        let inner = Inner {
            leases: Leases::new(Arc::clone(&store), holder),
            client: self.client,
            settings: self.settings,
            tools: AgentTools::new(Arc::new(runtime), Sources::new(sources), skills),
            workspace: self.workspace.or_else(|| store.workspace()),
            store,
            builders,
            sink,
            summarizer: self.summarizer,
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
}

/// The host's name, as the kernel has it; `localhost` where it cannot be read.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty() && h.len() <= 64 && !h.contains(char::is_control))
        .unwrap_or_else(|| "localhost".to_owned())
}
