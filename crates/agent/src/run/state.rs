//! The parts of a run's state that own what they hold: its tool kit, its watch on the lease,
//! the title it gives. They know nothing of the runner that holds them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ba_protocol::ToolSpec;
use ba_storage::RunLease;

use crate::adapters::WorkspaceFiles;
use crate::budget::Builders;
use crate::sources::RunTools;

/// What a run's tool calls work with, taken when the run started and kept to its end.
pub(super) struct RunKit {
    /// The tools of this run, read from the sources when it started.
    pub(super) tools: Arc<RunTools>,
    /// The tool list every request of this run opens with (the runtime's tools and
    /// `activate_skill`).
    specs: Vec<ToolSpec>,
    /// The local count of `specs`.
    spec_tokens: usize,
    /// How many tools the list leaves for the tool search, and how many found ones it sends.
    deferred: usize,
    found: usize,
    /// The tools held back for the provider's own search (none when ours searches).
    native_deferred: Vec<ToolSpec>,
    /// The skills catalogue of this run's system prompt, rendered when it started (a reload
    /// of the skills shows in the next run).
    pub(super) catalogue: Option<String>,
    /// What this run's tool calls share (the skills activated so far, on one stack).
    pub(super) scope: Arc<ba_tools::RunScope>,
    /// The files this run's tool calls see: its conversation's workspace (a sub-agent's, its
    /// top parent's), when the agent has one.
    pub(super) files: Option<Arc<WorkspaceFiles>>,
}

impl RunKit {
    /// The kit of a run starting now with `tools`: the list of the default mode until the run
    /// has read its conversation's (see [`RunKit::offer`]).
    pub(super) fn new(
        tools: Arc<RunTools>,
        catalogue: Option<String>,
        files: Option<Arc<WorkspaceFiles>>,
        builders: &Builders,
    ) -> Self {
        let mut kit = Self {
            tools,
            specs: Vec::new(),
            spec_tokens: 0,
            deferred: 0,
            found: 0,
            native_deferred: Vec::new(),
            catalogue,
            scope: Arc::default(),
            files,
        };
        kit.offer(
            ba_protocol::Mode::default(),
            builders,
            &crate::deferral::ToolSearchSettings::default(),
            &[],
            0,
            false,
        );
        kit
    }

    /// Takes the tool list of `mode` — its tools past the settings' limits left for the tool
    /// search (those `found` so far sent, last) — and its local count: the calibration adds
    /// the count to each call's window, as the server counts the definitions in its prompt.
    pub(super) fn offer(
        &mut self,
        mode: ba_protocol::Mode,
        builders: &Builders,
        settings: &crate::deferral::ToolSearchSettings,
        found: &[String],
        window_tokens: usize,
        native: bool,
    ) {
        let registry = self.tools.runtime.registry();
        let finds_tools = |spec: &ToolSpec| {
            registry
                .get(&spec.name)
                .is_some_and(|r| r.tool().capabilities().finds_tools)
        };
        let count = |specs: &[ToolSpec]| builders.spec_tokens(specs);
        let kinds = crate::deferral::ToolKinds {
            sourced: &self.tools.sourced,
            finds_tools: &finds_tools,
            count: &count,
        };
        let mut all = self.tools.specs(mode);
        all.extend(self.tools.search_specs());
        let offer = crate::deferral::offer(all, &kinds, settings, found, window_tokens, native);
        self.deferred = offer.deferred.len();
        self.found = found.len();
        self.native_deferred = if native {
            offer.deferred.clone()
        } else {
            Vec::new()
        };
        self.scope
            .get_or_default::<crate::adapters::DeferredTools>()
            .set(offer.searchable, settings.search);
        self.specs = offer.sent;
        self.spec_tokens = builders.spec_tokens(&self.specs);
    }

    /// The tools held back for the provider's own search.
    pub(super) fn native_deferred(&self) -> &[ToolSpec] {
        &self.native_deferred
    }

    /// How many tools the list leaves for the tool search.
    pub(super) fn deferred(&self) -> usize {
        self.deferred
    }

    /// How many found tools the list was made with (a search since means a new list).
    pub(super) fn found_count(&self) -> usize {
        self.found
    }

    /// The tools offered: every tool of the run's runtime (the agent's own, `activate_skill`
    /// among them when skills are configured, and the tool sources' as they were when the run
    /// started), the same list every round of a run. A skill's `allowed_tools` is not
    /// applied by removing tools (the list opens every request, and a change would void the
    /// provider's prompt cache): the runtime refuses a call outside it, and the activation told
    /// the model. Tools that join later (an MCP server that finished starting) are in the next
    /// run's list.
    pub(super) fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// The local count of the tool list.
    pub(super) fn spec_tokens(&self) -> usize {
        self.spec_tokens
    }
}

/// A run's lease as the run looks at it before each write: the lease itself is its task's
/// (which lets it go before `Finished`); a loss found here or by the store watch marks it.
#[derive(Default)]
pub(super) struct LeaseWatch {
    lost: Arc<AtomicBool>,
    lease: std::sync::Weak<RunLease>,
}

impl LeaseWatch {
    /// Watches `lease`; the flag the store watch raises when it finds the lease lost.
    pub(super) fn watch(&mut self, lease: &Arc<RunLease>) -> Arc<AtomicBool> {
        self.lease = Arc::downgrade(lease);
        Arc::clone(&self.lost)
    }

    /// Whether the lease was lost (nothing more may be written).
    pub(super) fn is_lost(&self) -> bool {
        if self.lease.upgrade().is_some_and(|l| !l.is_held()) {
            self.lost.store(true, Ordering::SeqCst);
        }
        self.lost.load(Ordering::SeqCst)
    }
}

/// The conversation's title as a run gives it one: from its first question, then perhaps
/// the summary model's.
#[derive(Default)]
pub(super) struct Naming {
    /// The conversation has no title yet: its first question gives one.
    pub(super) untitled: bool,
    /// The summary model writing a better title, awaited (bounded) before the run ends.
    pub(super) task: Option<tokio::task::JoinHandle<()>>,
}

impl Naming {
    /// Whether the conversation still needs its first title; it is given now.
    pub(super) fn take_untitled(&mut self) -> bool {
        std::mem::take(&mut self.untitled)
    }
}
