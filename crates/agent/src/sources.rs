//! Tools that change while the agent lives, and the one tool list of a run.
//!
//! The agent's own tools are fixed when it is built. A [`ToolSource`] (the MCP servers, see
//! `McpToolSource` behind the `mcp` feature) offers tools that come and go: a server that
//! starts after the first round, fails, or changes its list. The agent reads every source at
//! the start of each run and keeps what it read for the whole run ([`RunTools`]): the tool list
//! that opens every request of a run never changes mid-run (a change would void the provider's
//! prompt cache), and a run that starts later sees the new list. Sources are read again only
//! when their generation changed, so an unchanged agent reuses the same list, runtime and
//! compiled schemas run after run.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use ba_protocol::ToolSpec;
use ba_tools::{Tool, ToolRegistry, ToolRuntime};

use ba_protocol::{ServerInventoryRecord, ServerRecord};

use crate::adapters::SkillTool;

/// Tools that may change between runs, read at the start of each run.
pub trait ToolSource: Send + Sync + fmt::Debug {
    /// A number that changes whenever [`ToolSource::snapshot`] may give something else; the
    /// agent reads the snapshot again only then.
    fn generation(&self) -> u64;

    /// The tools offered now, and the servers behind them for the log's inventory record.
    fn snapshot(&self) -> SourceSnapshot;
}

/// What a [`ToolSource`] offers at one moment.
#[derive(Default)]
#[non_exhaustive]
pub struct SourceSnapshot {
    /// The tools, each registered under its own name.
    pub tools: Vec<Arc<dyn Tool>>,
    /// The servers behind them, for the inventory record (none for a source without servers).
    pub servers: Vec<ServerRecord>,
}

impl SourceSnapshot {
    /// A snapshot of `tools` from `servers`.
    pub fn new(tools: Vec<Arc<dyn Tool>>, servers: Vec<ServerRecord>) -> Self {
        Self { tools, servers }
    }
}

impl fmt::Debug for SourceSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceSnapshot")
            .field(
                "tools",
                &self.tools.iter().map(|t| t.name()).collect::<Vec<_>>(),
            )
            .field("servers", &self.servers)
            .finish()
    }
}

/// The tools of one run: the runtime whose registry holds the agent's own tools and the
/// sources' tools as they were when the run started, and the inventory of the sources'
/// servers (none when the agent has no source).
#[derive(Debug)]
pub(crate) struct RunTools {
    generations: Vec<u64>,
    pub(crate) runtime: Arc<ToolRuntime>,
    pub(crate) inventory: Option<ServerInventoryRecord>,
    /// The tools that came from the sources (MCP servers, plugins): those a request may leave
    /// out for the model to search; the agent's own are always sent.
    pub(crate) sourced: std::collections::HashSet<String>,
}

/// The agent's tools: the runtime over its own, the sources read at each run's start, and the
/// skills `activate_skill` offers.
#[derive(Debug)]
pub(crate) struct AgentTools {
    /// The runtime over the agent's own tools; a run's runtime adds the sources' tools.
    own: Arc<ToolRuntime>,
    sources: Sources,
    skills: Option<SkillTool>,
}

impl AgentTools {
    pub(crate) fn new(own: Arc<ToolRuntime>, sources: Sources, skills: Option<SkillTool>) -> Self {
        Self {
            own,
            sources,
            skills,
        }
    }

    /// The runtime over the agent's own tools.
    pub(crate) fn own(&self) -> &ToolRuntime {
        &self.own
    }

    /// The tools of a run starting now (see [`Sources::for_run`]).
    pub(crate) fn for_run(&self) -> Arc<RunTools> {
        self.sources.for_run(&self.own)
    }

    /// The skills, when configured.
    pub(crate) fn skills(&self) -> Option<&SkillTool> {
        self.skills.as_ref()
    }

    /// The skills catalogue of a system prompt, rendered now.
    pub(crate) fn catalogue(&self) -> Option<String> {
        self.skills.as_ref().map(|s| s.skills().render_catalogue())
    }
}

/// The agent's sources and the last [`RunTools`] built from them.
#[derive(Debug, Default)]
pub(crate) struct Sources {
    sources: Vec<Arc<dyn ToolSource>>,
    current: Mutex<Option<Arc<RunTools>>>,
}

impl Sources {
    pub(crate) fn new(sources: Vec<Arc<dyn ToolSource>>) -> Self {
        Self {
            sources,
            current: Mutex::new(None),
        }
    }

    /// The tools of a run starting now: the last ones when no source changed, otherwise the
    /// agent's own tools (`base`) with every source's, a source's tool whose name another
    /// tool already has being left out with a warning.
    pub(crate) fn for_run(&self, base: &Arc<ToolRuntime>) -> Arc<RunTools> {
        if self.sources.is_empty() {
            let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
            return Arc::clone(current.get_or_insert_with(|| {
                Arc::new(RunTools {
                    generations: Vec::new(),
                    runtime: Arc::clone(base),
                    inventory: None,
                    sourced: std::collections::HashSet::new(),
                })
            }));
        }
        let generations: Vec<u64> = self.sources.iter().map(|s| s.generation()).collect();
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tools) = current.as_ref()
            && tools.generations == generations
        {
            return Arc::clone(tools);
        }
        let mut registry: ToolRegistry = base.registry().clone();
        let mut servers = Vec::new();
        let mut sourced = std::collections::HashSet::new();
        for source in &self.sources {
            let mut snapshot = source.snapshot();
            for tool in snapshot.tools {
                let name = tool.name().to_owned();
                if let Err(e) = registry.register_arc(tool) {
                    tracing::warn!(tool = %name, "a tool of a tool source is left out: {e}");
                    for server in &mut snapshot.servers {
                        server.tools.retain(|t| *t != name);
                    }
                } else {
                    sourced.insert(name);
                }
            }
            servers.append(&mut snapshot.servers);
        }
        let tools = Arc::new(RunTools {
            generations,
            runtime: Arc::new(base.with_registry(registry)),
            inventory: Some(ServerInventoryRecord { servers }),
            sourced,
        });
        *current = Some(Arc::clone(&tools));
        tools
    }
}

impl RunTools {
    /// The specs of the runtime's tools, alphabetical.
    /// The tools offered, by name, with the meta-tools (those allowed under any skill, such
    /// as `activate_skill`) after the tools they govern — the order every request of the
    /// agent has always had, so a provider's cached prefix stays valid across versions.
    /// Tools offered only in run mode (a workflow's `complete_node`) are left out of the other
    /// modes' lists.
    pub(crate) fn specs(&self, mode: ba_protocol::Mode) -> Vec<ToolSpec> {
        let registry = self.runtime.registry();
        let capabilities = |spec: &ToolSpec| {
            registry
                .get(&spec.name)
                .map(|r| r.tool().capabilities())
                .unwrap_or_default()
        };
        let (meta, tools): (Vec<ToolSpec>, Vec<ToolSpec>) = registry
            .specs()
            .into_iter()
            .filter(|spec| mode == ba_protocol::Mode::Run || !capabilities(spec).run_mode_only)
            .filter(|spec| !capabilities(spec).finds_tools)
            .partition(|spec| capabilities(spec).always_allowed);
        tools.into_iter().chain(meta).collect()
    }

    /// The specs of the tool searches (offered only when a request leaves tools out; see
    /// [`crate::deferral`]).
    pub(crate) fn search_specs(&self) -> Vec<ToolSpec> {
        let registry = self.runtime.registry();
        registry
            .specs()
            .into_iter()
            .filter(|spec| {
                registry
                    .get(&spec.name)
                    .is_some_and(|r| r.tool().capabilities().finds_tools)
            })
            .collect()
    }
}
