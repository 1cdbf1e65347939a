//! The questions the loop asks of a conversation's log: where the current task starts, which
//! skills are active and what they allow, which calls still lack a result, where the context
//! starts after a compaction. Pure functions over the entries, so a resumed run asks them of
//! the log alone.

use std::collections::HashSet;

use ba_protocol::skill::ContextModifier;
use ba_protocol::{LogEntry, LogRole, LogToolCall};

use crate::records::{self, EntryKind};

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
        && records::kind(entry).is_none()
}

/// The entries the context is built from: everything after the last compaction, starting with
/// its summary.
pub(crate) fn context_view(log: &[LogEntry]) -> &[LogEntry] {
    let start = log
        .iter()
        .rposition(|e| records::kind(e) == Some(EntryKind::CompactBoundary))
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
pub(crate) fn current_modifier(active: &[ActiveSkill]) -> Option<ContextModifier> {
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
pub(crate) fn rounds_in_task(log: &[LogEntry]) -> u32 {
    let start = task_start(log);
    let n = log[start..]
        .iter()
        .filter(|e| e.role == LogRole::Assistant)
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Skills activated since the current task started, oldest first.
pub(crate) fn active_skills(log: &[LogEntry]) -> Vec<ActiveSkill> {
    let start = task_start(log);
    log[start..]
        .iter()
        .filter_map(|e| {
            let s = records::skill(e)?;
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
pub(crate) fn call_ids(log: &[LogEntry]) -> HashSet<String> {
    log.iter()
        .flat_map(|e| e.calls().iter().map(|c| c.id.clone()))
        .collect()
}
