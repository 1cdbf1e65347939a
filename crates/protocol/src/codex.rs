//! Codex rollouts (JSONL of `{timestamp, type, payload}` records, as the Codex CLI writes
//! them) → log entries. A pure conversion: reading the file is the caller's business.

use serde_json::Value;

use crate::claude_code::SUMMARY_PREFIX;
use crate::content::{Content, ContentBlock};
use crate::convert::{Converted, Loss, reasoning_block};
use crate::log::{LogEntry, LogRole, LogToolCall};
use crate::responses::ResponseItem;

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Converts a Codex rollout (JSONL of `{timestamp, type, payload}` records) to log entries.
///
/// `session_meta` becomes a UI-only system entry holding the metadata; `response_item`
/// messages become entries of their role, `function_call` / `custom_tool_call` /
/// `local_shell_call` become tool calls of the assistant entry before them (or of a new one),
/// their outputs become `tool` entries; `compacted` becomes a summary system entry. A
/// `reasoning` item opens the assistant turn as a thinking block that keeps the whole item (its
/// encrypted content goes back to the Responses API, see [`crate::convert::log_to_responses`]).
/// `event_msg` and `turn_context` records are listed as losses.
pub fn rollout_to_log(text: &str) -> Converted<Vec<LogEntry>> {
    let mut rollout = Rollout::default();
    for (i, line) in text.lines().enumerate() {
        if !line.trim().is_empty() {
            rollout.record(i + 1, line);
        }
    }
    rollout.finish()
}

/// A rollout read so far: the entries, what could not be kept, and the records left out by
/// kind.
#[derive(Default)]
struct Rollout {
    entries: Vec<LogEntry>,
    losses: Vec<Loss>,
    skipped: std::collections::BTreeMap<String, usize>,
}

impl Rollout {
    fn loss(&mut self, line: usize, what: String) {
        self.losses.push(Loss {
            path: format!("line {line}"),
            what,
        });
    }

    /// Reads record `line` (line number `n`).
    fn record(&mut self, n: usize, line: &str) {
        let record: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => return self.loss(n, format!("not valid JSON ({e}); skipped")),
        };
        let at = Place {
            n,
            time: str_of(&record, "timestamp").unwrap_or(""),
        };
        let payload = record.get("payload").unwrap_or(&Value::Null);
        match str_of(&record, "type").unwrap_or("") {
            "session_meta" => {
                let mut e = at.entry(LogRole::System);
                e.content = Some(Content::Text(payload.to_string()));
                e.part_type = Some("session_meta".to_owned());
                e.include_in_context = false;
                self.entries.push(e);
            }
            "compacted" => {
                let summary = str_of(payload, "message").unwrap_or("");
                let mut e = at.entry(LogRole::System);
                e.content = Some(Content::Text(format!("{SUMMARY_PREFIX}\n{summary}")));
                e.part_type = Some("compact_summary".to_owned());
                self.entries.push(e);
            }
            "response_item" => self.response_item(&at, payload),
            other => {
                let other = if other.is_empty() { "untyped" } else { other };
                *self.skipped.entry(other.to_owned()).or_default() += 1;
            }
        }
    }

    /// A `response_item` record: a message, a tool call or its output, or reasoning.
    fn response_item(&mut self, at: &Place<'_>, payload: &Value) {
        let kind = str_of(payload, "type").unwrap_or("");
        match kind {
            "message" => self.message(at, payload),
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                let call = self.call(at.n, kind, payload);
                match self.entries.last_mut() {
                    Some(last) if last.role == LogRole::Assistant && last.llm_error.is_none() => {
                        last.tool_calls.get_or_insert_with(Vec::new).push(call);
                    }
                    _ => {
                        let mut e = at.entry(LogRole::Assistant);
                        e.tool_calls = Some(vec![call]);
                        self.entries.push(e);
                    }
                }
            }
            "function_call_output" | "custom_tool_call_output" => {
                self.entries.push(call_output(at, payload));
            }
            "reasoning" => match ResponseItem::from_value(payload.clone()) {
                // A Responses reasoning item: kept whole in a thinking block of the assistant
                // turn it opens, so it goes back to the Responses API.
                Ok(ResponseItem::Reasoning(r)) => {
                    let block = reasoning_block(&r);
                    match self.entries.last_mut() {
                        Some(last) if only_thinking(last) => push_block(last, block),
                        _ => {
                            let mut e = at.entry(LogRole::Assistant);
                            e.content = Some(Content::Blocks(vec![block]));
                            self.entries.push(e);
                        }
                    }
                }
                _ => self.loss(
                    at.n,
                    "a reasoning item that cannot be read; skipped".to_owned(),
                ),
            },
            other => {
                *self
                    .skipped
                    .entry(format!("response_item {other}"))
                    .or_default() += 1;
            }
        }
    }

    /// A message item: an entry of its role, or the answer of a turn that began with
    /// reasoning.
    fn message(&mut self, at: &Place<'_>, payload: &Value) {
        let role = match str_of(payload, "role") {
            Some("user") => LogRole::User,
            Some("assistant") => LogRole::Assistant,
            Some("developer") => LogRole::Developer,
            Some("system") => LogRole::System,
            other => return self.loss(at.n, format!("message with role {other:?}; skipped")),
        };
        let content = codex_content(payload, at.n, &mut |n, what| self.loss(n, what));
        match self.entries.last_mut() {
            Some(last) if role == LogRole::Assistant && only_thinking(last) => {
                for block in content.into_blocks() {
                    push_block(last, block);
                }
            }
            _ => {
                let mut e = at.entry(role);
                e.content = Some(content);
                self.entries.push(e);
            }
        }
    }

    /// The tool call of a `function_call`, `custom_tool_call` (its input wrapped, a loss) or
    /// `local_shell_call` (its action as the arguments).
    fn call(&mut self, n: usize, kind: &str, payload: &Value) -> LogToolCall {
        let call_id = str_of(payload, "call_id")
            .or_else(|| str_of(payload, "id"))
            .unwrap_or("")
            .to_owned();
        let (name, arguments) = match kind {
            "function_call" => (
                str_of(payload, "name").unwrap_or("").to_owned(),
                str_of(payload, "arguments").unwrap_or("{}").to_owned(),
            ),
            "custom_tool_call" => {
                self.loss(
                    n,
                    "custom tool call input wrapped as {\"input\": …}".to_owned(),
                );
                let input = payload.get("input").cloned().unwrap_or(Value::Null);
                (
                    str_of(payload, "name").unwrap_or("").to_owned(),
                    serde_json::json!({ "input": input }).to_string(),
                )
            }
            _ => (
                "local_shell".to_owned(),
                payload
                    .get("action")
                    .cloned()
                    .unwrap_or(Value::Null)
                    .to_string(),
            ),
        };
        let mut call = LogToolCall::new(call_id, name, &Value::Null);
        call.function.arguments = arguments;
        call
    }

    fn finish(mut self) -> Converted<Vec<LogEntry>> {
        for (kind, count) in self.skipped {
            self.losses.push(Loss {
                path: "rollout".to_owned(),
                what: format!("{count} `{kind}` record(s) are not conversation; left out"),
            });
        }
        Converted {
            value: self.entries,
            losses: self.losses,
        }
    }
}

/// Where an entry comes from: its record's line number (its id is `codex-<n>`) and time.
struct Place<'a> {
    n: usize,
    time: &'a str,
}

impl Place<'_> {
    fn entry(&self, role: LogRole) -> LogEntry {
        LogEntry::new(format!("codex-{}", self.n), role, self.time.to_owned())
    }
}

/// The tool entry of a call's output: its text (an object's `content`, else the object) and
/// whether it failed, when the output says.
fn call_output(at: &Place<'_>, payload: &Value) -> LogEntry {
    let mut e = at.entry(LogRole::Tool);
    e.tool_call_id = str_of(payload, "call_id").map(str::to_owned);
    let output = payload.get("output").cloned().unwrap_or(Value::Null);
    let (text, success) = match output {
        Value::String(s) => (s, None),
        Value::Object(o) => (
            o.get("content")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| Value::Object(o.clone()).to_string()),
            o.get("success").and_then(Value::as_bool),
        ),
        other => (other.to_string(), None),
    };
    e.content = Some(Content::Text(text));
    e.is_error = success.map(|ok| !ok);
    e
}

/// An assistant entry that holds nothing but thinking yet (a turn's reasoning, before its
/// answer or calls).
fn only_thinking(e: &LogEntry) -> bool {
    e.role == LogRole::Assistant
        && e.llm_error.is_none()
        && e.calls().is_empty()
        && matches!(&e.content, Some(Content::Blocks(b))
            if b.iter().all(|b| matches!(b, ContentBlock::Thinking(_))))
}

fn push_block(e: &mut LogEntry, block: ContentBlock) {
    let blocks = match e.content.take() {
        Some(content) => {
            let mut blocks = content.into_blocks();
            blocks.push(block);
            blocks
        }
        None => vec![block],
    };
    e.content = Some(Content::Blocks(blocks));
}

fn codex_content(payload: &Value, line: usize, loss: &mut impl FnMut(usize, String)) -> Content {
    let Some(items) = payload.get("content").and_then(Value::as_array) else {
        return Content::Text(str_of(payload, "content").unwrap_or("").to_owned());
    };
    let mut blocks = Vec::new();
    for item in items {
        match str_of(item, "type") {
            Some("input_text" | "output_text" | "text") => {
                blocks.push(ContentBlock::text(str_of(item, "text").unwrap_or("")));
            }
            Some("input_image") => {
                let url = str_of(item, "image_url").unwrap_or("");
                let block =
                    serde_json::json!({"type": "image", "source": {"type": "url", "url": url}});
                match serde_json::from_value::<ContentBlock>(block) {
                    Ok(b) => blocks.push(b),
                    Err(e) => loss(line, format!("image left out ({e})")),
                }
            }
            other => {
                loss(
                    line,
                    format!("content item {other:?} kept as an unknown block"),
                );
                if let Value::Object(map) = item {
                    blocks.push(ContentBlock::Unknown(map.clone()));
                }
            }
        }
    }
    match blocks.as_slice() {
        [ContentBlock::Text(t)] if t.extra.is_empty() && t.cache_control.is_none() => {
            Content::Text(t.text.clone())
        }
        _ => Content::Blocks(blocks),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLLOUT: &str = r#"{"timestamp":"2025-09-01T10:00:00.000Z","type":"session_meta","payload":{"id":"0198f0a4-1111-7000-8000-000000000001","timestamp":"2025-09-01T10:00:00.000Z","cwd":"/home/ana/sales","originator":"codex_cli_rs","cli_version":"0.36.0","instructions":null}}
{"timestamp":"2025-09-01T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Which region grew fastest?"}]}}
{"timestamp":"2025-09-01T10:00:01.500Z","type":"turn_context","payload":{"cwd":"/home/ana/sales","approval_policy":"on-request","model":"gpt-5"}}
{"timestamp":"2025-09-01T10:00:02.000Z","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"Look at the CSV."}],"content":null,"encrypted_content":"gAAAAB..."}}
{"timestamp":"2025-09-01T10:00:03.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"cat\",\"sales.csv\"]}","call_id":"call_A"}}
{"timestamp":"2025-09-01T10:00:03.100Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"wc\",\"-l\",\"sales.csv\"]}","call_id":"call_B"}}
{"timestamp":"2025-09-01T10:00:04.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_A","output":"{\"output\":\"region,q1,q2\\nnorth,10,14\\n\",\"metadata\":{\"exit_code\":0}}"}}
{"timestamp":"2025-09-01T10:00:04.100Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_B","output":{"content":"3 sales.csv","success":false}}}
{"timestamp":"2025-09-01T10:00:05.000Z","type":"event_msg","payload":{"type":"token_count","info":null}}
{"timestamp":"2025-09-01T10:00:06.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"North grew 40%."}]}}
{"timestamp":"2025-09-01T10:00:07.000Z","type":"compacted","payload":{"message":"User asked about regional growth; north grew 40%."}}
{"timestamp":"2025-09-01T10:00:08.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Chart it"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}}
not json at all
"#;

    #[test]
    fn codex_rollout_becomes_log_entries() {
        let got = rollout_to_log(ROLLOUT);
        let roles: Vec<_> = got.value.iter().map(|e| e.role.as_str()).collect();
        assert_eq!(
            roles,
            [
                "system",
                "user",
                "assistant",
                "tool",
                "tool",
                "assistant",
                "system",
                "user"
            ]
        );
        let call = &got.value[2];
        let ids: Vec<_> = call.calls().iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["call_A", "call_B"]);
        assert_eq!(
            call.calls()[0].function.arguments,
            r#"{"command":["cat","sales.csv"]}"#
        );
        assert_eq!(got.value[3].tool_call_id.as_deref(), Some("call_A"));
        assert_eq!(got.value[4].is_error, Some(true));
        assert_eq!(got.value[4].text(), "3 sales.csv");
        assert!(got.value[6].text().starts_with(SUMMARY_PREFIX));
        assert!(!got.value[0].include_in_context);
        assert!(matches!(&got.value[7].content, Some(Content::Blocks(b)) if b.len() == 2));
        assert_eq!(got.value[1].created_at, "2025-09-01T10:00:01.000Z");
        let losses: Vec<_> = got
            .losses
            .iter()
            .map(|l| format!("{}: {}", l.path, l.what))
            .collect();
        // The reasoning opens the call turn, encrypted content and all, and goes back to the
        // Responses API before the calls.
        let Some(Content::Blocks(blocks)) = &call.content else {
            panic!("{call:?}")
        };
        let ContentBlock::Thinking(t) = &blocks[0] else {
            panic!("{blocks:?}")
        };
        assert_eq!(t.thinking, "Look at the CSV.");
        let responses = crate::convert::log_to_responses(&got.value).value;
        let input = serde_json::to_value(&responses.input).unwrap_or_default();
        assert_eq!(input[2]["type"], "reasoning", "{input}");
        assert_eq!(input[2]["encrypted_content"], "gAAAAB...");
        assert_eq!(input[3]["call_id"], "call_A");
        assert!(
            !losses.iter().any(|l| l.contains("reasoning")),
            "{losses:?}"
        );
        assert!(
            losses
                .iter()
                .any(|l| l.starts_with("line 13: not valid JSON")),
            "{losses:?}"
        );
        assert!(
            losses.iter().any(|l| l.contains("1 `event_msg` record(s)")),
            "{losses:?}"
        );
        assert!(
            losses
                .iter()
                .any(|l| l.contains("1 `turn_context` record(s)")),
            "{losses:?}"
        );
        // Every call is answered: the export pairs them.
        let anthropic = crate::convert::log_to_anthropic(&got.value).value;
        let json = anthropic.conversation_json().to_string();
        assert!(json.contains(r#""tool_use_id":"call_B""#), "{json}");
    }
}
