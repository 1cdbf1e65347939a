//! The context of one call, built by the context crate's [`ba_context::ContextBuilder`] (one
//! window algorithm, one token cache): the system prompt for the mode with the skills catalogue
//! and, in structured mode, the reply format; the budgeted window; and the instructions of
//! active skills when a compression took their activation out.

use std::collections::HashSet;
use std::sync::Arc;

use ba_storage::ConversationId;

use ba_context::BuildRequest;
use ba_context::BuiltContext;
use ba_protocol::{ContextRecord, LogEntry};

use super::{Runner, Stop};
use crate::agent::Agent;
use crate::error::AgentError;
use crate::events::AgentEvent;
use crate::history::{ActiveSkill, History, current_task};
use crate::ids::{new_id, now};
use crate::parts::Inner;
use crate::settings::ResponseMode;

/// The context of one call.
pub(super) struct Built {
    pub(super) system: String,
    pub(super) entries: Vec<LogEntry>,
    /// Leading entries that repeat in the next calls until the next compaction.
    pub(super) stable: usize,
    /// The share of the budget used.
    pub(super) usage: f64,
    pub(super) record: ContextRecord,
}

impl Runner {
    /// Builds the context of the next call. A compaction is appended to the log before the
    /// call, so every later call starts from it.
    pub(super) async fn build_context(&mut self, active: &[ActiveSkill]) -> Result<Built, Stop> {
        let inner = Arc::clone(&self.inner);
        let view = self.history.context_view();
        let memory = crate::adapters::index_in_log(self.history.all());
        let mut request = build_request(
            &inner,
            view,
            memory,
            self.mode,
            self.kit.specs(),
            self.kit.catalogue.as_deref(),
        );
        if self.mode == ba_protocol::Mode::Run
            && let Some(w) = &self.workflow
        {
            w.shape(&mut request);
        }
        let tool_tokens = request.fixed_tokens;
        let sizing =
            crate::budget::sizing(self.inner.settings.budget, self.history.all(), tool_tokens);
        let room = sizing.tools_take_room;
        if !room {
            request.fixed_tokens = 0;
        }
        let mut built = self.build(&request, sizing.budget).await?;
        // Active skills whose activation the model no longer reads whole get their
        // instructions back in the system prompt (the same ones every round until the next
        // compaction, so the prompt stays the same).
        let mut reinjected = Vec::new();
        let missing = not_read_whole(&built.debug, active);
        if !missing.is_empty() {
            request
                .system_sections
                .extend(self.reinjection(&missing, &mut reinjected));
            if !reinjected.is_empty() {
                built = self.build(&request, sizing.budget).await?;
            }
        }
        if let Some(compaction) = &built.compaction {
            let entry = compaction.clone().into_entry(new_id(), now());
            self.append(entry).await?;
            self.emit(AgentEvent::ContextCompressed {
                round: self.round,
                tokens_before: built.debug.tokens_before,
                tokens_after: built.debug.tokens_after,
                strategies: built.debug.strategies.clone(),
                dropped: built.debug.dropped.len(),
                skills_reinjected: reinjected.clone(),
            });
        }
        let debug = &built.debug;
        if self.options.context_status {
            self.context_status(debug, sizing.budget);
        }
        let record = ContextRecord {
            compressed: debug.compressed,
            tokens_before: debug.tokens_before,
            tokens_after: debug.tokens_after,
            system_tokens: debug.system_tokens,
            // Everything sent, as the calibration reads it: the definitions too when the
            // window made no room for them.
            used: debug.usage.used + if room { 0 } else { tool_tokens },
            tool_tokens,
            strategies: debug.strategies.clone(),
            dropped: debug.dropped.len(),
            skills_reinjected: reinjected,
            tools_sent: self.kit.specs().len(),
            tools_deferred: self.kit.deferred(),
        };
        let total = sizing.budget.total;
        let usage = if total == 0 {
            0.0
        } else {
            debug.usage.used as f64 / total as f64
        };
        Ok(Built {
            system: built.system,
            stable: built.stable,
            entries: built.entries,
            usage,
            record,
        })
    }

    async fn build(
        &self,
        request: &BuildRequest<'_>,
        budget: ba_context::ContextBudget,
    ) -> Result<BuiltContext, Stop> {
        let builder = self.inner.builders.for_budget(budget);
        Ok(builder.build(request).await.map_err(AgentError::from)?)
    }

    /// Reports how full the window is, as the meter reads it: in the server's tokens, the
    /// window it was sized to (learned or configured) and the local count scaled by the
    /// calibration.
    fn context_status(&self, debug: &ba_context::DebugData, budget: ba_context::ContextBudget) {
        let usage = debug.usage;
        let window = crate::budget::window_record(self.history.all())
            .and_then(|w| usize::try_from(w.tokens).ok())
            .unwrap_or(self.inner.settings.budget.total);
        let scale = window as f64 / budget.total.max(1) as f64;
        let used = (usage.used as f64 * scale).round() as usize;
        self.emit(AgentEvent::ContextStatus {
            round: self.round,
            used,
            total: window,
            percent: if window == 0 {
                0.0
            } else {
                used as f64 * 100.0 / window as f64
            },
            status: if debug.compressed {
                crate::events::ContextLevel::Compressing
            } else {
                usage.status.into()
            },
        });
    }

    /// The instructions of `skills` as system sections, each cut to the per-skill cap, all
    /// within the total cap; the names of the skills put back go to `names`.
    fn reinjection(&self, skills: &[&ActiveSkill], names: &mut Vec<String>) -> Vec<String> {
        let settings = &self.inner.settings;
        let counter = self.inner.builders.counter();
        let mut left = settings.skill_reinject_total;
        let mut out = Vec::new();
        for s in skills {
            let Some(entry) = self.history.find(&s.entry_id) else {
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
            out.push(format!(
                "ACTIVE SKILL {} (instructions kept after compression)\n{}",
                s.name, body
            ));
            names.push(s.name.clone());
        }
        out
    }
}

/// The skills of `active` whose activation the window `debug` describes does not show whole
/// (left out, or traced, cut or summarised).
fn not_read_whole<'a>(
    debug: &ba_context::DebugData,
    active: &'a [ActiveSkill],
) -> Vec<&'a ActiveSkill> {
    let whole: HashSet<&str> = debug
        .kept
        .iter()
        .map(String::as_str)
        .filter(|id| !debug.altered.iter().any(|a| a == id))
        .collect();
    active
        .iter()
        .filter(|s| !whole.contains(s.entry_id.as_str()))
        .collect()
}

/// The request of the next call's window over `view` (the log after the last compaction): the
/// system sections (memory index, skills catalogue, reply format), the pinned skill instructions and the
/// tokens of the tool list.
pub(crate) fn build_request<'a>(
    inner: &Inner,
    view: &'a [LogEntry],
    memory: Option<String>,
    mode: ba_protocol::Mode,
    tools: &[ba_protocol::ToolSpec],
    catalogue: Option<&str>,
) -> BuildRequest<'a> {
    let mut sections = Vec::new();
    // The memory index as it was when the conversation started (or last compacted).
    sections.extend(memory);
    if let Some(catalogue) = catalogue
        && !catalogue.trim().is_empty()
    {
        sections.push(format!(
            "SKILLS\nActivate a skill with the activate_skill tool before a task it covers.\n{}",
            catalogue.trim_end()
        ));
    }
    if inner.settings.response_mode == ResponseMode::Structured {
        sections.push(format!(
            "RESPONSE FORMAT\n{}",
            inner.builders.prompts().structured_format
        ));
    }
    // A skill's instructions are read in full while its activation is in the window.
    let pinned = view
        .iter()
        .filter(|e| e.records.skill.is_some())
        .map(|e| e.id.clone())
        .collect();
    let fixed_tokens = inner.builders.spec_tokens(tools);
    BuildRequest {
        entries: view,
        mode,
        task: current_task(view),
        system_sections: sections,
        pinned,
        fixed_tokens,
        ..BuildRequest::default()
    }
}

impl Agent {
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
        preview(&self.inner, &history, meta.mode.unwrap_or_default()).await
    }
}

/// What the next model call of a conversation would see, built without appending anything:
/// the debug data of the window (kept, dropped with the reason, changed, usage), in the
/// budget a run would build it for (the window the server named, the calibration).
async fn preview(
    inner: &Inner,
    history: &History,
    mode: ba_protocol::Mode,
) -> Result<ba_context::DebugData, AgentError> {
    let tools = super::tools::tool_specs_of(inner, mode);
    let catalogue = inner.tools.catalogue();
    let workflow = crate::workflow::WorkflowRun::from_log(history.all());
    let mut request = build_request(
        inner,
        history.context_view(),
        crate::adapters::index_in_log(history.all()),
        mode,
        &tools,
        catalogue.as_deref(),
    );
    if mode == ba_protocol::Mode::Run
        && let Some(w) = &workflow
    {
        w.shape(&mut request);
    }
    let tool_tokens = inner.builders.spec_tokens(&tools);
    let sizing = crate::budget::sizing(inner.settings.budget, history.all(), tool_tokens);
    if !sizing.tools_take_room {
        request.fixed_tokens = 0;
    }
    Ok(inner
        .builders
        .for_budget(sizing.budget)
        .build(&request)
        .await?
        .debug)
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
