//! Persisted compaction: when a window crosses its trigger, the compressed window is recorded
//! in the log, and later requests start from it and only append what came after, until the
//! trigger is crossed again. Between two compactions the front of every request is the same,
//! so a provider's prompt cache serves it; and the same log always gives the same window.
//!
//! A record lists the window as it was sent: runs of log entries kept as they are (by id) and
//! the entries a strategy changed or added (traces, cut texts, summaries) in full. It lives in
//! a system entry that is never sent ([`CompactionRecord::into_entry`]); the record type is
//! part of the log schema ([`ba_protocol::CompactionRecord`]).

use ba_protocol::{
    COMPACTION_VERSION, ChangeKind, Changed, CompactionRecord, Content, Dropped, LogEntry,
    WindowItem,
};

/// Why a record could not be used; the window is then built from the whole log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordProblem {
    /// The id of the record's entry.
    pub record: String,
    /// What is wrong.
    pub message: String,
}

/// The record kept in `entry`, if it holds one: an error names a record this build cannot
/// read (damaged, or of a newer version).
pub fn record_of(entry: &LogEntry) -> Option<Result<&CompactionRecord, RecordProblem>> {
    if !entry.is_compaction() {
        return None;
    }
    let problem = |message: String| RecordProblem {
        record: entry.id.clone(),
        message,
    };
    Some(match &entry.records.compaction {
        Some(r) if r.version > COMPACTION_VERSION => Err(problem(format!(
            "compaction record version {} is newer than {COMPACTION_VERSION}",
            r.version
        ))),
        Some(r) => Ok(r),
        None => Err(problem(match entry.extra.get("compaction") {
            Some(v) => match serde_json::from_value::<CompactionRecord>(v.clone()) {
                Err(e) => format!("unreadable compaction record: {e}"),
                Ok(r) => format!(
                    "compaction record version {} is newer than {COMPACTION_VERSION}",
                    r.version
                ),
            },
            None => "an entry of kind compaction without its record".to_owned(),
        })),
    })
}

/// Records `window` (the entries as sent): runs of entries equal to their log entry
/// (`as_logged` gives the logged entry of an id, as the window would show it) are kept by
/// id, every other entry in full.
pub fn record_window(
    window: &[LogEntry],
    as_logged: impl Fn(&str) -> Option<(usize, LogEntry)>,
    strategies: Vec<String>,
    tokens: (usize, usize, usize),
    dropped: Vec<Dropped>,
    changed: Vec<Changed>,
) -> CompactionRecord {
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
    CompactionRecord {
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

/// A `/compact`: a window that is `summary` alone, replacing `entries` (the history so far).
pub fn summary_record(
    summary: LogEntry,
    entries: &[LogEntry],
    tokens: (usize, usize, usize),
) -> CompactionRecord {
    CompactionRecord {
        version: COMPACTION_VERSION,
        strategies: vec!["compact".to_owned()],
        changed: vec![Changed {
            id: summary.id.clone(),
            kind: ChangeKind::SummaryInserted,
        }],
        items: vec![WindowItem::Entry {
            entry: Box::new(summary),
        }],
        tokens_before: tokens.0,
        tokens_after: tokens.1,
        target: tokens.2,
        dropped: entries
            .iter()
            .map(|e| Dropped {
                id: e.id.clone(),
                reason: ba_protocol::DropReason::Summarized,
            })
            .collect(),
    }
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
            entries
                .iter()
                .filter(|e| !e.is_compaction())
                .cloned()
                .collect()
        };
        let Some(at) = log.iter().rposition(LogEntry::is_compaction) else {
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
        let record = match record_of(&log[at]) {
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
                    for e in before[a..=b].iter().filter(|e| !e.is_compaction()) {
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
    use ba_protocol::LogRole;

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
        let record = record_window(
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
        logged_log.push(record.into_entry("c1", "t"));
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
        let log = vec![e("u1", LogRole::User, "hi"), record.into_entry("c1", "t")];
        let eff = Effective::of(&log);
        assert_eq!(eff.entries.len(), 1);
        assert!(eff.problem.unwrap().message.contains("gone"));
    }

    #[test]
    fn a_version_1_compact_boundary_reads_as_a_record_of_its_summary() {
        let v1 = [
            r#"{"schema_version":1,"id":"u1","role":"user","created_at":"t","content":"old question"}"#,
            r#"{"schema_version":1,"id":"a1","role":"assistant","created_at":"t","content":"old answer","round":1}"#,
            r#"{"schema_version":1,"id":"b1","role":"system","created_at":"t","content":"CONVERSATION_SUMMARY\nthe user asked about Q3","kind":"compact_boundary"}"#,
            r#"{"schema_version":1,"id":"u2","role":"user","created_at":"t","content":"next"}"#,
        ]
        .join("\n");
        let log = LogEntry::parse_jsonl(&v1).unwrap();
        let boundary = &log[2];
        assert_eq!(boundary.kind(), Some(ba_protocol::EntryKind::Compaction));
        let record = record_of(boundary).unwrap().unwrap();
        assert!(record.starts_afresh());
        let eff = Effective::of(&log);
        let ids: Vec<&str> = eff.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["b1", "u2"]);
        assert_eq!(eff.entries[0].role, LogRole::System);
        assert!(eff.entries[0].text().contains("Q3"));
        assert!(eff.entries[0].include_in_context);
    }

    #[test]
    fn a_damaged_record_is_named_and_the_log_is_read_whole() {
        let line = r#"{"schema_version":2,"id":"c1","role":"system","created_at":"t","kind":"compaction","include_in_context":false,"compaction":{"version":1,"items":"nope"}}"#;
        let log = vec![
            e("u1", LogRole::User, "hi"),
            LogEntry::from_json(line).unwrap(),
        ];
        assert!(log[1].extra.contains_key("compaction"));
        let eff = Effective::of(&log);
        assert_eq!(eff.entries.len(), 1);
        let problem = eff.problem.unwrap();
        assert_eq!(problem.record, "c1");
        assert!(
            problem.message.contains("unreadable"),
            "{}",
            problem.message
        );
    }
}
