//! The JSONL codec of a conversation file: one `{"seq":N,"at":MS,"entry":{…}}` record a line.
//! Reading is lenient and reports what it skips (blank, not UTF-8, corrupt, out of order, a
//! torn tail); the head of a line (sequence number and time) is read without parsing the entry
//! when the line is one this store wrote.

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;

use ba_protocol::LogEntry;
use serde::{Deserialize, Serialize};

use crate::error::{Result, StorageError};
use crate::store::{Diagnostic, DiagnosticKind, Loaded, StoredEntry};

/// What a scan of a log file learned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Tail {
    /// Length of the file covered (up to and including the last newline).
    pub(super) len: u64,
    pub(super) last_seq: u64,
    pub(super) last_at: i64,
    /// Bytes after the last newline (a torn tail).
    pub(super) torn: u64,
}

#[derive(Serialize)]
struct LineOut<'a> {
    seq: u64,
    at: i64,
    entry: &'a LogEntry,
}

/// The lines of `entries` numbered from `first_seq`, each stamped `at`, ready to write
/// (`what` names the log in an error).
pub(super) fn encode_lines(
    what: &dyn std::fmt::Display,
    entries: &[LogEntry],
    first_seq: u64,
    at: i64,
) -> Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(256 * entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let line = LineOut {
            seq: first_seq + i as u64,
            at,
            entry,
        };
        serde_json::to_writer(&mut buf, &line).map_err(|e| StorageError::Format {
            what: format!("entry `{}` of `{what}`", entry.id),
            message: e.to_string(),
        })?;
        buf.push(b'\n');
    }
    Ok(buf)
}

#[derive(Deserialize)]
struct LineIn {
    seq: u64,
    at: i64,
    entry: LogEntry,
}

#[derive(Deserialize)]
struct LineHead {
    seq: u64,
    at: i64,
    #[allow(dead_code)]
    entry: serde::de::IgnoredAny,
}

/// Reads the file from `from.len` on, following sequence numbers and times, and measures the
/// torn tail. Only the record heads are parsed.
pub(super) fn scan_tail(file: &File, path: &Path, from: Tail) -> Result<Tail> {
    let mut bytes = Vec::new();
    let mut reader = file;
    reader
        .seek(SeekFrom::Start(from.len))
        .and_then(|_| reader.read_to_end(&mut bytes))
        .map_err(|e| StorageError::io("reading", path, e))?;
    let mut tail = Tail { torn: 0, ..from };
    let mut offset = 0usize;
    while let Some(nl) = bytes[offset..].iter().position(|&b| b == b'\n') {
        let line = &bytes[offset..offset + nl];
        offset += nl + 1;
        tail.len += nl as u64 + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let head = record_head(line);
        let next = reserve(tail.last_seq, head.map(|(seq, _)| seq));
        if let Some((seq, at)) = head
            && seq == next
            && seq > tail.last_seq
        {
            tail.last_at = at;
        }
        tail.last_seq = next;
    }
    tail.torn = (bytes.len() - offset) as u64;
    Ok(tail)
}

/// The highest sequence number a file has used after one more non-blank line: the line's own
/// number when its head is readable, never going back. Appends continue after it, so a number
/// stays taken even when its line is damaged or out of place.
pub(super) fn reserve(last: u64, head: Option<u64>) -> u64 {
    head.map_or(last, |seq| last.max(seq))
}

/// Sequence number and time of a record, reading as little of the line as possible.
fn record_head(line: &[u8]) -> Option<(u64, i64)> {
    if let Some(head) = quick_head(line) {
        return Some(head);
    }
    serde_json::from_slice::<LineHead>(line)
        .ok()
        .map(|h| (h.seq, h.at))
}

/// What one line of a log file holds, before sequence numbers are checked.
enum Parsed {
    Blank,
    /// Not UTF-8 (the column of the first bad byte); the head, when readable, used its number.
    NotUtf8(usize, Option<u64>),
    /// A record before `from_seq`: only its head was read.
    Skipped(u64),
    Record(Box<LineIn>),
    /// Not a record; the head, when readable, still used its sequence number.
    Corrupt(Option<u64>, String),
}

fn parse_line(line: &[u8], from_seq: u64) -> Parsed {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Parsed::Blank;
    }
    if let Err(e) = std::str::from_utf8(line) {
        return Parsed::NotUtf8(e.valid_up_to() + 1, record_head(line).map(|(seq, _)| seq));
    }
    if let Some((seq, _)) = quick_head(line)
        && seq < from_seq
    {
        return Parsed::Skipped(seq);
    }
    match serde_json::from_slice::<LineIn>(line) {
        Ok(rec) => Parsed::Record(Box::new(rec)),
        Err(e) => Parsed::Corrupt(record_head(line).map(|(seq, _)| seq), e.to_string()),
    }
}

/// Parses whole lines (`bytes` ends with a newline or is empty) into (line start, result).
fn parse_lines(bytes: &[u8], base: usize, from_seq: u64) -> Vec<(usize, Parsed)> {
    let mut out = Vec::with_capacity(bytes.len() / 128 + 1);
    let mut offset = 0;
    while let Some(nl) = bytes[offset..].iter().position(|&b| b == b'\n') {
        out.push((
            base + offset,
            parse_line(&bytes[offset..offset + nl], from_seq),
        ));
        offset += nl + 1;
    }
    out
}

/// Big files are parsed on this many threads at most.
const MAX_PARSE_THREADS: usize = 4;
/// Below this size one thread is quicker than starting more.
const PARALLEL_MIN_BYTES: usize = 4 << 20;

/// Splits a log file into records, skipping (and reporting) what cannot be read.
///
/// Lines are parsed in parallel chunks (JSON parsing is the cost of a load); sequence numbers
/// are then checked in file order.
pub(crate) fn parse_log(bytes: &[u8], from_seq: u64) -> Loaded {
    parse_log_with(bytes, from_seq, PARALLEL_MIN_BYTES)
}

fn parse_log_with(bytes: &[u8], from_seq: u64, parallel_min: usize) -> Loaded {
    let whole = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |last| last + 1);
    let (body, torn) = bytes.split_at(whole);
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(MAX_PARSE_THREADS);
    let parsed: Vec<(usize, Parsed)> = if threads > 1 && body.len() >= parallel_min {
        let mut bounds = vec![0];
        for k in 1..threads {
            let guess = body.len() * k / threads;
            let cut = body[guess..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(body.len(), |p| guess + p + 1);
            if cut > *bounds.last().unwrap_or(&0) {
                bounds.push(cut);
            }
        }
        bounds.push(body.len());
        bounds.dedup();
        std::thread::scope(|scope| {
            let handles: Vec<_> = bounds
                .windows(2)
                .map(|w| {
                    let (a, b) = (w[0], w[1]);
                    scope.spawn(move || parse_lines(&body[a..b], a, from_seq))
                })
                .collect();
            let mut all = Vec::new();
            for h in handles {
                match h.join() {
                    Ok(part) => all.extend(part),
                    // A parser thread cannot panic on data; if it does, parse here instead.
                    Err(_) => return parse_lines(body, 0, from_seq),
                }
            }
            all
        })
    } else {
        parse_lines(body, 0, from_seq)
    };
    let mut loaded = Loaded::default();
    // `last_seq`: the last record taken; `reserved`: the highest number any line has used
    // (what the next append follows). A damaged line costs only itself: later records are
    // taken as long as their numbers go up.
    let mut last_seq = 0u64;
    let mut reserved = 0u64;
    let mut line_no = 0u64;
    for (at, p) in parsed {
        line_no += 1;
        let at = at as u64;
        let mut diag = |kind, message| {
            loaded.diagnostics.push(Diagnostic {
                kind,
                line: line_no,
                offset: at,
                message,
            });
        };
        match p {
            Parsed::Blank => {}
            Parsed::NotUtf8(col, head) => {
                reserved = reserve(reserved, head);
                diag(
                    DiagnosticKind::NotUtf8,
                    format!(
                        "not UTF-8 (invalid byte at column {col}); quarantined in place, skipped"
                    ),
                );
            }
            Parsed::Skipped(seq) => {
                reserved = reserved.max(seq);
                if seq > last_seq {
                    last_seq = seq;
                } else {
                    diag(
                        DiagnosticKind::OutOfOrder,
                        format!("sequence number {seq} does not follow {last_seq}; skipped"),
                    );
                }
            }
            Parsed::Record(rec) => {
                reserved = reserved.max(rec.seq);
                if rec.seq <= last_seq {
                    diag(
                        DiagnosticKind::OutOfOrder,
                        format!(
                            "sequence number {} does not follow {last_seq}; skipped",
                            rec.seq
                        ),
                    );
                    continue;
                }
                last_seq = rec.seq;
                if rec.seq < from_seq {
                    continue;
                }
                let LineIn { seq, at, entry } = *rec;
                loaded.entries.push(StoredEntry {
                    seq,
                    appended_ms: at,
                    entry,
                });
            }
            Parsed::Corrupt(head, e) => {
                reserved = reserve(reserved, head);
                diag(
                    DiagnosticKind::Corrupt,
                    format!("not a log record ({e}); quarantined in place, skipped"),
                );
            }
        }
    }
    loaded.last_seq = reserved;
    if !torn.is_empty() {
        loaded.diagnostics.push(Diagnostic {
            kind: DiagnosticKind::TornTail,
            line: line_no + 1,
            offset: whole as u64,
            message: format!(
                "the last {} byte(s) have no newline: a write cut short, never acknowledged; skipped",
                torn.len()
            ),
        });
    }
    loaded
}

/// The head of a line this store wrote (`{"seq":N,"at":M,…`), without parsing the rest.
fn quick_head(line: &[u8]) -> Option<(u64, i64)> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let end = rest.iter().position(|b| !b.is_ascii_digit())?;
    let seq = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    let rest = rest[end..].strip_prefix(b",\"at\":")?;
    let end = rest
        .iter()
        .position(|b| !(b.is_ascii_digit() || *b == b'-'))?;
    let at = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    rest[end..].starts_with(b",\"entry\":").then_some((seq, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record(seq: u64) -> Vec<u8> {
        let entry = LogEntry::new(format!("m{seq}"), ba_protocol::LogRole::User, "t")
            .with_text(format!("text {seq} é"));
        encode_lines(&"t", &[entry], seq, 7).unwrap()
    }

    proptest! {
        /// Garbage lines between records and a torn tail never cost a whole record, and the
        /// parallel parse agrees with the single-threaded one.
        #[test]
        fn garbage_never_costs_a_good_record(
            n in 1u64..40,
            garbage in proptest::collection::vec((0usize..40, proptest::collection::vec(any::<u8>(), 0..30)), 0..6),
            torn in proptest::collection::vec(any::<u8>(), 0..20),
            from in 1u64..45,
        ) {
            let mut bytes = Vec::new();
            for seq in 1..=n {
                for (at, junk) in &garbage {
                    if *at as u64 == seq {
                        // Junk never holds a newline or a record head, so it is one bad line.
                        let mut junk: Vec<u8> = junk.iter().map(|&b| if b == b'\n' { b'x' } else { b }).collect();
                        junk.insert(0, b'#');
                        junk.push(b'\n');
                        bytes.extend(junk);
                    }
                }
                bytes.extend(record(seq));
            }
            let torn: Vec<u8> = torn.into_iter().filter(|&b| b != b'\n').collect();
            bytes.extend(&torn);
            let seq_load = parse_log_with(&bytes, from, usize::MAX);
            let par_load = parse_log_with(&bytes, from, 0);
            prop_assert_eq!(&seq_load, &par_load);
            let seqs: Vec<u64> = seq_load.entries.iter().map(|e| e.seq).collect();
            prop_assert_eq!(seqs, (from.min(n + 1)..=n).collect::<Vec<_>>());
            let torn_reported = seq_load.diagnostics.iter().any(|d| d.kind == DiagnosticKind::TornTail);
            prop_assert_eq!(torn_reported, !torn.is_empty());
        }
    }
}
