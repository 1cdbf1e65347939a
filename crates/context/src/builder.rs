//! The context builder: the system prompt composed per mode, the session's file list,
//! tool outputs as preview + path, read-file synopses, refocus reminders, then the budgeted
//! window and its debug data.

use ba_protocol::{Content, LogEntry, LogRole, Mode};
use serde::Serialize;

use crate::budget::{ContextBudget, ContextUsage};
use crate::compaction::{Effective, chars_of, record_window};
use crate::error::Result;
use crate::message::MessageCounter;
use crate::pipeline::{Pipeline, When};
use crate::strategy::head_tail;
use crate::window::{Changed, Dropped};
use ba_protocol::CompactionRecord;

/// The `part_type` of the note sent after the window: what changes from round to round (the
/// session's files, a reminder of the task) goes there, after the part a prompt cache serves.
pub const NOTE_PART_TYPE: &str = "context_note";

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

/// Settings of the builder.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BuilderSettings {
    /// Entries logged since the last compaction, at most: more starts a compaction (a sliding
    /// window over what is sent verbatim; the compacted part is bounded by tokens).
    pub max_messages: usize,
    /// Characters logged since the last compaction, at most: more starts a compaction.
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
    /// Sections the caller adds after the composed system prompt (a skills catalogue, a reply
    /// format, instructions put back after a compression), each appended verbatim after a
    /// blank line, in order.
    pub system_sections: Vec<String>,
    /// Ids of entries whose text goes to the model whole: no preview, no synopsis, no
    /// stand-in (a skill's instructions, say). They can still be dropped by compression.
    pub pinned: Vec<String>,
    /// Tokens the request carries besides the system prompt and the messages (the tool
    /// definitions), counted against the budget.
    pub fixed_tokens: usize,
    /// The active node's brief (run mode), instead of the builder's own.
    pub node_brief: Option<String>,
    /// The active node's context — the run's inputs, the outputs of the nodes before it —
    /// instead of the builder's own.
    pub step_context: Option<String>,
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
    /// Tokens outside the messages: the system prompt and the note after the window.
    pub system_tokens: usize,
    /// Strategies applied.
    pub strategies: Vec<String>,
    /// Whether the window was compacted by this build (see [`BuiltContext::compaction`]).
    pub compressed: bool,
    /// Usage of the budget.
    pub usage: ContextUsage,
    /// The id of the compaction record the window started from.
    pub compaction_base: Option<String>,
    /// Why the last compaction record could not be used (the whole log was read instead).
    pub compaction_problem: Option<String>,
    /// Ids of the entries of the window that differ from the log (traced, cut, summarised,
    /// added): by this build or by the compaction it started from.
    pub altered: Vec<String>,
}

/// The result of a build.
#[derive(Debug, Clone)]
pub struct BuiltContext {
    /// The system prompt: the same from round to round, so a prompt cache serves it.
    pub system: String,
    /// The window, then the note (when there is one).
    pub entries: Vec<LogEntry>,
    /// Entries of `entries` that repeat the previous request's front as long as no compaction
    /// happens: the window without the note.
    pub stable: usize,
    /// The compaction this build made: append it to the log (before the model call) so later
    /// builds start from it. `None` when the window was not compacted.
    pub compaction: Option<CompactionRecord>,
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

    /// The token counter of the windows this builder makes; its per-entry cache is the one
    /// cache a caller should count the same entries with.
    pub fn counter(&self) -> &MessageCounter {
        &self.counter
    }

    /// The compression pipeline.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The system prompt of `request`: base rules, tool policy and mode banner; the persona in
    /// agent mode; the run directive (with node brief and step context while a step is active,
    /// or the post-run protocol once completed) in run mode; then the request's own sections.
    /// Nothing in it changes from round to round: what does goes into [`Self::note`].
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
                        if let Some(b) = request.node_brief.as_ref().or(p.node_brief.as_ref()) {
                            push_part(&mut out, &format!("NODE_BRIEF\n{b}"));
                        }
                        let step = request.step_context.as_ref().or(p.step_context.as_ref());
                        if let Some(s) = step {
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
        for section in request.system_sections.iter().filter(|s| !s.is_empty()) {
            out.push_str("\n\n");
            out.push_str(section);
        }
        out
    }

    /// What changes from round to round, sent after the window (where it does not disturb the
    /// cached front of the request): the session's files and, every N user rounds, a reminder
    /// of the task. `None` when there is nothing to say.
    pub fn note(&self, request: &BuildRequest<'_>) -> Option<String> {
        let mut out = String::new();
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
        (!out.is_empty()).then_some(out)
    }

    /// The entries of `request` as they go to the pipeline (see `prepare`), the log's
    /// compaction records left out.
    pub fn prepare_entries(&self, request: &BuildRequest<'_>) -> Vec<LogEntry> {
        let plain: Vec<LogEntry> = request
            .entries
            .iter()
            .filter(|e| !e.is_compaction())
            .cloned()
            .collect();
        self.prepare(&plain, request)
    }

    /// `entries` as they go to the pipeline: collapsed entries out unless wanted, tool outputs
    /// as preview + path (pinned entries whole), earlier reads of a file replaced by its
    /// synopsis. Each entry's form depends on the entry (and on later reads of its file) only,
    /// so a window rebuilt from a compaction record is the one that was sent.
    fn prepare(&self, entries: &[LogEntry], request: &BuildRequest<'_>) -> Vec<LogEntry> {
        let s = &self.settings;
        let mut out: Vec<LogEntry> = entries.to_vec();
        // The latest read of each file stays whole; earlier ones become its synopsis.
        let mut last_read: std::collections::HashMap<&str, String> = Default::default();
        let mut call_path: std::collections::HashMap<String, String> = Default::default();
        for e in entries {
            for c in e.calls() {
                if let Ok(args) = c.arguments_json() {
                    let path = args.get("path").or_else(|| args.get("file_path"));
                    if let Some(p) = path.and_then(|p| p.as_str()) {
                        call_path.insert(c.id.clone(), p.to_owned());
                    }
                }
            }
        }
        for e in entries.iter().filter(|e| e.role == LogRole::Tool) {
            if let Some(p) = e.tool_call_id.as_ref().and_then(|id| call_path.get(id))
                && let Some(rf) = request.read_files.iter().find(|r| &r.path == p)
            {
                last_read.insert(rf.path.as_str(), e.id.clone());
            }
        }
        for e in &mut out {
            if e.collapsed == Some(true) && !s.include_collapsed {
                e.include_in_context = false;
            }
            if e.role != LogRole::Tool || request.pinned.contains(&e.id) {
                continue;
            }
            let path = e.tool_call_id.as_ref().and_then(|id| call_path.get(id));
            if let Some(rf) = path.and_then(|p| request.read_files.iter().find(|r| &r.path == p))
                && last_read.get(rf.path.as_str()) != Some(&e.id)
            {
                e.content = Some(Content::Text(format!(
                    "[synopsis of {} (read in full later)]\n{}",
                    rf.path, rf.synopsis
                )));
                continue;
            }
            if !s.include_tool_results {
                e.content = Some(Content::Text("[tool result not included]".to_owned()));
                continue;
            }
            let text = e.text();
            if text.starts_with(crate::salience::TRACE_MARK) {
                continue;
            }
            if let Some(short) = head_tail(&text, s.tool_preview_chars, 0.7) {
                let data_ref = e.records.data_ref.clone();
                let tail = match data_ref {
                    Some(p) => format!("\n[full output: {p}]"),
                    None => String::new(),
                };
                e.content = Some(Content::Text(format!("{short}{tail}")));
            }
        }
        out
    }

    /// Builds the context of `request`.
    ///
    /// The window starts from the log's last compaction record (if any) and appends what was
    /// logged after it. When it crosses the trigger — or what was logged since the last
    /// compaction passes the message or character cap — it is compacted to the target, and the
    /// record of that compaction comes back in [`BuiltContext::compaction`] for the caller to
    /// append to the log. The same log always gives the same window.
    pub async fn build(&self, request: &BuildRequest<'_>) -> Result<BuiltContext> {
        self.build_with_system(request, self.system_prompt(request))
            .await
    }

    /// [`Self::build`] with a system prompt of the caller's instead of the composed one (a
    /// conversation replayed with the system prompt it was recorded with, say).
    pub async fn build_with_system(
        &self,
        request: &BuildRequest<'_>,
        system: String,
    ) -> Result<BuiltContext> {
        let note = self.note(request).map(|text| {
            let mut e = LogEntry::new("context-note", LogRole::User, "").with_text(text);
            e.part_type = Some(NOTE_PART_TYPE.to_owned());
            e.merge_with_previous = Some(true);
            e
        });
        let effective = Effective::of(request.entries);
        let tail = effective.tail_entries();
        let tail_messages = tail.iter().filter(|e| e.include_in_context).count();
        let tail_chars: usize = tail
            .iter()
            .filter(|e| e.include_in_context)
            .map(chars_of)
            .sum();
        let when = if effective.record.is_some() && tail_messages == 0 {
            // Nothing new since the compaction: its window is the one to send again.
            When::Never
        } else if tail_messages > self.settings.max_messages || tail_chars > self.settings.max_chars
        {
            When::Now
        } else {
            When::OverTrigger
        };
        let prepared = self.prepare(&effective.entries, request);
        // The tool definitions travel with every request and take their share of the window
        // like the system prompt does.
        let fixed = self.counter.system(&system)
            + note.as_ref().map_or(0, |n| self.counter.entry(n))
            + request.fixed_tokens;
        let c = self
            .pipeline
            .run_with(&prepared, fixed, when, &self.budget, &self.counter)
            .await?;
        let w = c.window;
        // Where each entry as logged sits (records aside) and how the window shows it.
        let positions: std::collections::HashMap<&str, usize> = request
            .entries
            .iter()
            .filter(|e| !e.is_compaction())
            .enumerate()
            .map(|(k, e)| (e.id.as_str(), k))
            .collect();
        let logged: std::collections::HashMap<&str, (usize, &LogEntry)> = prepared
            .iter()
            .zip(&effective.from_log)
            .filter(|(_, from_log)| **from_log)
            .filter_map(|(e, _)| {
                positions
                    .get(e.id.as_str())
                    .map(|&k| (e.id.as_str(), (k, e)))
            })
            .collect();
        let window = w.entries();
        let altered: Vec<String> = window
            .iter()
            .filter(|e| logged.get(e.id.as_str()).is_none_or(|(_, l)| *l != *e))
            .map(|e| e.id.clone())
            .collect();
        let compaction = c.compressed.then(|| {
            record_window(
                &window,
                |id| logged.get(id).map(|(k, e)| (*k, (*e).clone())),
                w.strategies.clone(),
                (w.tokens_before, w.tokens(), self.budget.target_tokens()),
                w.dropped.clone(),
                w.changed.clone(),
            )
        });
        let stable = window.len();
        let mut entries = window;
        entries.extend(note);
        Ok(BuiltContext {
            entries,
            stable,
            compaction,
            debug: DebugData {
                kept: w.kept_ids(),
                dropped: w.dropped.clone(),
                changed: w.changed.clone(),
                tokens_before: w.tokens_before,
                tokens_after: w.tokens(),
                system_tokens: c.system_tokens,
                strategies: w.strategies.clone(),
                compressed: c.compressed,
                usage: c.usage,
                compaction_base: effective.record.clone(),
                compaction_problem: effective
                    .problem
                    .as_ref()
                    .map(|p| format!("{}: {}", p.record, p.message)),
                altered,
            },
            system,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block_on;
    use crate::tokens::Encoding;
    use ba_protocol::LogToolCall;

    fn builder(settings: BuilderSettings) -> ContextBuilder {
        let prompts = PromptParts {
            base_rules: "Answer with evidence.".into(),
            tool_policy: "Use at most six tools a round.".into(),
            persona: Some("You are Ada, a retail analyst.".into()),
            run_directive: Some("Produce the monthly report.".into()),
            node_brief: Some("Node 2: load the sales table.".into()),
            step_context: Some("Step 2 of 5.".into()),
            post_run_protocol: Some("Answer questions about the report only.".into()),
        };
        ContextBuilder::new(
            prompts,
            settings,
            ContextBudget::new(4_000, 500),
            Pipeline::named("key-messages", None).unwrap(),
            MessageCounter::exact(Encoding::Cl100kBase),
        )
    }

    fn user(id: &str, text: &str) -> LogEntry {
        LogEntry::new(id, LogRole::User, "t").with_text(text)
    }

    #[test]
    fn system_prompt_per_mode() {
        let b = builder(BuilderSettings::default());
        let log = vec![user("u1", "hi")];
        let mut req = BuildRequest {
            entries: &log,
            files: vec![SessionFile {
                path: "code/q1.py".into(),
                kind: "code".into(),
                description: "sales by region".into(),
            }],
            ..BuildRequest::default()
        };
        let chat = b.system_prompt(&req);
        assert!(!chat.contains("Ada") && !chat.contains("RUN_DIRECTIVE"));
        // The file list grows during a conversation: it goes after the cached front.
        assert!(!chat.contains("code/q1.py"));
        assert!(
            b.note(&req)
                .unwrap()
                .contains("- code/q1.py (code): sales by region")
        );
        req.mode = Mode::Agent;
        assert!(b.system_prompt(&req).contains("You are Ada"));
        req.mode = Mode::Run;
        let active = b.system_prompt(&req);
        req.run_state = RunState::Completed;
        let done = b.system_prompt(&req);
        assert!(done.contains("POST_RUN_PROTOCOL") && !done.contains("NODE_BRIEF"));
        insta::assert_snapshot!("chat", chat);
        insta::assert_snapshot!("run_active", active);
    }

    #[test]
    fn refocus_every_n_rounds() {
        let b = builder(BuilderSettings {
            refocus_every: 2,
            ..BuilderSettings::default()
        });
        let one = vec![user("u1", "a")];
        let two = vec![user("u1", "a"), user("u2", "b")];
        let task = Some("Compare Q1 and Q2 revenue.".to_owned());
        let req = |entries| BuildRequest {
            entries,
            task: task.clone(),
            ..BuildRequest::default()
        };
        assert!(b.note(&req(&one)).is_none());
        let note = b.note(&req(&two)).unwrap();
        assert!(note.contains("REFOCUS: the task is still: Compare Q1"));
        // The reminder rides after the window, never in the system prompt.
        assert!(!b.system_prompt(&req(&two)).contains("REFOCUS"));
        let built = block_on(b.build(&req(&two))).unwrap();
        let last = built.entries.last().unwrap();
        assert_eq!(last.part_type.as_deref(), Some(NOTE_PART_TYPE));
        assert_eq!(built.stable, built.entries.len() - 1);
    }

    #[test]
    fn earlier_reads_become_synopses_and_long_outputs_previews() {
        let b = builder(BuilderSettings {
            tool_preview_chars: 100,
            ..BuilderSettings::default()
        });
        let mut log = vec![user("u1", "read it")];
        for k in 0..2 {
            let mut a = LogEntry::new(format!("a{k}"), LogRole::Assistant, "t");
            a.tool_calls = Some(vec![LogToolCall::new(
                format!("c{k}"),
                "read_file",
                &serde_json::json!({"path": "data/sales.csv"}),
            )]);
            let mut r = LogEntry::new(format!("r{k}"), LogRole::Tool, "t")
                .with_text("region,amount\n".repeat(20));
            r.tool_call_id = Some(format!("c{k}"));
            r.records.data_ref = Some("tool-data/r.txt".into());
            log.push(a);
            log.push(r);
        }
        log.push(user("u2", "and now?"));
        let req = BuildRequest {
            entries: &log,
            read_files: vec![ReadFile {
                path: "data/sales.csv".into(),
                synopsis: "20 rows of region and amount.".into(),
            }],
            ..BuildRequest::default()
        };
        let built = block_on(b.build(&req)).unwrap();
        let r0 = built
            .entries
            .iter()
            .find(|e| e.id == "r0")
            .unwrap()
            .text()
            .into_owned();
        let r1 = built
            .entries
            .iter()
            .find(|e| e.id == "r1")
            .unwrap()
            .text()
            .into_owned();
        assert!(r0.starts_with("[synopsis of data/sales.csv"), "{r0}");
        assert!(
            r1.contains("characters left out") && r1.ends_with("[full output: tool-data/r.txt]"),
            "{r1}"
        );
        assert_eq!(built.debug.kept.len(), 6);
        assert!(built.debug.usage.used <= 3_500);
    }

    #[test]
    fn the_message_cap_starts_a_compaction_that_later_builds_start_from() {
        let b = builder(BuilderSettings {
            max_messages: 3,
            ..BuilderSettings::default()
        });
        let mut log: Vec<LogEntry> = (0..6)
            .map(|i| {
                let role = if i % 2 == 0 {
                    LogRole::User
                } else {
                    LogRole::Assistant
                };
                LogEntry::new(format!("m{i}"), role, "t").with_text("x")
            })
            .collect();
        let built = block_on(b.build(&BuildRequest {
            entries: &log,
            ..BuildRequest::default()
        }))
        .unwrap();
        // Six entries since the last compaction (there is none) is over the cap of three: a
        // compaction, which keeps everything that fits its target.
        let record = built.compaction.clone().unwrap();
        assert_eq!(built.debug.kept.len(), 6);
        log.push(record.into_entry("c1", "t"));
        log.push(user("m6", "next"));
        let again = block_on(b.build(&BuildRequest {
            entries: &log,
            ..BuildRequest::default()
        }))
        .unwrap();
        assert_eq!(again.debug.compaction_base.as_deref(), Some("c1"));
        assert!(again.compaction.is_none(), "one entry since the record");
        assert_eq!(&again.entries[..6], &built.entries[..]);
        assert_eq!(again.entries[6].id, "m6");
    }

    #[test]
    fn tool_definitions_take_their_share_of_the_window() {
        let b = builder(BuilderSettings::default());
        // Twelve rounds of ~150 tokens: about 1 800 tokens of messages, under the trigger of a
        // 4 000-token budget alone, over it beside 1 500 tokens of tool definitions.
        let log: Vec<LogEntry> = (0..12)
            .map(|i| {
                let role = if i % 2 == 0 {
                    LogRole::User
                } else {
                    LogRole::Assistant
                };
                let text = format!("round {i}: ") + &"revenue by region and month ".repeat(25);
                LogEntry::new(format!("m{i}"), role, "t").with_text(text)
            })
            .collect();
        let bare = block_on(b.build(&BuildRequest {
            entries: &log,
            ..BuildRequest::default()
        }))
        .unwrap();
        assert!(!bare.debug.compressed, "{:?}", bare.debug.usage);
        let with_tools = block_on(b.build(&BuildRequest {
            entries: &log,
            fixed_tokens: 1_500,
            ..BuildRequest::default()
        }))
        .unwrap();
        assert!(with_tools.debug.compressed, "{:?}", with_tools.debug.usage);
        assert_eq!(
            with_tools.debug.system_tokens,
            bare.debug.system_tokens + 1_500
        );
        // What is sent (system, tools, messages) stays within the budget less the reserve.
        assert!(
            with_tools.debug.usage.used <= 3_500,
            "{:?}",
            with_tools.debug.usage
        );
        assert!(with_tools.debug.usage.used >= with_tools.debug.tokens_after + 1_500);
    }
}
