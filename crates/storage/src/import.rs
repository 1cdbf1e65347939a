//! Import of other agents' session files into conversations (and the reverse direction's
//! helpers): Claude Code session JSONL with its subagent files, and Codex rollout JSONL (the
//! conversions themselves are pure and live in `ba_protocol::claude_code` and
//! `ba_protocol::codex`).
//!
//! Reading is separate from storing: [`read_claude_code`] and [`read_codex`] turn a file into
//! [`Imported`] conversations plus the list of what the log cannot express, and
//! [`store_imported`] writes them into any [`ConversationStore`].

use std::io::{BufRead as _, BufReader, Read};
use std::path::{Path, PathBuf};

use ba_protocol::LogEntry;
use ba_protocol::claude_code::session_to_log;
use ba_protocol::codex::rollout_to_log;
use ba_protocol::convert::{Converted, Loss};

use crate::error::{Result, StorageError};
use crate::id::ConversationId;
use crate::store::{ConversationStore, NewConversation};

/// One conversation read from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedConversation {
    /// The file it came from.
    pub source: PathBuf,
    /// A short name: the file stem (`agent-a881341`, the session id).
    pub name: String,
    /// The entries.
    pub entries: Vec<LogEntry>,
    /// What the log could not express, with the line or record kind.
    pub losses: Vec<Loss>,
}

/// A session and its subagents.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The main session.
    pub main: ImportedConversation,
    /// Subagent sessions (Claude Code's `<session>/subagents/*.jsonl`), by file name.
    pub subagents: Vec<ImportedConversation>,
}

/// The longest line an import or a conversion reads: 32 MiB, the bound of a request body
/// ([`ba_protocol::MAX_INPUT_BYTES`]).
pub const MAX_LINE_BYTES: usize = ba_protocol::MAX_INPUT_BYTES;

/// Reads `path` as UTF-8, naming the first bad byte when it is not; a line longer than
/// [`MAX_LINE_BYTES`] is refused without being read further ([`read_lines`]).
pub fn read_utf8(path: &Path) -> Result<String> {
    let file = std::fs::File::open(path).map_err(|e| StorageError::io("reading", path, e))?;
    read_lines(file, &path.display().to_string(), MAX_LINE_BYTES)
}

/// Reads `reader` to its end as UTF-8 text, a line at a time: the first line longer than
/// `max_line` bytes (its line break not counted) is refused as soon as it is past the bound,
/// naming its number and the bound, so no line is ever held longer than that. `what` names the
/// input in errors.
///
/// # Errors
/// [`StorageError::TooLarge`] for the long line, [`StorageError::Invalid`] for bytes that are
/// not UTF-8, [`StorageError::Io`] when reading fails.
pub fn read_lines(reader: impl Read, what: &str, max_line: usize) -> Result<String> {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut out = Vec::new();
    let (mut line, mut line_len) = (1u64, 0usize);
    loop {
        let buf = reader
            .fill_buf()
            .map_err(|e| StorageError::io("reading", what, e))?;
        if buf.is_empty() {
            break;
        }
        let end = buf.iter().position(|&b| b == b'\n');
        let content = end.unwrap_or(buf.len());
        if line_len.saturating_add(content) > max_line {
            return Err(StorageError::TooLarge {
                what: format!("line {line} of {what}"),
                size: line_len.saturating_add(content) as u64,
                limit: max_line as u64,
            });
        }
        let taken = end.map_or(buf.len(), |e| e + 1);
        out.extend_from_slice(&buf[..taken]);
        reader.consume(taken);
        if end.is_some() {
            line += 1;
            line_len = 0;
        } else {
            line_len += taken;
        }
    }
    String::from_utf8(out).map_err(|e| {
        StorageError::invalid(
            what.to_owned(),
            format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn conversation(path: &Path, converted: Converted<Vec<LogEntry>>) -> ImportedConversation {
    ImportedConversation {
        source: path.to_owned(),
        name: stem(path),
        entries: converted.value,
        losses: converted.losses,
    }
}

/// Reads a Claude Code session file and the subagent files in `<dir>/<stem>/subagents/`.
pub fn read_claude_code(path: &Path) -> Result<Imported> {
    let text = read_utf8(path)?;
    let main = conversation(path, session_to_log(&text));
    let mut subagents = Vec::new();
    let sub_dir = path
        .parent()
        .unwrap_or(Path::new("."))
        .join(stem(path))
        .join("subagents");
    if let Ok(read) = std::fs::read_dir(&sub_dir) {
        let mut files: Vec<PathBuf> = read
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        files.sort();
        for file in files {
            let text = read_utf8(&file)?;
            subagents.push(conversation(&file, session_to_log(&text)));
        }
    }
    Ok(Imported { main, subagents })
}

/// Reads a Codex rollout file.
pub fn read_codex(path: &Path) -> Result<Imported> {
    let text = read_utf8(path)?;
    Ok(Imported {
        main: conversation(path, rollout_to_log(&text)),
        subagents: Vec::new(),
    })
}

/// Writes an import into `store`: the main session as `id` (a fresh id when `None`), each
/// subagent as `<id>--<subagent name>` with the main session as its parent. Returns the ids.
///
/// All or nothing: each conversation is created whole ([`ConversationStore::create_with_entries`])
/// and, when one fails, the ones already written are deleted again. The subagents go first, so
/// a process killed part way never leaves a main session without the subagents it lists.
pub async fn store_imported<S: ConversationStore + ?Sized>(
    store: &S,
    imported: &Imported,
    id: Option<ConversationId>,
) -> Result<Vec<ConversationId>> {
    let main_id = id.unwrap_or_else(ConversationId::random);
    let mut plan = Vec::new();
    for sub in &imported.subagents {
        let name: String = sub
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let sub_id = ConversationId::new(format!("{main_id}--{name}"))?;
        let new = NewConversation {
            title: Some(format!("subagent {} of {main_id}", sub.name)),
            mode: None,
            parent: Some(main_id.to_string()),
            owner: None,
        };
        plan.push((sub_id, new, &sub.entries));
    }
    let title = Some(format!("imported from {}", imported.main.source.display()));
    let main_new = NewConversation {
        title,
        ..NewConversation::default()
    };
    plan.push((main_id.clone(), main_new, &imported.main.entries));
    let mut done: Vec<ConversationId> = Vec::new();
    for (conv, new, entries) in plan {
        if let Err(e) = store.create_with_entries(&conv, new, entries).await {
            for written in &done {
                let _ = store.delete(written).await;
            }
            return Err(e);
        }
        done.push(conv);
    }
    // The main session first, then the subagents in file order.
    done.rotate_right(1);
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_is_refused_without_being_read_whole() {
        // An endless line: reading it whole would never end.
        let endless = std::io::repeat(b'x');
        let err = read_lines(endless, "stdin", 1024).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1 of stdin is over the limit of 1 KiB"
        );
        let third = b"{}\n{}\n".iter().copied().chain(std::iter::repeat(b'y'));
        let reader = std::io::Cursor::new(third.take(10_000).collect::<Vec<u8>>());
        let err = read_lines(reader, "s.jsonl", 1024).unwrap_err();
        assert!(err.to_string().starts_with("line 3 of s.jsonl"), "{err}");
    }

    #[test]
    fn lines_up_to_the_bound_are_read_as_they_are() {
        let text = format!("{}\n{}\r\nlast", "a".repeat(1024), "b".repeat(1023));
        let read = read_lines(text.as_bytes(), "t", 1024).unwrap();
        assert_eq!(read, text);
        let bad = read_lines(&b"ok\n\xff"[..], "t", 1024).unwrap_err();
        assert!(bad.to_string().contains("offset 3"), "{bad}");
    }
}
