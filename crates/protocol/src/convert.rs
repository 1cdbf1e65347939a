//! Conversions between Anthropic Messages, OpenAI Chat Completions, the OpenAI Responses API
//! and the log.
//!
//! The log is the hub: both providers convert to it without loss, and from it to each other.
//! Where the target cannot express something (thinking in OpenAI, `refusal` in Anthropic), the
//! conversion leaves it out and says so in [`Converted::losses`] instead of dropping it silently.
//! The tool-call ordering invariant is kept: assistant (calls) → every result → next assistant.

use serde_json::Value;

use crate::anthropic::{AnthropicMessage, AnthropicRequest};
use crate::content::{
    CacheControl, Content, ContentBlock, ImageBlock, ImageSource, JsonMap, TextBlock,
    ToolResultBlock, ToolResultContent, ToolUseBlock,
};
use crate::error::{ProtocolError, Result};
use crate::log::{FunctionCall, LogEntry, LogRole, LogToolCall};
use crate::message::Role;
use crate::openai::{ChatMessage, ChatRequest, ChatToolCall, OPENAI_PART_TYPES};

mod openai;
mod responses;

pub use self::openai::{log_to_openai, openai_to_log};
pub use self::responses::{
    RESPONSES_ITEM_KEY, RESPONSES_KEY, items_to_log, log_to_responses, reasoning_block,
    reasoning_of, response_to_log, responses_to_anthropic, responses_to_log, responses_to_openai,
};

/// Something a conversion could not carry over.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Loss {
    /// Where it was in the source (`messages[2].content[0]`, `log[5]`).
    pub path: String,
    /// What was left out, in words.
    pub what: String,
}

/// A converted value and what the conversion left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted<T> {
    /// The result.
    pub value: T,
    /// What the target could not express; empty for a lossless conversion.
    pub losses: Vec<Loss>,
}

/// Gives new log entries their ids and times.
pub trait Stamp {
    /// The id of the next entry.
    fn next_id(&mut self) -> String;
    /// The `created_at` of the next entry (RFC 3339).
    fn now(&mut self) -> String;
}

/// Ids `{prefix}{n}` counting from 1 and one fixed time: deterministic output for files and tests.
#[derive(Debug, Clone)]
pub struct SequentialStamp {
    prefix: String,
    next: u64,
    created_at: String,
}

impl SequentialStamp {
    /// Ids `{prefix}1`, `{prefix}2`, … all written at `created_at`.
    pub fn new(prefix: impl Into<String>, created_at: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            next: 1,
            created_at: created_at.into(),
        }
    }
}

impl Default for SequentialStamp {
    fn default() -> Self {
        Self::new("m", "1970-01-01T00:00:00Z")
    }
}

impl Stamp for SequentialStamp {
    fn next_id(&mut self) -> String {
        let id = format!("{}{}", self.prefix, self.next);
        self.next += 1;
        id
    }
    fn now(&mut self) -> String {
        self.created_at.clone()
    }
}

fn entry(stamp: &mut dyn Stamp, role: LogRole) -> LogEntry {
    let id = stamp.next_id();
    LogEntry::new(id, role, stamp.now())
}

/// The losses of a request's fields that are not conversation (`model`, `tools`, …).
fn not_conversation(extra: &JsonMap) -> Vec<Loss> {
    extra
        .keys()
        .map(|key| Loss {
            path: key.clone(),
            what: format!("request field `{key}` is not part of the conversation"),
        })
        .collect()
}

fn loss(losses: &mut Vec<Loss>, path: impl Into<String>, what: impl Into<String>) {
    losses.push(Loss {
        path: path.into(),
        what: what.into(),
    });
}

// ---------------------------------------------------------------------------------------------
// Anthropic → log

/// Converts an Anthropic conversation to log entries. Lossless for `system` and `messages`;
/// other request fields (`model`, `tools`, …) are not conversation and are listed as losses.
pub fn anthropic_to_log(
    req: &AnthropicRequest,
    stamp: &mut dyn Stamp,
) -> Result<Converted<Vec<LogEntry>>> {
    let losses = not_conversation(&req.extra);
    let mut out: Vec<LogEntry> = Vec::with_capacity(req.messages.len() + 1);
    if let Some(system) = &req.system {
        let mut e = entry(stamp, LogRole::System);
        e.content = Some(system.clone());
        out.push(e);
    }
    for (i, message) in req.messages.iter().enumerate() {
        push_message(message, &format!("messages[{i}].role"), stamp, &mut out)?;
    }
    Ok(Converted { value: out, losses })
}

/// Converts one Anthropic message to log entries: an assistant message becomes one entry with
/// its tool calls; a user message becomes one entry per run of ordinary blocks and one `tool`
/// entry per tool result, in order. Fields of the message this crate does not know are kept
/// in the first entry's `anthropic` map. This is the conversion a model's answer goes through
/// before it is appended to a conversation.
///
/// # Errors
/// [`ProtocolError`] when the message has the `system` role, which Anthropic messages do not
/// allow.
pub fn message_to_log(message: &AnthropicMessage, stamp: &mut dyn Stamp) -> Result<Vec<LogEntry>> {
    let mut out = Vec::with_capacity(1);
    push_message(message, "role", stamp, &mut out)?;
    Ok(out)
}

fn push_message(
    message: &AnthropicMessage,
    role_path: &str,
    stamp: &mut dyn Stamp,
    out: &mut Vec<LogEntry>,
) -> Result<()> {
    let first = out.len();
    match message.role {
        Role::System => {
            return Err(ProtocolError::invalid(
                role_path,
                "role `system` is not allowed in Anthropic messages; put it in `system`",
            ));
        }
        Role::Assistant => out.push(assistant_to_entry(&message.content, stamp)),
        Role::User => user_to_entries(&message.content, stamp, out),
    }
    for position in first..out.len() {
        let is_tool = out[position].role == LogRole::Tool;
        let prev_is_tool = position > 0 && out[position - 1].role == LogRole::Tool;
        let default_merges = is_tool && prev_is_tool;
        let should_merge = position > first;
        if should_merge != default_merges {
            out[position].merge_with_previous = Some(should_merge);
        }
    }
    if !message.extra.is_empty()
        && let Some(e) = out.get_mut(first)
    {
        e.anthropic
            .insert("message".to_owned(), Value::Object(message.extra.clone()));
    }
    Ok(())
}

fn assistant_to_entry(content: &Content, stamp: &mut dyn Stamp) -> LogEntry {
    let mut e = entry(stamp, LogRole::Assistant);
    let blocks = match content {
        Content::Text(_) => {
            e.content = Some(content.clone());
            return e;
        }
        Content::Blocks(blocks) => blocks,
    };
    let last_other = blocks
        .iter()
        .rposition(|b| !matches!(b, ContentBlock::ToolUse(_)));
    let mut others = Vec::new();
    let mut calls = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        match block {
            ContentBlock::ToolUse(u) => {
                let mut call = LogToolCall::new(u.id.clone(), u.name.clone(), &u.input);
                if last_other.is_some_and(|last| last > j) {
                    call.position = u32::try_from(j).ok();
                }
                call.anthropic = u.extra.clone();
                if let Some(cc) = &u.cache_control {
                    call.anthropic
                        .insert("cache_control".to_owned(), cache_value(cc));
                }
                calls.push(call);
            }
            other => others.push(other.clone()),
        }
    }
    if calls.is_empty() || !others.is_empty() {
        e.content = Some(Content::Blocks(others));
    }
    if !calls.is_empty() {
        e.tool_calls = Some(calls);
    }
    e
}

fn cache_value(cc: &CacheControl) -> Value {
    serde_json::to_value(cc).unwrap_or(Value::Null)
}

fn user_to_entries(content: &Content, stamp: &mut dyn Stamp, out: &mut Vec<LogEntry>) {
    let blocks = match content {
        Content::Text(_) => {
            let mut e = entry(stamp, LogRole::User);
            e.content = Some(content.clone());
            out.push(e);
            return;
        }
        Content::Blocks(blocks) => blocks,
    };
    if blocks.is_empty() {
        let mut e = entry(stamp, LogRole::User);
        e.content = Some(Content::Blocks(Vec::new()));
        out.push(e);
        return;
    }
    let mut run: Vec<ContentBlock> = Vec::new();
    let flush = |run: &mut Vec<ContentBlock>, stamp: &mut dyn Stamp, out: &mut Vec<LogEntry>| {
        if !run.is_empty() {
            let mut e = entry(stamp, LogRole::User);
            e.content = Some(Content::Blocks(std::mem::take(run)));
            out.push(e);
        }
    };
    for block in blocks {
        match block {
            ContentBlock::ToolResult(r) => {
                flush(&mut run, stamp, out);
                let mut e = entry(stamp, LogRole::Tool);
                e.tool_call_id = Some(r.tool_use_id.clone());
                e.content = r.content.clone().map(Content::from);
                e.is_error = r.is_error;
                e.anthropic = r.extra.clone();
                if let Some(cc) = &r.cache_control {
                    e.anthropic
                        .insert("cache_control".to_owned(), cache_value(cc));
                }
                out.push(e);
            }
            other => run.push(other.clone()),
        }
    }
    flush(&mut run, stamp, out);
}

// ---------------------------------------------------------------------------------------------
// log → Anthropic

/// Converts log entries to an Anthropic conversation.
///
/// Leading system and developer entries become `system`; a later one is moved there too (its
/// position is listed as a loss). OpenAI-only fields are listed as losses. A failure recorded in
/// `llm_error` becomes an `LLM_ERROR` text block after the partial output.
pub fn log_to_anthropic(entries: &[LogEntry]) -> Converted<AnthropicRequest> {
    let mut losses = Vec::new();
    let mut system: Vec<ContentBlock> = Vec::new();
    let mut system_text: Option<String> = None;
    let mut system_entries = 0usize;
    let mut messages: Vec<AnthropicMessage> = Vec::new();
    let mut prev_role: Option<LogRole> = None;
    for (i, e) in entries.iter().enumerate() {
        let path = format!("log[{i}]");
        if let Some(kind) = responses::foreign_item(e) {
            loss(
                &mut losses,
                &path,
                format!("Responses `{kind}` item has no Anthropic equivalent"),
            );
            continue;
        }
        report_openai_only(e, &path, &mut losses);
        match e.role {
            LogRole::System | LogRole::Developer => {
                if !messages.is_empty() {
                    loss(
                        &mut losses,
                        &path,
                        "a system entry after the first message was moved into `system`",
                    );
                }
                if e.role == LogRole::Developer {
                    loss(
                        &mut losses,
                        &path,
                        "role `developer` became part of `system`",
                    );
                }
                system_entries += 1;
                match (&e.content, system_entries) {
                    (Some(Content::Text(text)), 1) => system_text = Some(text.clone()),
                    (Some(content), _) => {
                        if let Some(text) = system_text.take() {
                            system.push(ContentBlock::text(text));
                        }
                        system.extend(content.clone().into_blocks());
                    }
                    (None, _) => {}
                }
            }
            LogRole::User => {
                let content = to_anthropic_content(e.content.clone(), &path, &mut losses);
                let merge = e.merge_with_previous == Some(true);
                push_anthropic(&mut messages, Role::User, content, merge, e, &mut losses);
            }
            LogRole::Tool => {
                let mut extra = e.anthropic.clone();
                let cache_control = extra
                    .remove("cache_control")
                    .and_then(|v| serde_json::from_value::<CacheControl>(v).ok());
                extra.remove("message");
                extra.remove(crate::claude_code::RESPONSE_KEY);
                let content = e
                    .content
                    .clone()
                    .map(|c| to_anthropic_content(Some(c), &path, &mut losses))
                    .map(ToolResultContent::from);
                let block = ContentBlock::ToolResult(ToolResultBlock {
                    tool_use_id: e.tool_call_id.clone().unwrap_or_default(),
                    content,
                    is_error: e.is_error,
                    cache_control,
                    extra,
                });
                if e.tool_call_id.is_none() {
                    loss(&mut losses, &path, "tool entry without `tool_call_id`");
                }
                let merge = match e.merge_with_previous {
                    Some(m) => m,
                    None => prev_role == Some(LogRole::Tool),
                };
                push_anthropic(
                    &mut messages,
                    Role::User,
                    Content::Blocks(vec![block]),
                    merge,
                    e,
                    &mut losses,
                );
            }
            LogRole::Assistant => {
                let content = assistant_from_entry(e, &path, &mut losses);
                let merge = e.merge_with_previous == Some(true);
                push_anthropic(
                    &mut messages,
                    Role::Assistant,
                    content,
                    merge,
                    e,
                    &mut losses,
                );
            }
        }
        prev_role = Some(e.role);
    }
    let system = match (system_text, system.is_empty()) {
        (Some(text), true) => Some(Content::Text(text)),
        (Some(text), false) => {
            system.insert(0, ContentBlock::text(text));
            Some(Content::Blocks(system))
        }
        (None, false) => Some(Content::Blocks(system)),
        (None, true) if system_entries > 0 => Some(Content::Blocks(Vec::new())),
        (None, true) => None,
    };
    Converted {
        value: AnthropicRequest {
            system,
            messages,
            extra: JsonMap::new(),
        },
        losses,
    }
}

fn report_openai_only(e: &LogEntry, path: &str, losses: &mut Vec<Loss>) {
    for key in e.openai.keys() {
        let what = if key == RESPONSES_KEY {
            "Responses item fields (`id`, `status`, …) have no Anthropic equivalent".to_owned()
        } else {
            format!("OpenAI field `{key}` has no Anthropic equivalent")
        };
        loss(losses, path, what);
    }
    if e.name.is_some() {
        loss(
            losses,
            path,
            "participant `name` has no Anthropic equivalent",
        );
    }
    for call in e.calls() {
        for key in call.extra.keys() {
            loss(
                losses,
                path,
                format!("OpenAI tool-call field `{key}` has no Anthropic equivalent"),
            );
        }
    }
}

fn push_anthropic(
    messages: &mut Vec<AnthropicMessage>,
    role: Role,
    content: Content,
    merge: bool,
    e: &LogEntry,
    losses: &mut Vec<Loss>,
) {
    let message_extra = match e.anthropic.get("message") {
        Some(Value::Object(map)) if e.role != LogRole::Tool || !merge => map.clone(),
        _ => JsonMap::new(),
    };
    if merge {
        if let Some(last) = messages.last_mut().filter(|m| m.role == role) {
            let mut blocks =
                std::mem::replace(&mut last.content, Content::Blocks(Vec::new())).into_blocks();
            blocks.extend(content.into_blocks());
            last.content = Content::Blocks(blocks);
            return;
        }
        loss(
            losses,
            format!("log entry {}", e.id),
            "could not merge with the previous message; kept apart",
        );
    }
    let mut message = AnthropicMessage::new(role, content);
    message.extra = message_extra;
    messages.push(message);
}

/// Converts content for Anthropic: OpenAI `image_url` parts become image blocks; other
/// OpenAI-only parts are dropped and listed.
fn to_anthropic_content(content: Option<Content>, path: &str, losses: &mut Vec<Loss>) -> Content {
    match content {
        None => Content::Blocks(Vec::new()),
        Some(Content::Text(text)) => Content::Text(text),
        Some(Content::Blocks(blocks)) => {
            let mut out = Vec::with_capacity(blocks.len());
            for (j, block) in blocks.into_iter().enumerate() {
                match block {
                    ContentBlock::Thinking(t) if t.extra.contains_key(RESPONSES_KEY) => loss(
                        losses,
                        format!("{path}.content[{j}]"),
                        "an OpenAI reasoning item (its encrypted content only OpenAI reads) has no Anthropic equivalent",
                    ),
                    ContentBlock::Unknown(map) => match map.get("type").and_then(Value::as_str) {
                        Some("input_text" | "output_text") => {
                            let here = format!("{path}.content[{j}]");
                            if let Some(text) = responses::responses_part_text(&map, &here, losses)
                            {
                                out.push(ContentBlock::text(text));
                            }
                        }
                        Some("input_image") => match map.get("image_url").and_then(Value::as_str) {
                            Some(url) => out.push(image_from_url(url)),
                            None => loss(
                                losses,
                                format!("{path}.content[{j}]"),
                                "an `input_image` part without an `image_url` has no Anthropic equivalent",
                            ),
                        },
                        Some(t)
                            if crate::responses::RESPONSES_PART_TYPES.contains(&t)
                                && !OPENAI_PART_TYPES.contains(&t) =>
                        {
                            loss(
                                losses,
                                format!("{path}.content[{j}]"),
                                format!("Responses `{t}` part has no Anthropic equivalent"),
                            );
                        }
                        Some("image_url") => match image_from_openai(&map) {
                            Some(image) => out.push(image),
                            None => loss(
                                losses,
                                format!("{path}.content[{j}]"),
                                "unreadable `image_url` part",
                            ),
                        },
                        Some(t) if OPENAI_PART_TYPES.contains(&t) => {
                            loss(
                                losses,
                                format!("{path}.content[{j}]"),
                                format!("OpenAI `{t}` part has no Anthropic equivalent"),
                            );
                        }
                        _ => out.push(ContentBlock::Unknown(map)),
                    },
                    other => out.push(other),
                }
            }
            Content::Blocks(out)
        }
    }
}

fn image_from_openai(map: &JsonMap) -> Option<ContentBlock> {
    let url = map.get("image_url")?.get("url")?.as_str()?;
    Some(image_from_url(url))
}

/// An image block from a URL, a `data:` URL becoming inline base64.
fn image_from_url(url: &str) -> ContentBlock {
    let source = match url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
    {
        Some((media_type, data)) => ImageSource::Base64 {
            media_type: media_type.to_owned(),
            data: data.to_owned(),
        },
        None => ImageSource::Url {
            url: url.to_owned(),
        },
    };
    ContentBlock::Image(ImageBlock {
        source,
        cache_control: None,
        extra: JsonMap::new(),
    })
}

fn assistant_from_entry(e: &LogEntry, path: &str, losses: &mut Vec<Loss>) -> Content {
    let calls = e.calls();
    let mut content = match &e.content {
        Some(Content::Text(text)) if calls.is_empty() && e.llm_error.is_none() => {
            return Content::Text(text.clone());
        }
        Some(Content::Text(text)) if text.is_empty() => Vec::new(),
        Some(c) => match to_anthropic_content(Some(c.clone()), path, losses) {
            Content::Text(text) => vec![ContentBlock::text(text)],
            Content::Blocks(blocks) => blocks,
        },
        None => Vec::new(),
    };
    if let Some(err) = &e.llm_error {
        if let Some(partial) = err.partial_output.as_deref().filter(|p| !p.is_empty()) {
            content.push(ContentBlock::text(partial));
        }
        content.push(ContentBlock::text(err.render()));
    }
    let mut positioned: Vec<(u32, ContentBlock)> = Vec::new();
    let mut trailing = Vec::new();
    for (k, call) in calls.iter().enumerate() {
        let input = match call.arguments_json() {
            Ok(v) => v,
            Err(err) => {
                loss(
                    losses,
                    format!("{path}.tool_calls[{k}]"),
                    format!("arguments are not valid JSON ({err}); kept as `_raw_arguments`"),
                );
                serde_json::json!({ "_raw_arguments": call.function.arguments })
            }
        };
        let mut extra = call.anthropic.clone();
        let cache_control = extra
            .remove("cache_control")
            .and_then(|v| serde_json::from_value(v).ok());
        let block = ContentBlock::ToolUse(ToolUseBlock {
            id: call.id.clone(),
            name: call.function.name.clone(),
            input,
            cache_control,
            extra,
        });
        match call.position {
            Some(p) => positioned.push((p, block)),
            None => trailing.push(block),
        }
    }
    positioned.sort_by_key(|(p, _)| *p);
    for (p, block) in positioned {
        let at = usize::try_from(p).unwrap_or(usize::MAX).min(content.len());
        content.insert(at, block);
    }
    content.extend(trailing);
    Content::Blocks(content)
}

// ---------------------------------------------------------------------------------------------
// Direct conversions

/// Anthropic → OpenAI, through the log.
pub fn anthropic_to_openai(req: &AnthropicRequest) -> Result<Converted<ChatRequest>> {
    let log = anthropic_to_log(req, &mut SequentialStamp::default())?;
    let mut out = log_to_openai(&log.value);
    let mut losses = log.losses;
    losses.append(&mut out.losses);
    out.losses = losses;
    Ok(out)
}

/// OpenAI → Anthropic, through the log.
pub fn openai_to_anthropic(req: &ChatRequest) -> Converted<AnthropicRequest> {
    let log = openai_to_log(req, &mut SequentialStamp::default());
    let mut out = log_to_anthropic(&log.value);
    let mut losses = log.losses;
    losses.append(&mut out.losses);
    out.losses = losses;
    out
}

/// A `FunctionCall` from a name and JSON arguments.
pub fn function_call(name: impl Into<String>, arguments: &Value) -> FunctionCall {
    FunctionCall {
        name: name.into(),
        arguments: arguments.to_string(),
    }
}
