//! `/compact`: the conversation so far summarised into one entry that later requests start
//! from.

use std::sync::Arc;

use ba_protocol::{LogEntry, LogRole};
use ba_storage::ConversationId;

use crate::agent::{AgentError, Compaction, Inner};
use crate::history::context_view;
use crate::run::{new_id, now};

pub(crate) async fn compact(inner: &Inner, id: &ConversationId) -> Result<Compaction, AgentError> {
    // A compaction holds the conversation like a run: it never interleaves with one.
    let _lease = crate::run::take_lease(
        inner,
        id,
        &format!("compact_{}", uuid::Uuid::new_v4().simple()),
    )
    .await?;
    let loaded = inner.store.load(id).await?;
    let mut last_seq = loaded.last_seq;
    let log = crate::history::effective(loaded.entries);
    if !inner.hooks.is_empty() {
        let input = serde_json::json!({
            "session_id": id.as_str(),
            "transcript_path": "",
            "hook_event_name": ba_protocol::HookEvent::PreCompact.claude_name(),
            "trigger": "manual",
            "custom_instructions": "",
        });
        let ran = crate::hooks::run_hooks(
            &inner.hooks,
            ba_protocol::HookEvent::PreCompact,
            None,
            input,
        )
        .await;
        // Recorded; like Claude Code's, a pre_compact hook does not stop the compaction.
        for r in ran.records {
            last_seq = inner
                .store
                .append(id, &crate::hooks::hook_entry(r), Some(last_seq))
                .await?;
        }
    }
    // The history since the last `/compact`, whole (automatic compactions left out, their
    // windows are a shorter copy of it), after the summary that `/compact` left.
    let mut entries = Vec::new();
    for e in context_view(&log) {
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
    // A turn still open (calls waiting for a person, a stopped or failed answer) stays whole
    // after the summary: its question and its calls are what the next run goes on from.
    let open = open_turn(&entries).map_or_else(Vec::new, |at| entries.split_off(at));
    if entries.is_empty() {
        return Err(AgentError::NothingToCompact {
            conversation: id.to_string(),
            in_progress: !open.is_empty(),
        });
    }
    let counter = inner.builder.counter();
    let tokens_before = counter.entries(&entries);
    let summarizer: Arc<dyn ba_context::Summarizer> = inner
        .summarizer
        .clone()
        .unwrap_or_else(|| Arc::new(ba_context::ExtractiveSummarizer));
    let max = (inner.settings.budget.target_tokens() / 4).clamp(200, 4_000);
    let text = summarizer.summarize(&entries, max).await.map_err(|e| {
        ba_context::ContextError::Summary {
            entries: entries.len(),
            message: e.to_string(),
        }
    })?;
    let summary = LogEntry::new(new_id(), LogRole::System, now()).with_text(format!(
        "{}\n{text}",
        ba_protocol::claude_code::SUMMARY_PREFIX
    ));
    let tokens_after = counter.entry(&summary);
    let mut record =
        ba_context::summary_record(summary, &entries, (tokens_before, tokens_after, max));
    record.items.extend(
        open.into_iter()
            .map(|entry| ba_protocol::WindowItem::Entry {
                entry: Box::new(entry),
            }),
    );
    let entry = record.into_entry(new_id(), now());
    inner.store.append(id, &entry, Some(last_seq)).await?;
    Ok(Compaction {
        entries: entries.len(),
        tokens_before,
        tokens_after,
    })
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
    entries.iter().rposition(crate::history::starts_task)
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
