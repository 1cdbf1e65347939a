//! The context builder (C5–C6): the system prompt composed per mode, the session's file list,
//! tool outputs as preview + path, read-file synopses, refocus reminders, then the budgeted
//! window and its debug data.

use ba_protocol::{Content, LogEntry, LogRole, Mode};
use serde::Serialize;

use crate::budget::{ContextBudget, ContextUsage};
use crate::error::Result;
use crate::message::MessageCounter;
use crate::pipeline::Pipeline;
use crate::strategy::head_tail;
use crate::window::{Changed, Dropped};

/// The pieces the system prompt is made of.
#[derive(Debug, Clone, Default)]
pub struct PromptParts {
    /// Rules for every mode.
    pub base_rules: String,
    /// How tools may be used.
    pub tool_policy: String,
    /// The agent's persona (agent mode).
    pub persona: Option<String>,
    /// The run's directive (run mode).
    pub run_directive: Option<String>,
    /// The active node's brief (run mode, while a step is active).
    pub node_brief: Option<String>,
    /// The active step's context (run mode, while a step is active).
    pub step_context: Option<String>,
    /// What to do once the run completed (post-completion profile).
    pub post_run_protocol: Option<String>,
}

/// Where a workflow run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunState {
    /// A step is active: the node brief and step context are injected.
    #[default]
    Active,
    /// The run completed: only the directive and the post-run protocol.
    Completed,
}

/// A file of the session (code written or a user upload).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionFile {
    /// Its path.
    pub path: String,
    /// `code` or `upload`.
    pub kind: String,
    /// One line about it.
    pub description: String,
}

/// A file that was read in full, and the synopsis later windows carry instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFile {
    /// Its path, as the read tool's arguments name it.
    pub path: String,
    /// The synopsis.
    pub synopsis: String,
}

/// Settings of the builder (seed 002 §7).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BuilderSettings {
    /// Entries in a window at most.
    pub max_messages: usize,
    /// Characters of the window at most, a fallback when no exact count is wanted.
    pub max_chars: usize,
    /// Whether tool results are sent (otherwise a one-line stand-in).
    pub include_tool_results: bool,
    /// Whether collapsed UI-only entries are sent.
    pub include_collapsed: bool,
    /// A task reminder every this many user rounds (0: never).
    pub refocus_every: usize,
    /// Tool outputs longer than this are sent as a preview with the path of the full output.
    pub tool_preview_chars: usize,
}

impl Default for BuilderSettings {
    fn default() -> Self {
        Self {
            max_messages: 80,
            max_chars: 120_000,
            include_tool_results: true,
            include_collapsed: false,
            refocus_every: 5,
            tool_preview_chars: 4_000,
        }
    }
}

/// What one build needs.
#[derive(Debug, Clone, Default)]
pub struct BuildRequest<'a> {
    /// The conversation log.
    pub entries: &'a [LogEntry],
    /// The mode.
    pub mode: Mode,
    /// The run's state (run mode).
    pub run_state: RunState,
    /// The session's files.
    pub files: Vec<SessionFile>,
    /// The task, for refocus reminders.
    pub task: Option<String>,
    /// Files read in full, with their synopses.
    pub read_files: Vec<ReadFile>,
}

/// Debug data of a build.
#[derive(Debug, Clone, Serialize)]
pub struct DebugData {
    /// Ids of the entries kept.
    pub kept: Vec<String>,
    /// Entries dropped, with the reason.
    pub dropped: Vec<Dropped>,
    /// Entries added or changed.
    pub changed: Vec<Changed>,
    /// Message tokens before compression.
    pub tokens_before: usize,
    /// Message tokens after.
    pub tokens_after: usize,
    /// Tokens of the system prompt.
    pub system_tokens: usize,
    /// Strategies applied.
    pub strategies: Vec<String>,
    /// Usage of the budget.
    pub usage: ContextUsage,
}

/// The result of a build.
#[derive(Debug, Clone)]
pub struct BuiltContext {
    /// The system prompt.
    pub system: String,
    /// The window.
    pub entries: Vec<LogEntry>,
    /// What happened.
    pub debug: DebugData,
}

/// Builds request contexts.
#[derive(Debug)]
pub struct ContextBuilder {
    /// The prompt pieces.
    pub prompts: PromptParts,
    /// The settings.
    pub settings: BuilderSettings,
    /// The budget.
    pub budget: ContextBudget,
    pipeline: Pipeline,
    counter: MessageCounter,
}

fn push_part(out: &mut String, part: &str) {
    if part.trim().is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(part.trim_end());
}

impl ContextBuilder {
    /// A builder.
    pub fn new(
        prompts: PromptParts,
        settings: BuilderSettings,
        budget: ContextBudget,
        pipeline: Pipeline,
        counter: MessageCounter,
    ) -> Self {
        Self {
            prompts,
            settings,
            budget,
            pipeline,
            counter,
        }
    }

    /// The system prompt of `request`: base rules, tool policy and mode banner; the persona in
    /// agent mode; the run directive (with node brief and step context while a step is active,
    /// or the post-run protocol once completed) in run mode; the session's files; a refocus
    /// reminder every N rounds.
    pub fn system_prompt(&self, request: &BuildRequest<'_>) -> String {
        let p = &self.prompts;
        let mut out = String::new();
        push_part(&mut out, &p.base_rules);
        push_part(&mut out, &p.tool_policy);
        push_part(&mut out, &format!("MODE: {}", request.mode.as_str()));
        match request.mode {
            Mode::Chat => {}
            Mode::Agent => push_part(&mut out, p.persona.as_deref().unwrap_or("")),
            Mode::Run => {
                if let Some(d) = &p.run_directive {
                    push_part(&mut out, &format!("RUN_DIRECTIVE\n{d}"));
                }
                match request.run_state {
                    RunState::Active => {
                        if let Some(b) = &p.node_brief {
                            push_part(&mut out, &format!("NODE_BRIEF\n{b}"));
                        }
                        if let Some(s) = &p.step_context {
                            push_part(&mut out, &format!("STEP_CONTEXT\n{s}"));
                        }
                    }
                    RunState::Completed => {
                        if let Some(r) = &p.post_run_protocol {
                            push_part(&mut out, &format!("POST_RUN_PROTOCOL\n{r}"));
                        }
                    }
                }
            }
        }
        if !request.files.is_empty() {
            let mut list = String::from("SESSION FILES");
            for f in &request.files {
                list.push_str(&format!("\n- {} ({}): {}", f.path, f.kind, f.description));
            }
            push_part(&mut out, &list);
        }
        let rounds = request
            .entries
            .iter()
            .filter(|e| e.role == LogRole::User && e.include_in_context)
            .count();
        if let Some(task) = &request.task {
            let every = self.settings.refocus_every;
            if every > 0 && rounds > 0 && rounds % every == 0 {
                push_part(&mut out, &format!("REFOCUS: the task is still: {task}"));
            }
        }
        out
    }

    /// The entries as they go to the pipeline: collapsed entries out unless wanted, tool
    /// outputs as preview + path, earlier reads of a file replaced by its synopsis, and the
    /// message and character caps applied from the oldest end.
    pub fn prepare_entries(&self, request: &BuildRequest<'_>) -> Vec<LogEntry> {
        let s = &self.settings;
        let mut out: Vec<LogEntry> = request.entries.to_vec();
        // The latest read of each file stays whole; earlier ones become its synopsis.
        let mut last_read: std::collections::HashMap<&str, String> = Default::default();
        let mut call_path: std::collections::HashMap<String, String> = Default::default();
        for e in request.entries {
            for c in e.calls() {
                if let Ok(args) = c.arguments_json() {
                    let path = args.get("path").or_else(|| args.get("file_path"));
                    if let Some(p) = path.and_then(|p| p.as_str()) {
                        call_path.insert(c.id.clone(), p.to_owned());
                    }
                }
            }
        }
        for e in request.entries.iter().filter(|e| e.role == LogRole::Tool) {
            if let Some(p) = e.tool_call_id.as_ref().and_then(|id| call_path.get(id)) {
                if let Some(rf) = request.read_files.iter().find(|r| &r.path == p) {
                    last_read.insert(rf.path.as_str(), e.id.clone());
                }
            }
        }
        for e in &mut out {
            if e.collapsed == Some(true) && !s.include_collapsed {
                e.include_in_context = false;
            }
            if e.role != LogRole::Tool {
                continue;
            }
            let path = e.tool_call_id.as_ref().and_then(|id| call_path.get(id));
            if let Some(rf) = path.and_then(|p| request.read_files.iter().find(|r| &r.path == p)) {
                if last_read.get(rf.path.as_str()) != Some(&e.id) {
                    e.content = Some(Content::Text(format!(
                        "[synopsis of {} (read in full later)]\n{}",
                        rf.path, rf.synopsis
                    )));
                    continue;
                }
            }
            if !s.include_tool_results {
                e.content = Some(Content::Text("[tool result not included]".to_owned()));
                continue;
            }
            let text = e.text();
            if let Some(short) = head_tail(&text, s.tool_preview_chars, 0.7) {
                let data_ref = e
                    .extra
                    .get("data_ref")
                    .and_then(|v| v.as_str())
                    .map(str::to_owned);
                let tail = match data_ref {
                    Some(p) => format!("\n[full output: {p}]"),
                    None => String::new(),
                };
                e.content = Some(Content::Text(format!("{short}{tail}")));
            }
        }
        // Message and character caps, oldest first, keeping tool groups whole by only cutting
        // before a user entry.
        let included: Vec<usize> = (0..out.len())
            .filter(|&i| out[i].include_in_context)
            .collect();
        let chars: usize = included
            .iter()
            .map(|&i| out[i].text().chars().count())
            .sum();
        let mut count = included.len();
        let mut total_chars = chars;
        let mut cut = 0;
        for (k, &i) in included.iter().enumerate() {
            if count <= s.max_messages && total_chars <= s.max_chars {
                break;
            }
            let next_is_user = included
                .get(k + 1)
                .is_some_and(|&j| out[j].role == LogRole::User);
            count -= 1;
            total_chars -= out[i].text().chars().count();
            if next_is_user {
                cut = k + 1;
            }
        }
        // Never cut past the latest user entry.
        let latest_user = included.iter().rposition(|&i| out[i].role == LogRole::User);
        if let Some(l) = latest_user {
            cut = cut.min(l);
        }
        for &i in &included[..cut] {
            out[i].include_in_context = false;
        }
        out
    }

    /// Builds the context of `request`.
    pub async fn build(&self, request: &BuildRequest<'_>) -> Result<BuiltContext> {
        let system = self.system_prompt(request);
        let entries = self.prepare_entries(request);
        let c = self
            .pipeline
            .run(&entries, &system, &self.budget, &self.counter)
            .await?;
        let w = c.window;
        Ok(BuiltContext {
            entries: w.entries(),
            debug: DebugData {
                kept: w.kept_ids(),
                dropped: w.dropped.clone(),
                changed: w.changed.clone(),
                tokens_before: w.tokens_before,
                tokens_after: w.tokens(),
                system_tokens: c.system_tokens,
                strategies: w.strategies.clone(),
                usage: c.usage,
            },
            system,
        })
    }
}
