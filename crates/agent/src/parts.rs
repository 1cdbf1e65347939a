//! What an agent is made of, shared by its runs and its other operations: the model client,
//! the settings, the store and the conversations' files, the tools, the window builders, the
//! hooks and workflows, and the leases. Each group owns its state and says what it does with
//! it ([`AgentTools`], [`Builders`], [`Leases`]); a run borrows the whole through an `Arc`.

use std::sync::Arc;

use ba_context::Summarizer;
use ba_model::ModelClient;
use ba_storage::{ConversationStore, Workspace};
use ba_tools::DataSink;

use crate::budget::Builders;
use crate::hooks::Hook;
use crate::lease::Leases;
use crate::settings::AgentSettings;
use crate::sources::AgentTools;

pub(crate) struct Inner {
    pub(crate) client: Arc<dyn ModelClient>,
    pub(crate) settings: AgentSettings,
    pub(crate) store: Arc<dyn ConversationStore>,
    /// The conversations' files: uploads, saved code, spilled data, outputs.
    pub(crate) workspace: Option<Arc<dyn Workspace>>,
    /// Where spilled tool data goes, and the full output of a long result the window may later
    /// show as a preview or a trace.
    pub(crate) sink: Option<Arc<dyn DataSink>>,
    /// The agent's own tools, the tool sources and the skills.
    pub(crate) tools: AgentTools,
    /// Builds every window (with the prompt texts), in the budget a conversation calls for.
    pub(crate) builders: Builders,
    /// The summary model of titles and `/compact`, when one is configured.
    pub(crate) summarizer: Option<Arc<dyn Summarizer>>,
    /// The operator's hooks, in order.
    pub(crate) hooks: Vec<Arc<dyn Hook>>,
    /// The workflows a run can start ([`crate::Input::Workflow`]).
    pub(crate) workflows: Arc<ba_skills::WorkflowSet>,
    /// The conversations' leases, and the runs going on in this process.
    pub(crate) leases: Leases,
}
