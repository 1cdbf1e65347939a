//! Persisted compaction: when a window crosses its trigger, the compressed window is recorded
//! in the log, and later requests start from it and only append what came after, until the
//! trigger is crossed again. Between two compactions the front of every request is the same,
//! so a provider's prompt cache serves it; and the same log always gives the same window.
//!
//! A record lists the window as it was sent: runs of log entries kept as they are (by id) and
//! the entries a strategy changed or added (traces, cut texts, summaries) in full. It lives in
//! the `extra` map of a system entry that is never sent ([`CompactionRecord::to_entry`]).

use ba_protocol::{Content, LogEntry, LogRole};
use serde::{Deserialize, Serialize};

use crate::window::{Changed, Dropped};

/// The key of the record in a log entry's `extra` map.
pub const COMPACTION_KEY: &str = "compaction";

/// The version of the record written today.
pub const COMPACTION_VERSION: u32 = 1;

/// One piece of a recorded window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WindowItem {
    /// Log entries `first`..=`last` (consecutive in the log), as they are in the log.
    Keep {
        /// Id of the first entry of the run.
        first: String,
        /// Id of the last entry of the run.
        last: String,
    },
    /// An entry changed or added by the compaction, in full.
    Entry {
        /// The entry as it was sent.
        entry: Box<LogEntry>,
    },
}

/// A compaction, as the log records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionRecord {
    /// [`COMPACTION_VERSION`] when written.
    pub version: u32,
    /// The strategies applied.
    pub strategies: Vec<String>,
    /// The window, in order.
    pub items: Vec<WindowItem>,
    /// Message tokens before the compaction.
    pub tokens_before: usize,
    /// Message tokens after.
    pub tokens_after: usize,
    /// The tokens the compaction aimed at.
    pub target: usize,
    /// Entries that left the window, with why.
    #[serde(default)]
    pub dropped: Vec<Dropped>,
    /// Entries changed or added, with how.
    #[serde(default)]
    pub changed: Vec<Changed>,
}

/// Why a record could not be used; the window is then built from the whole log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordProblem {
    /// The id of the record's entry.
    pub record: String,
    /// What is wrong.
    pub message: String,
}

impl CompactionRecord {
    /// The record kept in `entry`, if it holds one.
    pub fn of(entry: &LogEntry) -> Option<Result<Self, RecordProblem>> {
        let value = entry.extra.get(COMPACTION_KEY)?;
        Some(
            Self::deserialize(value)
                .map_err(|e| RecordProblem {
                    record: entry.id.clone(),
                    message: format!("unreadable compaction record: {e}"),
                })
                .and_then(|r| {
                    if r.version > COMPACTION_VERSION {
                        Err(RecordProblem {
                            record: entry.id.clone(),
                            message: format!(
                                "compaction record version {} is newer than {COMPACTION_VERSION}",
                                r.version
                            ),
                        })
                    } else {
                        Ok(r)
                    }
                }),
        )
    }

    /// The log entry that keeps the record: a system entry that is never sent, whose text says
    /// what happened for a person reading the log.
    pub fn to_entry(&self, id: impl Into<String>, created_at: impl Into<String>) -> LogEntry {
        let kept = self.items.len();
        let mut e = LogEntry::new(id, LogRole::System, created_at).with_text(format!(
            "[compaction: {} → {} tokens by {}; {} piece(s) kept, {} entries left out, {} changed]",
            self.tokens_before,
            self.tokens_after,
            self.strategies.join(", "),
            kept,
            self.dropped.len(),
            self.changed.len()
        ));
        e.include_in_context = false;
        e.part_type = Some(COMPACTION_KEY.to_owned());
        e.extra.insert(
            COMPACTION_KEY.to_owned(),
            serde_json::to_value(self).unwrap_or(serde_json::Value::Null),
        );
        e
    }

    /// Records `window` (the entries as sent): runs of entries equal to their log entry
    /// (`as_logged` gives the logged entry of an id, as the window would show it) are kept by
    /// id, every other entry in full.
    pub fn new(
        window: &[LogEntry],
        as_logged: impl Fn(&str) -> Option<(usize, LogEntry)>,
        strategies: Vec<String>,
        tokens: (usize, usize, usize),
        dropped: Vec<Dropped>,
        changed: Vec<Changed>,
    ) -> Self {
        let mut items: Vec<WindowItem> = Vec::new();
        let mut run: Option<(String, String, usize)> = None;
        let flush = |run: &mut Option<(String, String, usize)>, items: &mut Vec<WindowItem>| {
            if let Some((first, last, _)) = run.take() {
                items.push(WindowItem::Keep { first, last });
            }
        };
        for e in window {
            match as_logged(&e.id) {
                Some((pos, logged)) if logged == *e => match &mut run {
                    Some((_, last, at)) if *at + 1 == pos => {
                        last.clone_from(&e.id);
                        *at = pos;
                    }
                    _ => {
                        flush(&mut run, &mut items);
                        run = Some((e.id.clone(), e.id.clone(), pos));
                    }
                },
                _ => {
                    flush(&mut run, &mut items);
                    items.push(WindowItem::Entry {
                        entry: Box::new(e.clone()),
                    });
                }
            }
        }
        flush(&mut run, &mut items);
        Self {
            version: COMPACTION_VERSION,
            strategies,
            items,
            tokens_before: tokens.0,
            tokens_after: tokens.1,
            target: tokens.2,
            dropped,
            changed,
        }
    }
}

/// Whether an entry holds a compaction record.
pub fn is_record(entry: &LogEntry) -> bool {
    entry.extra.contains_key(COMPACTION_KEY)
}

/// The entries a window is built from: the window of the last compaction record (its kept
/// runs read back from the log), then the entries logged after it; records themselves are never
/// part of it. `from_log[i]` says whether entry `i` is a log entry as logged (not one a
/// compaction changed or added).
#[derive(Debug, Clone, Default)]
pub struct Effective {
    /// The entries, in order.
    pub entries: Vec<LogEntry>,
    /// Whether each entry is as logged.
    pub from_log: Vec<bool>,
    /// Entries logged after the record (all of them without one).
    pub tail: usize,
    /// The id of the record applied.
    pub record: Option<String>,
    /// A record that could not be applied (the log is then read whole).
    pub problem: Option<RecordProblem>,
}

impl Effective {
    /// Applies the last readable compaction record of `log`.
    pub fn of(log: &[LogEntry]) -> Self {
        let plain = |entries: &[LogEntry]| -> Vec<LogEntry> {
            entries.iter().filter(|e| !is_record(e)).cloned().collect()
        };
        let Some(at) = log.iter().rposition(is_record) else {
            let entries = plain(log);
            return Self {
                from_log: vec![true; entries.len()],
                tail: entries.len(),
                entries,
                record: None,
                problem: None,
            };
        };
        let record_id = log[at].id.clone();
        let fail = |message: String| {
            let entries = plain(log);
            Self {
                from_log: vec![true; entries.len()],
                tail: entries.len(),
                entries,
                record: None,
                problem: Some(RecordProblem {
                    record: record_id.clone(),
                    message,
                }),
            }
        };
        let record = match CompactionRecord::of(&log[at]) {
            Some(Ok(r)) => r,
            Some(Err(p)) => return fail(p.message),
            None => return fail("not a record".to_owned()),
        };
        let before = &log[..at];
        let position = |id: &str| before.iter().position(|e| e.id == id);
        let mut entries = Vec::new();
        let mut from_log = Vec::new();
        for item in &record.items {
            match item {
                WindowItem::Keep { first, last } => {
                    let (Some(a), Some(b)) = (position(first), position(last)) else {
                        return fail(format!(
                            "the record keeps entries {first}..{last}, which are not in the log before it"
                        ));
                    };
                    if b < a {
                        return fail(format!("the record's run {first}..{last} is reversed"));
                    }
                    for e in before[a..=b].iter().filter(|e| !is_record(e)) {
                        entries.push(e.clone());
                        from_log.push(true);
                    }
                }
                WindowItem::Entry { entry } => {
                    entries.push((**entry).clone());
                    from_log.push(false);
                }
            }
        }
        let after = plain(&log[at + 1..]);
        let tail = after.len();
        from_log.extend(std::iter::repeat_n(true, tail));
        entries.extend(after);
        Self {
            entries,
            from_log,
            tail,
            record: Some(record_id),
            problem: None,
        }
    }

    /// The entries logged after the record.
    pub fn tail_entries(&self) -> &[LogEntry] {
        &self.entries[self.entries.len() - self.tail..]
    }
}

/// The characters of an entry's text, for the builder's character cap.
pub(crate) fn chars_of(e: &LogEntry) -> usize {
    match &e.content {
        Some(Content::Text(t)) => t.chars().count(),
        _ => e.text().chars().count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(id: &str, role: LogRole, text: &str) -> LogEntry {
        LogEntry::new(id, role, "t").with_text(text)
    }

    #[test]
    fn a_record_keeps_runs_by_id_and_changed_entries_whole() {
        let log = vec![
            e("u1", LogRole::User, "first"),
            e("a1", LogRole::Assistant, "long answer"),
            e("u2", LogRole::User, "second"),
            e("a2", LogRole::Assistant, "another"),
        ];
        let mut window = log.clone();
        window[1] = e("a1", LogRole::Assistant, "short");
        window.insert(
            0,
            e("summary-1", LogRole::System, "CONVERSATION_SUMMARY\nx"),
        );
        let logged = |id: &str| {
            log.iter()
                .position(|e| e.id == id)
                .map(|p| (p, log[p].clone()))
        };
        let record = CompactionRecord::new(
            &window,
            logged,
            vec!["key-messages".into()],
            (100, 40, 50),
            Vec::new(),
            Vec::new(),
        );
        let ops: Vec<String> = record
            .items
            .iter()
            .map(|i| match i {
                WindowItem::Keep { first, last } => format!("keep {first}..{last}"),
                WindowItem::Entry { entry } => format!("entry {}", entry.id),
            })
            .collect();
        assert_eq!(
            ops,
            ["entry summary-1", "keep u1..u1", "entry a1", "keep u2..a2"]
        );
        // Appended to the log, the record gives the same window back, then what follows it.
        let mut logged_log = log.clone();
        logged_log.push(record.to_entry("c1", "t"));
        logged_log.push(e("u3", LogRole::User, "third"));
        let eff = Effective::of(&logged_log);
        let mut expected = window.clone();
        expected.push(e("u3", LogRole::User, "third"));
        assert_eq!(eff.entries, expected);
        assert_eq!(eff.from_log, [false, true, false, true, true, true]);
        assert_eq!(eff.tail, 1);
        assert_eq!(eff.record.as_deref(), Some("c1"));
    }

    #[test]
    fn a_record_that_names_missing_entries_falls_back_to_the_whole_log() {
        let record = CompactionRecord {
            version: COMPACTION_VERSION,
            strategies: Vec::new(),
            items: vec![WindowItem::Keep {
                first: "gone".into(),
                last: "gone".into(),
            }],
            tokens_before: 0,
            tokens_after: 0,
            target: 0,
            dropped: Vec::new(),
            changed: Vec::new(),
        };
        let log = vec![e("u1", LogRole::User, "hi"), record.to_entry("c1", "t")];
        let eff = Effective::of(&log);
        assert_eq!(eff.entries.len(), 1);
        assert!(eff.problem.unwrap().message.contains("gone"));
    }
}
