//! Rewinds: how a conversation's history reads once the entries a rewind took back are left
//! out. The log keeps everything (it is append-only); this is the one place that says what a
//! rewind entry takes back, for the agent, the export and the checks of `log verify` alike.

use ba_protocol::EntryKind;

use crate::store::{Loaded, StoredEntry};

/// A log as its history stands after its rewinds: each rewind entry takes back the entries
/// before it whose sequence number is past its `to_seq` (they stay in the log); the rewind
/// entries themselves are left out. What a model is shown and what a check of the history
/// reads.
pub fn after_rewinds(stored: Vec<StoredEntry>) -> Vec<StoredEntry> {
    let mut kept: Vec<StoredEntry> = Vec::with_capacity(stored.len());
    for s in stored {
        if s.entry.records.kind == Some(EntryKind::Rewind) {
            if let Some(r) = s.entry.records.rewind {
                kept.retain(|k| k.seq <= r.to_seq);
            }
            continue;
        }
        kept.push(s);
    }
    kept
}

impl Loaded {
    /// The entries of the history as it stands after its rewinds (see [`after_rewinds`]).
    pub fn after_rewinds(self) -> Vec<StoredEntry> {
        after_rewinds(self.entries)
    }
}

#[cfg(test)]
mod tests {
    use ba_protocol::{EntryKind, LogEntry, LogRole, RewindRecord};

    use super::after_rewinds;
    use crate::store::{Loaded, StoredEntry};

    fn entry(seq: u64, text: &str) -> StoredEntry {
        StoredEntry {
            seq,
            appended_ms: 0,
            entry: LogEntry::new(format!("e{seq}"), LogRole::User, "2026-01-01T00:00:00Z")
                .with_text(text),
        }
    }

    fn rewind(seq: u64, to_seq: u64) -> StoredEntry {
        let mut e = entry(seq, "rewind");
        e.entry.records.kind = Some(EntryKind::Rewind);
        e.entry.records.rewind = Some(RewindRecord { to_seq });
        e
    }

    fn seqs(stored: &[StoredEntry]) -> Vec<u64> {
        stored.iter().map(|s| s.seq).collect()
    }

    #[test]
    fn a_rewind_takes_back_what_came_after_its_point_and_before_itself() {
        let log = vec![
            entry(1, "a"),
            entry(2, "b"),
            entry(3, "c"),
            rewind(4, 1),
            entry(5, "d"),
            rewind(6, 0),
            entry(7, "e"),
        ];
        assert_eq!(seqs(&after_rewinds(log.clone())), [7]);
        assert_eq!(seqs(&after_rewinds(log[..5].to_vec())), [1, 5]);
    }

    #[test]
    fn a_loaded_log_reads_the_same_history_as_its_entries() {
        let entries = vec![entry(1, "a"), entry(2, "b"), rewind(3, 1), entry(4, "c")];
        let loaded = Loaded {
            entries: entries.clone(),
            diagnostics: Vec::new(),
            last_seq: 4,
        };
        assert_eq!(seqs(&loaded.after_rewinds()), seqs(&after_rewinds(entries)));
    }
}
