//! Every Claude Code session in the shared fixtures imports into a `FileStore`, loads back
//! unchanged, exports to Anthropic format with every tool_use answered, and re-imports from
//! that export to the same conversation.
// Helpers outside `#[test]` functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use ba_protocol::anthropic::AnthropicRequest;
use ba_protocol::convert::{SequentialStamp, anthropic_to_log, log_to_anthropic};
use ba_protocol::{Content, ContentBlock};
use ba_protocol::{LogEntry, LogRole};
use ba_storage::{ConversationStore, Durability, FileStore, FileStoreOptions};
use ba_storage::{read_claude_code, store_imported};

/// The Claude Code sessions of the shared fixtures (a skip, or a failure under CI, when absent).
fn transcripts() -> Option<PathBuf> {
    ba_testkit::fixture("transcripts/spotter")
}

fn sessions(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files
}

/// Every `tool_use` of an assistant message is answered in the next message.
fn assert_paired(req: &AnthropicRequest, what: &str) {
    for (i, m) in req.messages.iter().enumerate() {
        let Content::Blocks(blocks) = &m.content else {
            continue;
        };
        let uses: Vec<&str> = blocks
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse(u) => Some(u.id.as_str()),
                _ => None,
            })
            .collect();
        if uses.is_empty() {
            continue;
        }
        let next = req.messages.get(i + 1);
        let answered: Vec<&str> = match next.map(|n| &n.content) {
            Some(Content::Blocks(b)) => b
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolResult(r) => Some(r.tool_use_id.as_str()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        for id in uses {
            assert!(
                answered.contains(&id),
                "{what}: tool_use {id} of message {i} is not answered"
            );
        }
    }
}

/// The entries that are messages: Anthropic's format hoists system text out of the message
/// list, so system entries come back first and are compared through the export instead.
fn messages(entries: &[LogEntry]) -> Vec<LogEntry> {
    entries
        .iter()
        .filter(|e| e.role != LogRole::System)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_session_round_trips() {
    let Some(dir) = transcripts() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let store = FileStore::open_with(
        tmp.path(),
        FileStoreOptions::default().with_durability(Durability::OsBuffered),
    )
    .unwrap();
    let mut imported_files = 0;
    for file in sessions(&dir) {
        let imported = read_claude_code(&file).unwrap();
        let ids = store_imported(&store, &imported, None).await.unwrap();
        assert_eq!(ids.len(), 1 + imported.subagents.len());
        for (id, conv) in ids
            .iter()
            .zip(std::iter::once(&imported.main).chain(&imported.subagents))
        {
            imported_files += 1;
            let what = conv.source.display().to_string();
            assert!(!conv.entries.is_empty(), "{what}: no entries");
            let loaded = store.load(id).await.unwrap();
            assert!(
                loaded.diagnostics.is_empty(),
                "{what}: {:?}",
                loaded.diagnostics
            );
            assert!(
                loaded.into_entries() == conv.entries,
                "{what}: store changed the entries"
            );
            let export = log_to_anthropic(&conv.entries).value;
            assert_paired(&export, &what);
            // Re-import of the export: the same conversation (ids and times are the
            // importer's), and exporting it again gives the same request.
            let back = anthropic_to_log(&export, &mut SequentialStamp::default())
                .unwrap()
                .value;
            let again = log_to_anthropic(&back).value;
            assert_eq!(
                again.conversation_json(),
                export.conversation_json(),
                "{what}"
            );
            let strip = |e: &LogEntry| {
                let mut e = e.clone();
                e.id.clear();
                e.created_at.clear();
                e.merge_with_previous = None;
                e.part_type = None;
                // A recorded response's metadata stays in the log and is never exported.
                e.anthropic.remove(ba_protocol::claude_code::RESPONSE_KEY);
                e
            };
            let a: Vec<LogEntry> = messages(&conv.entries).iter().map(strip).collect();
            let b: Vec<LogEntry> = messages(&back).iter().map(strip).collect();
            assert_eq!(a.len(), b.len(), "{what}: entry count after re-import");
            for (x, y) in a.iter().zip(&b) {
                assert_eq!(x, y, "{what}: entry changed after re-import");
            }
        }
    }
    assert!(
        imported_files >= 8 + 4,
        "only {imported_files} files imported"
    );
    // The orphan subagent (its parent session is absent) imports on its own.
    let orphan = dir.join("6c2214d7-b87e-4432-8e41-22ba294ea584/subagents/agent-afc096d.jsonl");
    let imported = read_claude_code(&orphan).unwrap();
    assert!(!imported.main.entries.is_empty());
    assert!(imported.subagents.is_empty());
}
