//! The Responses side of the log hub: Responses items to log entries and back.
//!
//! How items live in the log:
//! - a `message` of the user, system or developer is one entry of that role; its content is the
//!   string, or blocks: an `input_text` part with nothing but its text is a text block, any
//!   other part is kept whole as an unknown block;
//! - the assistant's items that follow one another (`reasoning`, `message`, `function_call`)
//!   are one assistant entry: a `reasoning` item is a thinking block (its summary as the text)
//!   that carries the whole item under [`RESPONSES_KEY`] — the encrypted content goes back to
//!   the Responses API unchanged, and is dropped with a named loss toward the other APIs; an
//!   `output_text` part with empty `annotations` is a text block; a `function_call` is a tool
//!   call (`call_id` as its id; `id`, `status` under [`RESPONSES_KEY`] in the call's `extra`).
//!   A second `message` in the run starts an entry that merges with the previous one;
//! - a `function_call_output` is a `tool` entry;
//! - the item fields this crate does not model (`id`, `status`, …) are kept in the entry's
//!   `openai` map under [`RESPONSES_KEY`];
//! - an item of another kind is an assistant entry with no content that keeps it whole under
//!   [`RESPONSES_ITEM_KEY`], sent back to the Responses API as written and left out (with a
//!   loss) toward the others.
//!
//! So Responses → log → Responses gives the same JSON back.

use super::*;
use crate::content::ThinkingBlock;
use crate::responses::{
    FunctionCallItem, FunctionCallOutputItem, FunctionOutput, MessageContent, MessageItem,
    RESPONSES_PART_TYPES, ReasoningItem, ResponseItem, ResponsesInput, ResponsesRequest,
    ResponsesResponse,
};

/// Where the log keeps what only the Responses API can express: the fields of an item in an
/// entry's `openai` map and a call's `extra`, the reasoning item in a thinking block's `extra`.
pub const RESPONSES_KEY: &str = "responses";
/// Where the log keeps an item of a kind it does not model, in an entry's `openai` map.
pub const RESPONSES_ITEM_KEY: &str = "responses_item";
/// Marks (in the [`RESPONSES_KEY`] map) the system entry that was the request's
/// `instructions`.
const INSTRUCTIONS_MARK: &str = "_instructions";
/// Marks a message written without `"type": "message"`.
const UNTYPED_MARK: &str = "_untyped";
/// Marks an assistant message whose content was a string, not parts.
const STRING_MARK: &str = "_string";
/// Marks an assistant message read as parts without the `id` an output message has: it goes
/// back as it came (a text-only turn written here without an id goes as a string).
const PARTS_MARK: &str = "_parts";

/// Converts a Responses request's conversation (`instructions` and `input`) to log entries.
/// Lossless for those two; other request fields are listed as losses.
///
/// # Errors
/// [`ProtocolError`] when an item cannot be a log entry (a message with a tool role).
pub fn responses_to_log(
    req: &ResponsesRequest,
    stamp: &mut dyn Stamp,
) -> Result<Converted<Vec<LogEntry>>> {
    let losses = not_conversation(&req.extra);
    let mut out = Vec::new();
    if let Some(instructions) = &req.instructions {
        let mut e = entry(stamp, LogRole::System);
        e.content = Some(Content::Text(instructions.clone()));
        let mut mark = JsonMap::new();
        mark.insert(INSTRUCTIONS_MARK.to_owned(), Value::Bool(true));
        e.openai
            .insert(RESPONSES_KEY.to_owned(), Value::Object(mark));
        out.push(e);
    }
    out.extend(items_to_log(&req.items(), stamp)?);
    Ok(Converted { value: out, losses })
}

/// Converts a response's output items to log entries (one assistant entry for the usual
/// reasoning, message and calls). The response's own fields (`id`, `usage`, `status`, …) are
/// not conversation and are listed as losses.
pub fn response_to_log(
    resp: &ResponsesResponse,
    stamp: &mut dyn Stamp,
) -> Result<Converted<Vec<LogEntry>>> {
    let mut losses = Vec::new();
    let mut fields: Vec<&str> = vec!["id"];
    fields.extend(resp.model.as_ref().map(|_| "model"));
    fields.extend(resp.status.as_ref().map(|_| "status"));
    fields.extend(resp.usage.as_ref().map(|_| "usage"));
    fields.extend(resp.extra.keys().map(String::as_str));
    for key in fields {
        loss(
            &mut losses,
            key,
            format!("response field `{key}` is not part of the conversation"),
        );
    }
    if let Some(reason) = resp.incomplete_reason() {
        loss(
            &mut losses,
            "incomplete_details",
            format!("the answer is incomplete (`{reason}`); the log cannot say so"),
        );
    }
    Ok(Converted {
        value: items_to_log(&resp.output, stamp)?,
        losses,
    })
}

/// A block or a call of an assistant entry being built, in the order the items came.
enum Slot {
    Block(ContentBlock),
    Call(LogToolCall),
}

struct Assistant {
    entry: LogEntry,
    slots: Vec<Slot>,
    has_message: bool,
}

impl Assistant {
    fn new(stamp: &mut dyn Stamp) -> Self {
        Self {
            entry: entry(stamp, LogRole::Assistant),
            slots: Vec::new(),
            has_message: false,
        }
    }

    fn finish(self) -> LogEntry {
        let Self {
            mut entry, slots, ..
        } = self;
        let last_block = slots.iter().rposition(|s| matches!(s, Slot::Block(_)));
        let mut blocks = Vec::new();
        let mut calls = Vec::new();
        for (j, slot) in slots.into_iter().enumerate() {
            match slot {
                Slot::Block(b) => blocks.push(b),
                Slot::Call(mut c) => {
                    if last_block.is_some_and(|last| last > j) {
                        c.position = u32::try_from(j).ok();
                    }
                    calls.push(c);
                }
            }
        }
        let marks = match entry.openai.get_mut(RESPONSES_KEY) {
            Some(Value::Object(map)) => Some(map),
            _ => None,
        };
        let lone_string = calls.is_empty()
            && matches!(blocks.as_slice(), [ContentBlock::Text(t)] if t.cache_control.is_none() && t.extra.is_empty())
            && marks.is_some_and(|m| m.contains_key(STRING_MARK));
        if lone_string {
            // One message whose content was a string: the log's plain text, which goes back as
            // a string without a mark.
            if let Some(Value::Object(map)) = entry.openai.get_mut(RESPONSES_KEY) {
                map.remove(STRING_MARK);
                if map.is_empty() {
                    entry.openai.remove(RESPONSES_KEY);
                }
            }
            if let Some(ContentBlock::Text(t)) = blocks.pop() {
                entry.content = Some(Content::Text(t.text));
            }
        } else if !blocks.is_empty() || calls.is_empty() {
            entry.content = Some(Content::Blocks(blocks));
        }
        if !calls.is_empty() {
            entry.tool_calls = Some(calls);
        }
        entry
    }
}

/// Converts Responses items to log entries, in order.
///
/// # Errors
/// [`ProtocolError`] when an item cannot be a log entry (a message with a tool role).
pub fn items_to_log(items: &[ResponseItem], stamp: &mut dyn Stamp) -> Result<Vec<LogEntry>> {
    let mut out = Vec::with_capacity(items.len());
    let mut open: Option<Assistant> = None;
    let close = |open: &mut Option<Assistant>, out: &mut Vec<LogEntry>| {
        if let Some(a) = open.take() {
            out.push(a.finish());
        }
    };
    for (i, item) in items.iter().enumerate() {
        let assistant_side = matches!(
            item,
            ResponseItem::Reasoning(_) | ResponseItem::FunctionCall(_)
        ) || matches!(item, ResponseItem::Message(m) if m.role == LogRole::Assistant);
        if !assistant_side {
            close(&mut open, &mut out);
        }
        match item {
            ResponseItem::Message(m) if m.role == LogRole::Assistant => {
                let merge = open.as_ref().is_some_and(|a| a.has_message);
                if merge {
                    close(&mut open, &mut out);
                }
                let a = open.get_or_insert_with(|| Assistant::new(stamp));
                if merge {
                    a.entry.merge_with_previous = Some(true);
                }
                a.has_message = true;
                let mut fields = item_fields(m).unwrap_or_default();
                match &m.content {
                    MessageContent::Text(_) => {
                        fields.insert(STRING_MARK.to_owned(), Value::Bool(true));
                    }
                    MessageContent::Parts(_) if !m.extra.contains_key("id") => {
                        fields.insert(PARTS_MARK.to_owned(), Value::Bool(true));
                    }
                    MessageContent::Parts(_) => {}
                }
                if !fields.is_empty() {
                    a.entry
                        .openai
                        .insert(RESPONSES_KEY.to_owned(), Value::Object(fields));
                }
                match &m.content {
                    MessageContent::Text(text) => {
                        a.slots.push(Slot::Block(ContentBlock::text(text.clone())));
                    }
                    MessageContent::Parts(parts) => a.slots.extend(
                        parts
                            .iter()
                            .map(|p| Slot::Block(part_to_block(p, "output_text"))),
                    ),
                }
            }
            ResponseItem::Message(m) => {
                if m.role == LogRole::Tool {
                    return Err(ProtocolError::invalid(
                        format!("input[{i}].role"),
                        "a message cannot have the role `tool`; use a function_call_output item",
                    ));
                }
                let mut e = entry(stamp, m.role);
                e.content = Some(match &m.content {
                    MessageContent::Text(text) => Content::Text(text.clone()),
                    MessageContent::Parts(parts) => Content::Blocks(
                        parts
                            .iter()
                            .map(|p| part_to_block(p, "input_text"))
                            .collect(),
                    ),
                });
                if let Some(fields) = item_fields(m) {
                    e.openai
                        .insert(RESPONSES_KEY.to_owned(), Value::Object(fields));
                }
                out.push(e);
            }
            ResponseItem::Reasoning(r) => {
                let a = open.get_or_insert_with(|| Assistant::new(stamp));
                a.slots.push(Slot::Block(reasoning_block(r)));
            }
            ResponseItem::FunctionCall(c) => {
                let a = open.get_or_insert_with(|| Assistant::new(stamp));
                let mut call = LogToolCall {
                    id: c.call_id.clone(),
                    function: FunctionCall {
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    },
                    position: None,
                    anthropic: JsonMap::new(),
                    extra: JsonMap::new(),
                };
                if !c.extra.is_empty() {
                    call.extra
                        .insert(RESPONSES_KEY.to_owned(), Value::Object(c.extra.clone()));
                }
                a.slots.push(Slot::Call(call));
            }
            ResponseItem::FunctionCallOutput(o) => {
                let mut e = entry(stamp, LogRole::Tool);
                e.tool_call_id = Some(o.call_id.clone());
                e.content = Some(match &o.output {
                    FunctionOutput::Text(text) => Content::Text(text.clone()),
                    FunctionOutput::Parts(parts) => Content::Blocks(
                        parts
                            .iter()
                            .map(|p| part_to_block(p, "input_text"))
                            .collect(),
                    ),
                });
                if !o.extra.is_empty() {
                    e.openai
                        .insert(RESPONSES_KEY.to_owned(), Value::Object(o.extra.clone()));
                }
                out.push(e);
            }
            ResponseItem::Other(raw) => {
                let mut e = entry(stamp, LogRole::Assistant);
                e.openai
                    .insert(RESPONSES_ITEM_KEY.to_owned(), Value::Object(raw.clone()));
                out.push(e);
            }
        }
    }
    close(&mut open, &mut out);
    Ok(out)
}

/// The thinking block that keeps a reasoning item: the summary as its text, the whole item
/// under [`RESPONSES_KEY`].
pub fn reasoning_block(item: &ReasoningItem) -> ContentBlock {
    let mut extra = JsonMap::new();
    let raw = serde_json::to_value(ResponseItem::Reasoning(item.clone())).unwrap_or(Value::Null);
    extra.insert(RESPONSES_KEY.to_owned(), raw);
    ContentBlock::Thinking(ThinkingBlock {
        thinking: item.summary_text(),
        signature: None,
        extra,
    })
}

/// The reasoning item a thinking block keeps, if it came from the Responses API.
pub fn reasoning_of(block: &ThinkingBlock) -> Option<ReasoningItem> {
    match ResponseItem::from_value(block.extra.get(RESPONSES_KEY)?.clone()).ok()? {
        ResponseItem::Reasoning(r) => Some(r),
        _ => None,
    }
}

/// A part as a log block: a text block when it is nothing but text of the expected type (an
/// `output_text` with empty `annotations`), the part whole otherwise.
fn part_to_block(part: &JsonMap, text_type: &str) -> ContentBlock {
    let plain = part.get("type").and_then(Value::as_str) == Some(text_type)
        && part.iter().all(|(k, v)| match k.as_str() {
            "type" => true,
            "text" => v.is_string(),
            "annotations" => text_type == "output_text" && v.as_array().is_some_and(Vec::is_empty),
            _ => false,
        })
        && (text_type != "output_text" || part.contains_key("annotations"));
    match (plain, part.get("text").and_then(Value::as_str)) {
        (true, Some(text)) => ContentBlock::text(text),
        _ => ContentBlock::Unknown(part.clone()),
    }
}

fn item_fields(m: &MessageItem) -> Option<JsonMap> {
    let mut fields = m.extra.clone();
    if !m.typed {
        fields.insert(UNTYPED_MARK.to_owned(), Value::Bool(true));
    }
    (!fields.is_empty()).then_some(fields)
}

// ---------------------------------------------------------------------------------------------
// log → Responses

/// Converts log entries to a Responses request's `instructions` and `input`. Anthropic thinking
/// (whose signature only Anthropic reads), `cache_control`, `is_error` and the Chat-only fields
/// are listed as losses; reasoning items read from the Responses API go back as they came.
pub fn log_to_responses(entries: &[LogEntry]) -> Converted<ResponsesRequest> {
    let mut losses = Vec::new();
    let mut instructions = None;
    let mut items = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let path = format!("log[{i}]");
        if let Some(Value::Object(raw)) = e.openai.get(RESPONSES_ITEM_KEY) {
            items.push(ResponseItem::Other(raw.clone()));
            continue;
        }
        for key in e.anthropic.keys() {
            loss(
                &mut losses,
                &path,
                format!("Anthropic field `{key}` has no Responses equivalent"),
            );
        }
        for key in e.openai.keys().filter(|k| *k != RESPONSES_KEY) {
            loss(
                &mut losses,
                &path,
                format!("Chat Completions field `{key}` has no Responses equivalent"),
            );
        }
        if e.name.is_some() {
            loss(
                &mut losses,
                &path,
                "participant `name` has no Responses equivalent",
            );
        }
        let mut fields = match e.openai.get(RESPONSES_KEY) {
            Some(Value::Object(map)) => map.clone(),
            _ => JsonMap::new(),
        };
        let untyped = fields.remove(UNTYPED_MARK).is_some();
        let is_instructions = fields.remove(INSTRUCTIONS_MARK).is_some();
        match e.role {
            LogRole::System | LogRole::Developer | LogRole::User => {
                if is_instructions && items.is_empty() && instructions.is_none() {
                    instructions = Some(e.text().into_owned());
                    continue;
                }
                let content = match &e.content {
                    Some(Content::Text(text)) => MessageContent::Text(text.clone()),
                    Some(Content::Blocks(blocks)) => {
                        MessageContent::Parts(input_parts(blocks, &path, &mut losses))
                    }
                    None => MessageContent::Text(String::new()),
                };
                items.push(ResponseItem::Message(MessageItem {
                    role: e.role,
                    content,
                    typed: !untyped,
                    extra: fields,
                }));
            }
            LogRole::Tool => {
                if e.is_error == Some(true) {
                    loss(
                        &mut losses,
                        &path,
                        "`is_error` has no Responses equivalent (the output text still says it failed)",
                    );
                }
                let output = match &e.content {
                    Some(Content::Text(text)) => FunctionOutput::Text(text.clone()),
                    Some(Content::Blocks(blocks)) => {
                        FunctionOutput::Parts(input_parts(blocks, &path, &mut losses))
                    }
                    None => FunctionOutput::Text(String::new()),
                };
                let call_id = e.tool_call_id.clone().unwrap_or_else(|| {
                    loss(&mut losses, &path, "tool entry without `tool_call_id`");
                    String::new()
                });
                items.push(ResponseItem::FunctionCallOutput(FunctionCallOutputItem {
                    call_id,
                    output,
                    extra: fields,
                }));
            }
            LogRole::Assistant => {
                assistant_items(e, fields, untyped, &path, &mut items, &mut losses);
            }
        }
    }
    Converted {
        value: ResponsesRequest {
            instructions,
            input: ResponsesInput::Items(items),
            extra: JsonMap::new(),
        },
        losses,
    }
}

fn assistant_items(
    e: &LogEntry,
    fields: JsonMap,
    untyped: bool,
    path: &str,
    items: &mut Vec<ResponseItem>,
    losses: &mut Vec<Loss>,
) {
    // Blocks in the order they came, with the calls at their places (as for Anthropic).
    let mut slots: Vec<Slot> = match &e.content {
        Some(Content::Text(text)) if !text.is_empty() || e.calls().is_empty() => {
            vec![Slot::Block(ContentBlock::text(text.clone()))]
        }
        Some(Content::Blocks(blocks)) => blocks.iter().cloned().map(Slot::Block).collect(),
        _ => Vec::new(),
    };
    if let Some(err) = &e.llm_error {
        if let Some(partial) = err.partial_output.as_deref().filter(|p| !p.is_empty()) {
            slots.push(Slot::Block(ContentBlock::text(partial)));
        }
        slots.push(Slot::Block(ContentBlock::text(err.render())));
    }
    let mut trailing = Vec::new();
    let mut positioned = Vec::new();
    for call in e.calls() {
        match call.position {
            Some(p) => positioned.push((p, Slot::Call(call.clone()))),
            None => trailing.push(Slot::Call(call.clone())),
        }
    }
    positioned.sort_by_key(|(p, _)| *p);
    for (p, slot) in positioned {
        let at = usize::try_from(p).unwrap_or(usize::MAX).min(slots.len());
        slots.insert(at, slot);
    }
    slots.extend(trailing);

    let mut fields = fields;
    let as_string =
        fields.remove(STRING_MARK).is_some() || matches!(e.content, Some(Content::Text(_)));
    let mut message: Option<MessageItem> = None;
    let mut fields = Some(fields);
    let mut first = true;
    let mut flush = |message: &mut Option<MessageItem>, items: &mut Vec<ResponseItem>| {
        if let Some(mut m) = message.take() {
            let as_read = m.extra.remove(PARTS_MARK).is_some();
            if std::mem::take(&mut first) && as_string {
                m.content = as_plain_string(m.content);
            }
            // An output message needs the `id` and `status` only the API gives it; a turn
            // without them is sent as an input message, which every server takes.
            if !as_read && !m.extra.contains_key("id") {
                m.content = as_input_text(m.content);
            }
            items.push(ResponseItem::Message(m));
        }
    };
    for (j, slot) in slots.into_iter().enumerate() {
        let here = format!("{path}.content[{j}]");
        match slot {
            Slot::Call(call) => {
                flush(&mut message, items);
                for key in call.anthropic.keys() {
                    loss(
                        losses,
                        &here,
                        format!("Anthropic tool-use field `{key}` has no Responses equivalent"),
                    );
                }
                let mut extra = JsonMap::new();
                for (key, value) in &call.extra {
                    match (key.as_str(), value) {
                        (RESPONSES_KEY, Value::Object(map)) => extra.extend(map.clone()),
                        _ => loss(
                            losses,
                            &here,
                            format!(
                                "Chat Completions tool-call field `{key}` has no Responses equivalent"
                            ),
                        ),
                    }
                }
                items.push(ResponseItem::FunctionCall(FunctionCallItem {
                    call_id: call.id,
                    name: call.function.name,
                    arguments: call.function.arguments,
                    extra,
                }));
            }
            Slot::Block(ContentBlock::Thinking(t)) => match reasoning_of(&t) {
                Some(r) => {
                    flush(&mut message, items);
                    items.push(ResponseItem::Reasoning(r));
                }
                None => loss(
                    losses,
                    here,
                    "thinking that did not come from the Responses API (no reasoning item) cannot be sent to it",
                ),
            },
            Slot::Block(block) => {
                let Some(part) = block_to_part(&block, "output_text", &here, losses) else {
                    continue;
                };
                let m = message.get_or_insert_with(|| MessageItem {
                    role: LogRole::Assistant,
                    content: MessageContent::Parts(Vec::new()),
                    typed: !untyped,
                    extra: fields.take().unwrap_or_default(),
                });
                if let MessageContent::Parts(parts) = &mut m.content {
                    parts.push(part);
                }
            }
        }
    }
    flush(&mut message, items);
}

/// Blocks of a user message or a tool output as `input_text` (and other input) parts.
fn input_parts(blocks: &[ContentBlock], path: &str, losses: &mut Vec<Loss>) -> Vec<JsonMap> {
    blocks
        .iter()
        .enumerate()
        .filter_map(|(j, b)| {
            block_to_part(b, "input_text", &format!("{path}.content[{j}]"), losses)
        })
        .collect()
}

/// Plain `output_text` parts (nothing but their text) as one string, paragraphs apart;
/// anything else as it is.
fn as_input_text(content: MessageContent) -> MessageContent {
    let MessageContent::Parts(parts) = &content else {
        return content;
    };
    let texts: Option<Vec<&str>> = parts
        .iter()
        .map(|p| {
            let plain = p.get("type").and_then(Value::as_str) == Some("output_text")
                && p.get("annotations")
                    .is_none_or(|a| a.as_array().is_some_and(Vec::is_empty))
                && p.keys()
                    .all(|k| matches!(k.as_str(), "type" | "text" | "annotations"));
            plain
                .then(|| p.get("text").and_then(Value::as_str))
                .flatten()
        })
        .collect();
    match texts {
        Some(texts) if !texts.is_empty() => MessageContent::Text(texts.join("\n\n")),
        _ => content,
    }
}

/// One plain `output_text` part back to the string it was read from.
fn as_plain_string(content: MessageContent) -> MessageContent {
    match &content {
        MessageContent::Parts(parts) if parts.len() == 1 => {
            match (parts[0].get("text").and_then(Value::as_str), parts[0].len()) {
                (Some(text), 3) => MessageContent::Text(text.to_owned()),
                _ => content,
            }
        }
        _ => content,
    }
}

/// A log block as a Responses content part (`text_type` is `input_text` for the user and
/// tool outputs, `output_text` for the assistant); `None` (with a loss) when it has none.
fn block_to_part(
    block: &ContentBlock,
    text_type: &str,
    here: &str,
    losses: &mut Vec<Loss>,
) -> Option<JsonMap> {
    let mut part = JsonMap::new();
    match block {
        ContentBlock::Text(t) => {
            if t.cache_control.is_some() {
                loss(losses, here, "`cache_control` has no Responses equivalent");
            }
            for key in t.extra.keys() {
                loss(
                    losses,
                    here,
                    format!("text field `{key}` has no Responses equivalent"),
                );
            }
            part.insert("type".to_owned(), Value::from(text_type));
            part.insert("text".to_owned(), Value::from(t.text.clone()));
            if text_type == "output_text" {
                part.insert("annotations".to_owned(), Value::Array(Vec::new()));
            }
        }
        ContentBlock::Image(image) => {
            if image.cache_control.is_some() {
                loss(losses, here, "`cache_control` has no Responses equivalent");
            }
            let url = match &image.source {
                ImageSource::Base64 { media_type, data } => {
                    format!("data:{media_type};base64,{data}")
                }
                ImageSource::Url { url } => url.clone(),
                ImageSource::Other(_) => {
                    loss(
                        losses,
                        here,
                        "image source kind has no Responses equivalent",
                    );
                    return None;
                }
            };
            part.insert("type".to_owned(), Value::from("input_image"));
            part.insert("image_url".to_owned(), Value::from(url));
            part.insert(
                "detail".to_owned(),
                image
                    .extra
                    .get("detail")
                    .cloned()
                    .unwrap_or(Value::from("auto")),
            );
        }
        ContentBlock::Unknown(map) => {
            let kind = map.get("type").and_then(Value::as_str).unwrap_or("");
            if RESPONSES_PART_TYPES.contains(&kind) {
                return Some(map.clone());
            }
            if kind == "image_url" {
                // A Chat Completions image part.
                let url = map.get("image_url").and_then(|u| u.get("url")).cloned()?;
                part.insert("type".to_owned(), Value::from("input_image"));
                part.insert("image_url".to_owned(), url);
                let detail = map.get("image_url").and_then(|u| u.get("detail")).cloned();
                part.insert("detail".to_owned(), detail.unwrap_or(Value::from("auto")));
                return Some(part);
            }
            if kind == "text" {
                // A Chat Completions text part.
                part.insert("type".to_owned(), Value::from(text_type));
                part.insert(
                    "text".to_owned(),
                    map.get("text").cloned().unwrap_or_default(),
                );
                return Some(part);
            }
            loss(
                losses,
                here,
                format!("`{kind}` block has no Responses equivalent"),
            );
            return None;
        }
        ContentBlock::Thinking(_) | ContentBlock::RedactedThinking(_) => {
            loss(
                losses,
                here,
                "thinking outside an assistant turn has no Responses equivalent",
            );
            return None;
        }
        ContentBlock::ToolUse(u) => {
            loss(
                losses,
                here,
                format!(
                    "tool_use `{}` inside content cannot be sent as a Responses part",
                    u.id
                ),
            );
            return None;
        }
        ContentBlock::ToolResult(r) => {
            loss(
                losses,
                here,
                format!(
                    "tool_result for `{}` inside content cannot be sent as a Responses part",
                    r.tool_use_id
                ),
            );
            return None;
        }
    }
    Some(part)
}

// ---------------------------------------------------------------------------------------------
// Direct conversions

/// Responses → Anthropic, through the log.
pub fn responses_to_anthropic(req: &ResponsesRequest) -> Result<Converted<AnthropicRequest>> {
    let log = responses_to_log(req, &mut SequentialStamp::default())?;
    let mut out = log_to_anthropic(&log.value);
    let mut losses = log.losses;
    losses.append(&mut out.losses);
    out.losses = losses;
    Ok(out)
}

/// Responses → Chat Completions, through the log.
pub fn responses_to_openai(req: &ResponsesRequest) -> Result<Converted<ChatRequest>> {
    let log = responses_to_log(req, &mut SequentialStamp::default())?;
    let mut out = log_to_openai(&log.value);
    let mut losses = log.losses;
    losses.append(&mut out.losses);
    out.losses = losses;
    Ok(out)
}

/// The text of a Responses-only part toward Anthropic or Chat Completions: the text of an
/// `input_text` / `output_text` part (its annotations listed as a loss), `None` for others.
pub(crate) fn responses_part_text(
    map: &JsonMap,
    here: &str,
    losses: &mut Vec<Loss>,
) -> Option<String> {
    let kind = map.get("type").and_then(Value::as_str)?;
    if kind != "input_text" && kind != "output_text" {
        return None;
    }
    let text = map.get("text").and_then(Value::as_str)?.to_owned();
    for (key, value) in map {
        let trivial = match key.as_str() {
            "type" | "text" => true,
            "annotations" => value.as_array().is_some_and(Vec::is_empty),
            _ => false,
        };
        if !trivial {
            loss(losses, here, format!("`{kind}` field `{key}` was left out"));
        }
    }
    Some(text)
}

/// Whether an entry only carries a Responses item of a kind the log does not model (which the
/// other APIs cannot take).
pub(crate) fn foreign_item(e: &LogEntry) -> Option<&str> {
    e.openai
        .get(RESPONSES_ITEM_KEY)?
        .get("type")
        .and_then(Value::as_str)
        .or(Some("unknown"))
}
