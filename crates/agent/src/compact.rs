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
    if entries.is_empty() {
        return Err(AgentError::Context(ba_context::ContextError::NoUserMessage));
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
    let record = ba_context::summary_record(summary, &entries, (tokens_before, tokens_after, max));
    let entry = record.into_entry(new_id(), now());
    inner.store.append(id, &entry, Some(last_seq)).await?;
    Ok(Compaction {
        entries: entries.len(),
        tokens_before,
        tokens_after,
    })
}
