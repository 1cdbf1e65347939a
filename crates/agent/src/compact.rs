//! `/compact`: the conversation so far summarised into one entry that later requests start
//! from.

use std::sync::Arc;

use ba_context::{MessageCounter, Summarizer};
use ba_protocol::{LogEntry, LogRole};
use serde::Serialize;

use crate::error::AgentError;
use crate::history::{History, starts_task};
use crate::hooks::Hook;
use crate::ids::{new_id, now};

/// What [`crate::Agent::compact`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Compaction {
    /// Entries summarised.
    pub entries: usize,
    /// Message tokens before.
    pub tokens_before: usize,
    /// Tokens of the summary that replaces them.
    pub tokens_after: usize,
}

/// What a compaction works with: the operator's hooks (`pre_compact` runs first), the count
/// of the window's tokens, the summarizer and the summary's size.
pub(crate) struct Compactor<'a> {
    pub(crate) hooks: &'a [Arc<dyn Hook>],
    pub(crate) counter: &'a MessageCounter,
    pub(crate) summarizer: Arc<dyn Summarizer>,
    /// Tokens of the summary, at most.
    pub(crate) max_tokens: usize,
}

impl Compactor<'_> {
    /// Summarises `history` so far into one entry appended to it; later windows start from
    /// it. The caller holds the conversation (a compaction never interleaves with a run).
    pub(crate) async fn compact(&self, history: &mut History) -> Result<Compaction, AgentError> {
        if !self.hooks.is_empty() {
            let input = serde_json::json!({
                "session_id": history.id().as_str(),
                "transcript_path": "",
                "hook_event_name": ba_protocol::HookEvent::PreCompact.claude_name(),
                "trigger": "manual",
                "custom_instructions": "",
            });
            let ran = crate::hooks::run_hooks(
                self.hooks,
                ba_protocol::HookEvent::PreCompact,
                None,
                input,
            )
            .await;
            // Recorded; like Claude Code's, a pre_compact hook does not stop the compaction.
            for r in ran.records {
                history.append(crate::hooks::hook_entry(r)).await?;
            }
        }
        let mut entries = since_last_compact(history.context_view());
        // A turn still open (calls waiting for a person, a stopped or failed answer) stays
        // whole after the summary: its question and its calls are what the next run goes on
        // from.
        let open = open_turn(&entries).map_or_else(Vec::new, |at| entries.split_off(at));
        if entries.is_empty() {
            return Err(AgentError::NothingToCompact {
                conversation: history.id().to_string(),
                in_progress: !open.is_empty(),
            });
        }
        let tokens_before = self.counter.entries(&entries);
        let max = self.max_tokens;
        let text = self
            .summarizer
            .summarize(&entries, max)
            .await
            .map_err(|e| ba_context::ContextError::Summary {
                entries: entries.len(),
                message: e.to_string(),
            })?;
        let summary = LogEntry::new(new_id(), LogRole::System, now()).with_text(format!(
            "{}\n{text}",
            ba_protocol::claude_code::SUMMARY_PREFIX
        ));
        let tokens_after = self.counter.entry(&summary);
        let mut record =
            ba_context::summary_record(summary, &entries, (tokens_before, tokens_after, max));
        record.items.extend(
            open.into_iter()
                .map(|entry| ba_protocol::WindowItem::Entry {
                    entry: Box::new(entry),
                }),
        );
        history.append(record.into_entry(new_id(), now())).await?;
        Ok(Compaction {
            entries: entries.len(),
            tokens_before,
            tokens_after,
        })
    }
}

/// The history since the last `/compact` in `view`, whole (automatic compactions left out,
/// their windows are a shorter copy of it), after the summary that `/compact` left.
fn since_last_compact(view: &[LogEntry]) -> Vec<LogEntry> {
    let mut entries = Vec::new();
    for e in view {
        match &e.records.compaction {
            Some(r) if r.starts_afresh() && entries.is_empty() => {
                entries.extend(r.items.iter().filter_map(|item| match item {
                    ba_protocol::WindowItem::Entry { entry } => Some((**entry).clone()),
                    ba_protocol::WindowItem::Keep { .. } => None,
                }));
            }
            _ if e.is_compaction() || !e.include_in_context => {}
            _ => entries.push(e.clone()),
        }
    }
    entries
}

/// Where the turn still open at the end of `entries` starts (its question), if the last turn
/// has no final answer: the last entry is not an assistant's answer without calls and without
/// a failure.
fn open_turn(entries: &[LogEntry]) -> Option<usize> {
    let answered = entries
        .iter()
        .rev()
        .find(|e| e.include_in_context)
        .is_some_and(|e| {
            e.role == LogRole::Assistant && e.calls().is_empty() && e.llm_error.is_none()
        });
    if answered {
        return None;
    }
    entries.iter().rposition(starts_task)
}

#[cfg(test)]
mod tests {
    use ba_protocol::{LogEntry, LogRole, LogToolCall};

    use super::open_turn;

    fn text(id: &str, role: LogRole, text: &str) -> LogEntry {
        LogEntry::new(id, role, "t").with_text(text)
    }

    #[test]
    fn a_finished_conversation_has_no_open_turn() {
        let log = [
            text("u1", LogRole::User, "West?"),
            text("a1", LogRole::Assistant, "West grew."),
        ];
        assert_eq!(open_turn(&log), None);
    }

    #[test]
    fn a_question_whose_call_waits_is_the_open_turn() {
        let mut call = text("a2", LogRole::Assistant, "Running code.");
        call.tool_calls = Some(vec![LogToolCall::new(
            "c1",
            "run_python",
            &serde_json::json!({}),
        )]);
        let mut waiting = text("s1", LogRole::System, "Waiting for approval: run_python");
        waiting.include_in_context = false;
        let log = [
            text("u1", LogRole::User, "West?"),
            text("a1", LogRole::Assistant, "West grew."),
            text("u2", LogRole::User, "Chart it"),
            call,
            waiting,
        ];
        assert_eq!(open_turn(&log), Some(2));
    }
}
