//! The conversation as the agent sees it: [`History`] is the one way into a conversation's log
//! — loading it (with the rewinds applied, once), appending to it, its last sequence number —
//! and answers the questions the loop and the front ends ask of it: where the current task
//! starts, the compaction in force, which skills are active and what they allow, which calls
//! still lack a result or wait for a person. Everything is read from the entries alone, so a
//! resumed run gets the same answers as the run it resumes.
//!
//! **Invariants:** the entries are the store's, in order, as the model sees them (what a
//! rewind took back left out), each with its sequence number; `last_seq` is the sequence number
//! of the log's last entry (an append names it, so a writer that raced this one is refused
//! rather than interleaved); an entry is in the history only once the store has it; nothing
//! is ever changed — a compaction is an entry the context view starts from, a rewind an entry
//! that takes the entries after its point out of this copy as it does out of every later load.

use std::collections::HashSet;
use std::sync::Arc;

use ba_protocol::{ContextModifier, EntryKind, PendingApproval, RewindRecord};
use ba_protocol::{LogEntry, LogRole, LogToolCall, ServerInventoryRecord};
use ba_storage::{ConversationId, ConversationStore, StorageError, StoredEntry};

use crate::approvals::LogApprovals;
use crate::ids::{new_id, now};

/// A conversation's log as one run (or one question of a front end) sees and extends it.
pub(crate) struct History {
    store: Arc<dyn ConversationStore>,
    id: ConversationId,
    entries: Vec<LogEntry>,
    /// The sequence number of each of `entries`.
    seqs: Vec<u64>,
    last_seq: u64,
}

impl History {
    /// An empty history of conversation `id` (see [`History::load`]).
    pub(crate) fn new(store: Arc<dyn ConversationStore>, id: ConversationId) -> Self {
        Self {
            store,
            id,
            entries: Vec::new(),
            seqs: Vec::new(),
            last_seq: 0,
        }
    }

    /// The history of conversation `id` as it stands now.
    pub(crate) async fn open(
        store: Arc<dyn ConversationStore>,
        id: ConversationId,
    ) -> Result<Self, StorageError> {
        let mut history = Self::new(store, id);
        history.load().await?;
        Ok(history)
    }

    /// The history of conversation `id` as it stood when entry `at_seq` was the last: the
    /// rewinds up to it applied, a later one left out (it is the conversation's alone, not a
    /// fork's at `at_seq`). The store refuses an append to it while the log goes on past
    /// `at_seq`.
    pub(crate) async fn open_at(
        store: Arc<dyn ConversationStore>,
        id: ConversationId,
        at_seq: u64,
    ) -> Result<Self, StorageError> {
        let mut loaded = store.load(&id).await?;
        loaded.entries.retain(|s| s.seq <= at_seq);
        let mut history = Self::new(store, id);
        history.keep(loaded.after_rewinds());
        history.last_seq = at_seq;
        Ok(history)
    }

    /// Reads the whole log from the store, as the model sees it: without the entries a
    /// rewind took back.
    pub(crate) async fn load(&mut self) -> Result<(), StorageError> {
        self.load_seeing(|_| {}).await
    }

    /// [`History::load`], showing `see` the whole log as it was read first — the entries a
    /// rewind took back included (what was spent stays spent) — so a caller that needs it
    /// does not read the log a second time.
    pub(crate) async fn load_seeing(
        &mut self,
        see: impl FnOnce(&[StoredEntry]),
    ) -> Result<(), StorageError> {
        let loaded = self.store.load(&self.id).await?;
        see(&loaded.entries);
        self.last_seq = loaded.last_seq;
        self.keep(loaded.after_rewinds());
        Ok(())
    }

    fn keep(&mut self, stored: Vec<StoredEntry>) {
        (self.seqs, self.entries) = stored.into_iter().map(|s| (s.seq, s.entry)).unzip();
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
        self.seqs.push(seq);
        Ok((seq, &self.entries[self.entries.len() - 1]))
    }

    /// Takes back the entries after `to_seq` from the history: a hidden rewind entry is
    /// appended (the log stays append-only) and they leave this copy as they leave every
    /// later load, naming `actor`, who took it back, when given. How many entries left.
    ///
    /// # Errors
    /// The store's `Invalid` for a point past the end, with nothing of the history after it,
    /// or inside a round of tool calls (a call kept, its result taken back); the store's.
    pub(crate) async fn rewind(
        &mut self,
        to_seq: u64,
        actor: Option<&str>,
    ) -> Result<usize, StorageError> {
        let invalid = |message: String| StorageError::Invalid {
            what: format!("rewind of `{}` to entry {to_seq}", self.id),
            message,
        };
        if to_seq > self.last_seq {
            return Err(invalid(format!("the log ends at entry {}", self.last_seq)));
        }
        let kept = self.seqs.iter().take_while(|&&seq| seq <= to_seq).count();
        let taken = self.entries.len() - kept;
        if taken == 0 {
            return Err(invalid("no entry of the history comes after it".into()));
        }
        if !unanswered_calls(&self.entries[..kept]).is_empty() {
            return Err(invalid(
                "it is inside a round of tool calls: go back to the entry before the calls, \
                 or to the last of their results"
                    .into(),
            ));
        }
        let mut e = LogEntry::new(new_id(), LogRole::System, now())
            .with_text(format!("Rewound to entry {to_seq}"));
        e.include_in_context = false;
        e.records.kind = Some(EntryKind::Rewind);
        e.records.rewind = Some(RewindRecord { to_seq });
        e.records.actor = actor.map(str::to_owned);
        self.last_seq = self.store.append(&self.id, &e, Some(self.last_seq)).await?;
        self.entries.truncate(kept);
        self.seqs.truncate(kept);
        Ok(taken)
    }

    /// The tools the tool searches of the history found, each once, in the order found.
    pub(crate) fn tools_found(&self) -> Vec<String> {
        let mut found: Vec<String> = Vec::new();
        for name in self
            .entries
            .iter()
            .filter_map(|e| e.records.tools_found.as_ref())
            .flatten()
        {
            if !found.contains(name) {
                found.push(name.clone());
            }
        }
        found
    }

    /// How many tools the searches of the history found.
    pub(crate) fn tools_found_count(&self) -> usize {
        self.tools_found().len()
    }

    /// The conversation.
    pub(crate) fn id(&self) -> &ConversationId {
        &self.id
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

    /// The calls still without a result that a pause named and nobody decided on yet.
    pub(crate) fn pending_approvals(&self) -> Vec<PendingApproval> {
        LogApprovals::read(&self.entries).waiting(&self.pending_calls())
    }

    /// Whether the history holds a question a person asked (a user message of no kind).
    pub(crate) fn has_question(&self) -> bool {
        self.entries
            .iter()
            .any(|e| e.role == LogRole::User && e.records.kind.is_none())
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

/// The whole log of conversation `id`, the entries a rewind took back included (every call
/// made is in the metrics report; `recall` reads any entry a trace names).
pub(crate) async fn whole_log(
    store: &dyn ConversationStore,
    id: &ConversationId,
) -> Result<Vec<StoredEntry>, StorageError> {
    Ok(store.load(id).await?.entries)
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
fn unanswered_calls(log: &[LogEntry]) -> Vec<LogToolCall> {
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
