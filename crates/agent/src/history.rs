//! The conversation as the loop sees it: [`History`] owns a run's copy of the log — every
//! append goes through it, to the store first, so the two never differ — and answers the
//! questions the loop asks of it: where the current task starts, the compaction in force, which
//! skills are active and what they allow, which calls still lack a result. Everything is read
//! from the entries alone, so a resumed run gets the same answers as the run it resumes.
//!
//! **Invariants:** the entries are the store's, in order, with `last_seq` the sequence number
//! of the last one (an append names it, so a writer that raced this one is refused rather than
//! interleaved); an entry is in the history only once the store has it; nothing is ever
//! removed or changed — a compaction is an entry the context view starts from.

use std::collections::HashSet;
use std::sync::Arc;

use ba_protocol::ContextModifier;
use ba_protocol::{LogEntry, LogRole, LogToolCall, ServerInventoryRecord};
use ba_storage::{ConversationId, ConversationStore, StorageError};

/// A conversation's log as one run sees and extends it.
pub(crate) struct History {
    store: Arc<dyn ConversationStore>,
    id: ConversationId,
    entries: Vec<LogEntry>,
    last_seq: u64,
}

impl History {
    /// An empty history of conversation `id` (see [`History::load`]).
    pub(crate) fn new(store: Arc<dyn ConversationStore>, id: ConversationId) -> Self {
        Self {
            store,
            id,
            entries: Vec::new(),
            last_seq: 0,
        }
    }

    /// Reads the whole log from the store, as the model sees it: without the entries a
    /// rewind took back (see [`effective`]).
    pub(crate) async fn load(&mut self) -> Result<(), StorageError> {
        let loaded = self.store.load(&self.id).await?;
        self.last_seq = loaded.last_seq;
        self.entries = effective(loaded.entries);
        Ok(())
    }

    /// Appends `entry` to the store, then to this copy; its sequence number and the entry.
    pub(crate) async fn append(
        &mut self,
        entry: LogEntry,
    ) -> Result<(u64, &LogEntry), StorageError> {
        let seq = self
            .store
            .append(&self.id, &entry, Some(self.last_seq))
            .await?;
        self.last_seq = seq;
        self.entries.push(entry);
        Ok((seq, &self.entries[self.entries.len() - 1]))
    }

    /// Every entry, in order.
    pub(crate) fn all(&self) -> &[LogEntry] {
        &self.entries
    }

    /// The last entry.
    pub(crate) fn last(&self) -> Option<&LogEntry> {
        self.entries.last()
    }

    /// The entry with id `id`.
    pub(crate) fn find(&self, id: &str) -> Option<&LogEntry> {
        self.entries.iter().find(|e| e.id == id)
    }

    /// The entries the context is built from: the compaction in force and what follows it.
    pub(crate) fn context_view(&self) -> &[LogEntry] {
        context_view(&self.entries)
    }

    /// Rounds already made for the current task.
    pub(crate) fn rounds_in_task(&self) -> u32 {
        rounds_in_task(&self.entries)
    }

    /// Skills activated since the current task started, oldest first.
    pub(crate) fn active_skills(&self) -> Vec<ActiveSkill> {
        active_skills(&self.entries)
    }

    /// The modifier the active skills leave in force.
    pub(crate) fn modifier(&self) -> Option<ContextModifier> {
        current_modifier(&self.active_skills())
    }

    /// Calls of the last assistant entry that have no result yet (what a resume runs).
    pub(crate) fn pending_calls(&self) -> Vec<LogToolCall> {
        unanswered_calls(&self.entries)
    }

    /// Ids of every tool call in the log.
    pub(crate) fn call_ids(&self) -> HashSet<String> {
        call_ids(&self.entries)
    }

    /// When the current task's user message was written (its `created_at`), if there is one.
    pub(crate) fn task_started_at(&self) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|e| starts_task(e))
            .map(|e| e.created_at.as_str())
    }

    /// The last inventory of tool servers recorded.
    pub(crate) fn last_server_inventory(&self) -> Option<ServerInventoryRecord> {
        self.entries
            .iter()
            .rev()
            .find_map(|e| e.records.server_inventory.clone())
    }
}

/// The history as it stands after its rewinds: each rewind entry takes back the entries
/// before it whose sequence number is past its `to_seq` (they stay in the log); the rewind
/// entries themselves are left out. Everything the loop reads — the window, compactions,
/// active skills, pending calls and approvals — reads this.
pub(crate) fn effective(stored: Vec<ba_storage::StoredEntry>) -> Vec<LogEntry> {
    ba_storage::after_rewinds(stored)
        .into_iter()
        .map(|s| s.entry)
        .collect()
}

/// An active skill, found in the log.
#[derive(Debug, Clone)]
pub(crate) struct ActiveSkill {
    pub(crate) name: String,
    pub(crate) entry_id: String,
    pub(crate) modifier: ContextModifier,
}

/// Whether `entry` starts a task: a user message typed by the user (not a `continue`, a
/// format correction or a structured tool-result message).
pub(crate) fn starts_task(entry: &LogEntry) -> bool {
    entry.role == LogRole::User
        && entry.include_in_context
        && entry.tool_call_id.is_none()
        && entry.kind().is_none()
}

/// The entries the context is built from: everything from the last compaction record that
/// reads nothing before it (a `/compact`, whose window is its summary) on.
pub(crate) fn context_view(log: &[LogEntry]) -> &[LogEntry] {
    let start = log
        .iter()
        .rposition(|e| {
            e.records
                .compaction
                .as_ref()
                .is_some_and(|r| r.starts_afresh())
        })
        .unwrap_or(0);
    &log[start..]
}

/// Where the current task starts: its user message (0 when there is none).
fn task_start(log: &[LogEntry]) -> usize {
    log.iter().rposition(starts_task).unwrap_or(0)
}

/// The text of the current task's user message, in `view`.
pub(crate) fn current_task(view: &[LogEntry]) -> Option<String> {
    view.iter()
        .rev()
        .find(|e| starts_task(e))
        .map(|e| e.text().into_owned())
}

/// The modifier in force: each field as the latest skill that sets it left it, so the tools
/// offered to the model and the tools the runtime lets run always agree.
fn current_modifier(active: &[ActiveSkill]) -> Option<ContextModifier> {
    active.iter().fold(None, |acc: Option<ContextModifier>, s| {
        let m = &s.modifier;
        if m.allowed_tools.is_none() && m.model.is_none() {
            return acc;
        }
        let mut out = acc.unwrap_or_default();
        if m.allowed_tools.is_some() {
            out.allowed_tools.clone_from(&m.allowed_tools);
        }
        if m.model.is_some() {
            out.model.clone_from(&m.model);
        }
        Some(out)
    })
}

/// Rounds already made for the current task (assistant entries since it started).
fn rounds_in_task(log: &[LogEntry]) -> u32 {
    let start = task_start(log);
    let n = log[start..]
        .iter()
        .filter(|e| e.role == LogRole::Assistant)
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Skills activated since the current task started, oldest first.
fn active_skills(log: &[LogEntry]) -> Vec<ActiveSkill> {
    let start = task_start(log);
    log[start..]
        .iter()
        .filter_map(|e| {
            let s = e.records.skill.clone()?;
            Some(ActiveSkill {
                name: s.name,
                entry_id: e.id.clone(),
                modifier: ContextModifier {
                    allowed_tools: s.allowed_tools,
                    model: s.model,
                    disable_model_invocation: false,
                },
            })
        })
        .collect()
}

/// Calls of the last assistant entry that have no result in the log.
pub(crate) fn unanswered_calls(log: &[LogEntry]) -> Vec<LogToolCall> {
    let Some(pos) = log
        .iter()
        .rposition(|e| e.role == LogRole::Assistant && !e.calls().is_empty())
    else {
        return Vec::new();
    };
    let answered: HashSet<&str> = log[pos..]
        .iter()
        .filter_map(|e| e.tool_call_id.as_deref())
        .collect();
    log[pos]
        .calls()
        .iter()
        .filter(|c| !answered.contains(c.id.as_str()))
        .cloned()
        .collect()
}

/// Ids of every tool call in the log.
fn call_ids(log: &[LogEntry]) -> HashSet<String> {
    log.iter()
        .flat_map(|e| e.calls().iter().map(|c| c.id.clone()))
        .collect()
}
