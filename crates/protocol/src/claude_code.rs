//! Claude Code session transcripts (JSONL) → log entries.
//!
//! A Claude Code session file holds one record a line: `user` and `assistant` records carry an
//! Anthropic message (assistant messages are split one content block per record, sharing the
//! message id), `system` records carry compaction boundaries and UI events, and `progress`,
//! `file-history-snapshot` and `queue-operation` records are UI state, not conversation.
//!
//! This module only converts text; reading files (and subagent folders) is the storage crate's.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::anthropic::AnthropicMessage;
use crate::content::{Content, JsonMap};
use crate::convert::{Converted, Loss, Stamp, message_to_log};
use crate::log::{LogEntry, LogRole};

/// Prefix of the system entry a compaction summary becomes: the summary class that compression
/// keeps.
pub const SUMMARY_PREFIX: &str = "CONVERSATION_SUMMARY";

/// Key of the entry's `anthropic` map that keeps a recorded response's metadata (`id`, `model`,
/// `usage`, `stop_reason`, …): kept in the log, never sent back in a request.
pub const RESPONSE_KEY: &str = "response";

/// Uses each record's `uuid` and `timestamp` for the entries it yields.
struct RecordStamp {
    id: String,
    time: String,
    used: u32,
}

impl Stamp for RecordStamp {
    fn next_id(&mut self) -> String {
        self.used += 1;
        if self.used == 1 {
            self.id.clone()
        } else {
            format!("{}#{}", self.id, self.used)
        }
    }
    fn now(&mut self) -> String {
        self.time.clone()
    }
}

fn str_field<'a>(record: &'a Value, key: &str) -> Option<&'a str> {
    record.get(key).and_then(Value::as_str)
}

/// Whether `text` looks like a Claude Code session (its first records have `type` and `uuid`
/// or `sessionId`).
pub fn looks_like_session(text: &str) -> bool {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .take(5)
        .any(|line| {
            serde_json::from_str::<Value>(line).is_ok_and(|v| {
                v.get("type").is_some()
                    && (v.get("sessionId").is_some()
                        || v.get("uuid").is_some()
                        || v.get("messageId").is_some())
            })
        })
}

/// Converts a session transcript to log entries.
///
/// Assistant records sharing a message id are merged into one entry; tool results become `tool`
/// entries; a compaction summary becomes a system entry starting with [`SUMMARY_PREFIX`]; a
/// compaction boundary and other system records become UI-only entries
/// (`include_in_context: false`). Lines that are not JSON and records that are not conversation
/// are listed as losses with their line numbers or counts.
pub fn session_to_log(text: &str) -> Converted<Vec<LogEntry>> {
    let mut session = Session::default();
    for (i, line) in text.lines().enumerate() {
        if !line.trim().is_empty() {
            session.record(i + 1, line);
        }
    }
    session.finish()
}

/// A session read so far: the entries, what could not be kept, the records left out by kind,
/// where each assistant message's entry is (later records of it merge there) and how many UI
/// payloads of tool results were left out.
#[derive(Default)]
struct Session {
    entries: Vec<LogEntry>,
    losses: Vec<Loss>,
    skipped: BTreeMap<String, usize>,
    assistant_by_message: HashMap<String, usize>,
    tool_use_results: usize,
}

impl Session {
    fn loss(&mut self, line_no: usize, what: String) {
        self.losses.push(Loss {
            path: format!("line {line_no}"),
            what,
        });
    }

    /// Reads record `line` (line number `line_no`).
    fn record(&mut self, line_no: usize, line: &str) {
        let record: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => return self.loss(line_no, format!("not valid JSON ({e}); skipped")),
        };
        let id = str_field(&record, "uuid")
            .map(str::to_owned)
            .unwrap_or_else(|| format!("line-{line_no}"));
        let time = str_field(&record, "timestamp").unwrap_or("").to_owned();
        let mut stamp = RecordStamp { id, time, used: 0 };
        match str_field(&record, "type").unwrap_or("") {
            kind @ ("user" | "assistant") => self.message(line_no, kind, &record, &mut stamp),
            "system" => {
                let subtype = str_field(&record, "subtype").unwrap_or("system").to_owned();
                let mut e = LogEntry::new(stamp.next_id(), LogRole::System, stamp.now());
                let text = match subtype.as_str() {
                    "compact_boundary" => {
                        let meta = record
                            .get("compactMetadata")
                            .cloned()
                            .unwrap_or(Value::Null);
                        format!("compact boundary {meta}")
                    }
                    _ => str_field(&record, "content").unwrap_or("").to_owned(),
                };
                e.content = Some(Content::Text(text));
                e.part_type = Some(subtype);
                e.include_in_context = false;
                self.entries.push(e);
            }
            other => {
                let other = if other.is_empty() { "untyped" } else { other };
                *self.skipped.entry(other.to_owned()).or_default() += 1;
            }
        }
    }

    /// A `user` or `assistant` record: a compaction summary, a later part of an assistant
    /// message already read, or new entries.
    fn message(&mut self, line_no: usize, kind: &str, record: &Value, stamp: &mut RecordStamp) {
        if record.get("toolUseResult").is_some() {
            self.tool_use_results += 1;
        }
        let Some(message) = record.get("message").cloned() else {
            return self.loss(
                line_no,
                format!("`{kind}` record without `message`; skipped"),
            );
        };
        let mut message = match serde_json::from_value::<AnthropicMessage>(message) {
            Ok(m) => m,
            Err(e) => return self.loss(line_no, format!("unreadable message ({e}); skipped")),
        };
        if record.get("isCompactSummary").and_then(Value::as_bool) == Some(true) {
            let mut e = LogEntry::new(stamp.next_id(), LogRole::System, stamp.now());
            e.content = Some(Content::Text(format!(
                "{SUMMARY_PREFIX}\n{}",
                message.content.to_text()
            )));
            e.part_type = Some("compact_summary".to_owned());
            self.entries.push(e);
            return;
        }
        let message_id = message
            .extra
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if kind == "assistant"
            && let Some(&at) = message_id
                .as_ref()
                .and_then(|mid| self.assistant_by_message.get(mid))
        {
            merge_assistant(&mut self.entries[at], &message);
            return;
        }
        // A recorded message carries the response's metadata (`id`, `model`, `usage`,
        // `stop_reason`, …), which a request must not send back: keep it apart.
        let response = std::mem::take(&mut message.extra);
        let converted = match message_to_log(&message, stamp) {
            Ok(c) => c,
            Err(e) => return self.loss(line_no, format!("{e}; skipped")),
        };
        let first = self.entries.len();
        for mut e in converted {
            if record.get("isMeta").and_then(Value::as_bool) == Some(true) {
                e.part_type = Some("meta".to_owned());
            }
            self.entries.push(e);
        }
        if let Some(e) = self.entries.get_mut(first).filter(|_| !response.is_empty()) {
            e.anthropic
                .insert(RESPONSE_KEY.to_owned(), Value::Object(response));
        }
        if let (Some(mid), "assistant") = (message_id, kind) {
            self.assistant_by_message.insert(mid, first);
        }
    }

    fn finish(mut self) -> Converted<Vec<LogEntry>> {
        for (kind, count) in self.skipped {
            self.losses.push(Loss {
                path: "session".to_owned(),
                what: format!("{count} `{kind}` record(s) are UI state, not conversation"),
            });
        }
        if self.tool_use_results > 0 {
            self.losses.push(Loss {
                path: "session".to_owned(),
                what: format!(
                    "{} `toolUseResult` UI payload(s) left out (the tool_result blocks are kept)",
                    self.tool_use_results
                ),
            });
        }
        Converted {
            value: self.entries,
            losses: self.losses,
        }
    }
}

/// Appends the blocks of a later record of the same assistant message to its entry, keeping
/// block order (a text after a tool call stays after it).
fn merge_assistant(entry: &mut LogEntry, message: &AnthropicMessage) {
    let mut blocks = match crate::convert::log_to_anthropic(std::slice::from_ref(entry))
        .value
        .messages
        .pop()
    {
        Some(m) => m.content.into_blocks(),
        None => Vec::new(),
    };
    blocks.extend(message.content.clone().into_blocks());
    let merged = AnthropicMessage {
        role: crate::message::Role::Assistant,
        content: Content::Blocks(blocks),
        extra: JsonMap::new(),
    };
    let mut stamp = crate::convert::SequentialStamp::default();
    if let Some(rebuilt) = message_to_log(&merged, &mut stamp)
        .ok()
        .and_then(|c| c.into_iter().next())
    {
        entry.content = rebuilt.content;
        entry.tool_calls = rebuilt.tool_calls;
    }
}
