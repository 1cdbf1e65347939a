//! Checks of a stored conversation beyond what a load reports: tool calls and their results,
//! entry ids used twice; and of a store: workspaces whose conversation is gone.

use std::collections::{BTreeSet, HashMap};

use ba_protocol::{LogEntry, LogRole};

use crate::error::Result;
use crate::store::ConversationStore;

/// The ids of conversations that own a workspace but do not exist (files a delete left
/// behind), sorted; empty when the store keeps no workspace.
pub async fn orphan_workspaces<S: ConversationStore + ?Sized>(store: &S) -> Result<Vec<String>> {
    let Some(workspace) = store.workspace() else {
        return Ok(Vec::new());
    };
    let owners = workspace.owners().await?;
    if owners.is_empty() {
        return Ok(Vec::new());
    }
    let known: BTreeSet<String> = store.list_all().await?.into_iter().map(|m| m.id).collect();
    Ok(owners.into_iter().filter(|o| !known.contains(o)).collect())
}

/// A broken tool-call pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenPair {
    /// Sequence position (1-based index into the entries given).
    pub position: usize,
    /// The call id.
    pub call_id: String,
    /// What is wrong, as a sentence.
    pub message: String,
}

/// Finds tool calls without a result and results without a call. A result must come after
/// its call; an id answered twice is reported too.
pub fn broken_pairs(entries: &[LogEntry]) -> Vec<BrokenPair> {
    let mut open: HashMap<&str, usize> = HashMap::new();
    let mut answered: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let pos = i + 1;
        for call in e.calls() {
            open.insert(call.id.as_str(), pos);
        }
        if e.role == LogRole::Tool {
            let id = e.tool_call_id.as_deref().unwrap_or("");
            if let Some(first) = answered.get(id) {
                out.push(BrokenPair {
                    position: pos,
                    call_id: id.to_owned(),
                    message: format!("tool result for `{id}` repeats the one at entry {first}"),
                });
            } else if open.remove(id).is_some() {
                answered.insert(id, pos);
            } else {
                out.push(BrokenPair {
                    position: pos,
                    call_id: id.to_owned(),
                    message: format!("tool result for `{id}` answers no earlier tool call"),
                });
            }
        }
    }
    let mut unanswered: Vec<(&str, usize)> = open.into_iter().collect();
    unanswered.sort_by_key(|&(id, pos)| (pos, id.to_owned()));
    for (id, pos) in unanswered {
        out.push(BrokenPair {
            position: pos,
            call_id: id.to_owned(),
            message: format!("tool call `{id}` has no result"),
        });
    }
    out.sort_by_key(|b| b.position);
    out
}

/// An entry id used by more than one entry (conversion to a request body refuses these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateId {
    /// Position of the repeat (1-based index into the entries given).
    pub position: usize,
    /// Position of the first entry with the id.
    pub first: usize,
    /// The id.
    pub id: String,
}

/// Finds entry ids used more than once, each repeat once, in order.
pub fn duplicate_ids(entries: &[LogEntry]) -> Vec<DuplicateId> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        match seen.get(e.id.as_str()) {
            Some(&first) => out.push(DuplicateId {
                position: i + 1,
                first,
                id: e.id.clone(),
            }),
            None => {
                seen.insert(e.id.as_str(), i + 1);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::LogToolCall;

    fn call(id: &str, calls: &[&str]) -> LogEntry {
        let mut e = LogEntry::new(id, LogRole::Assistant, "t");
        e.tool_calls = Some(
            calls
                .iter()
                .map(|c| LogToolCall::new(*c, "f", &serde_json::json!({})))
                .collect(),
        );
        e
    }

    fn result(id: &str, call: &str) -> LogEntry {
        let mut e = LogEntry::new(id, LogRole::Tool, "t").with_text("ok");
        e.tool_call_id = Some(call.to_owned());
        e
    }

    #[test]
    fn finds_every_kind_of_broken_pair() {
        let entries = [
            result("r0", "early"),
            call("a", &["c1", "c2"]),
            result("r1", "c1"),
            result("r2", "c1"),
            call("b", &["c3"]),
            result("r3", "c3"),
        ];
        let got: Vec<String> = broken_pairs(&entries)
            .into_iter()
            .map(|b| format!("{}: {}", b.position, b.message))
            .collect();
        assert_eq!(
            got,
            [
                "1: tool result for `early` answers no earlier tool call",
                "2: tool call `c2` has no result",
                "4: tool result for `c1` repeats the one at entry 3",
            ]
        );
        assert!(broken_pairs(&entries[1..3]).len() == 1);
        assert!(broken_pairs(&entries[4..]).is_empty());
    }

    #[test]
    fn finds_each_repeated_entry_id() {
        let entries = [
            call("a", &[]),
            result("b", "x"),
            call("a", &[]),
            call("a", &[]),
        ];
        let got: Vec<(usize, usize)> = duplicate_ids(&entries)
            .iter()
            .map(|d| (d.position, d.first))
            .collect();
        assert_eq!(got, [(3, 1), (4, 1)]);
        assert!(duplicate_ids(&entries[..2]).is_empty());
    }
}
