//! The OpenAI side of the log hub: Chat Completions messages to log entries, and log entries
//! back to Chat Completions (Anthropic-only data listed as losses).

use super::*;

/// Converts an OpenAI conversation to log entries, one entry per message. Lossless for
/// `messages`; other request fields are listed as losses.
pub fn openai_to_log(req: &ChatRequest, stamp: &mut dyn Stamp) -> Converted<Vec<LogEntry>> {
    let losses = not_conversation(&req.extra);
    let value = req
        .messages
        .iter()
        .map(|m| {
            let mut e = entry(stamp, m.role);
            e.content = m.content.clone();
            e.name = m.name.clone();
            e.tool_call_id = m.tool_call_id.clone();
            e.tool_calls = m.tool_calls.as_ref().map(|calls| {
                calls
                    .iter()
                    .map(|c| LogToolCall {
                        id: c.id.clone(),
                        function: c.function.clone(),
                        position: None,
                        anthropic: JsonMap::new(),
                        extra: c.extra.clone(),
                    })
                    .collect()
            });
            e.openai = m.extra.clone();
            // Adjacent tool results answer one assistant turn, so the default merge rule (one
            // Anthropic user message for them) is the right reading: no flag needed.
            e
        })
        .collect();
    Converted { value, losses }
}

// ---------------------------------------------------------------------------------------------
// log → OpenAI

/// Converts log entries to an OpenAI conversation. Thinking, `cache_control`, block order
/// and other Anthropic-only data are listed as losses.
pub fn log_to_openai(entries: &[LogEntry]) -> Converted<ChatRequest> {
    let mut losses = Vec::new();
    let mut messages = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let path = format!("log[{i}]");
        if let Some(kind) = super::responses::foreign_item(e) {
            loss(
                &mut losses,
                &path,
                format!("Responses `{kind}` item has no Chat Completions equivalent"),
            );
            continue;
        }
        let mut openai_fields = e.openai.clone();
        if openai_fields.remove(RESPONSES_KEY).is_some() {
            loss(
                &mut losses,
                &path,
                "Responses item fields (`id`, `status`, …) have no Chat Completions equivalent",
            );
        }
        for key in e.anthropic.keys() {
            loss(
                &mut losses,
                &path,
                format!("Anthropic field `{key}` has no OpenAI equivalent"),
            );
        }
        if e.role == LogRole::Tool && e.is_error == Some(true) {
            loss(
                &mut losses,
                &path,
                "`is_error` has no OpenAI equivalent (the observation text still says it failed)",
            );
        }
        let mut content = e
            .content
            .clone()
            .map(|c| to_openai_content(c, e.role, &path, &mut losses));
        if let Some(err) = &e.llm_error {
            let mut text = content
                .as_ref()
                .map(|c| c.to_text().into_owned())
                .unwrap_or_default();
            if let Some(partial) = err.partial_output.as_deref().filter(|p| !p.is_empty()) {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(partial);
            }
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&err.render());
            content = Some(Content::Text(text));
        }
        let tool_calls = e.tool_calls.as_ref().map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(k, c)| {
                    for key in c.anthropic.keys() {
                        loss(
                            &mut losses,
                            format!("{path}.tool_calls[{k}]"),
                            format!("Anthropic tool-use field `{key}` has no OpenAI equivalent"),
                        );
                    }
                    if c.position.is_some() {
                        loss(
                            &mut losses,
                            format!("{path}.tool_calls[{k}]"),
                            "a block that followed this call now comes before it",
                        );
                    }
                    let mut extra = c.extra.clone();
                    if extra.remove(RESPONSES_KEY).is_some() {
                        loss(
                            &mut losses,
                            format!("{path}.tool_calls[{k}]"),
                            "Responses function_call fields (`id`, `status`, …) have no Chat Completions equivalent",
                        );
                    }
                    ChatToolCall {
                        id: c.id.clone(),
                        function: c.function.clone(),
                        extra,
                    }
                })
                .collect()
        });
        messages.push(ChatMessage {
            role: e.role,
            content,
            name: e.name.clone(),
            tool_calls,
            tool_call_id: e.tool_call_id.clone(),
            extra: openai_fields,
        });
    }
    Converted {
        value: ChatRequest {
            messages,
            extra: JsonMap::new(),
        },
        losses,
    }
}

fn to_openai_content(
    content: Content,
    role: LogRole,
    path: &str,
    losses: &mut Vec<Loss>,
) -> Content {
    let blocks = match content {
        Content::Text(text) => return Content::Text(text),
        Content::Blocks(blocks) => blocks,
    };
    let mut out = Vec::with_capacity(blocks.len());
    for (j, block) in blocks.into_iter().enumerate() {
        let here = format!("{path}.content[{j}]");
        match block {
            ContentBlock::Text(TextBlock {
                text,
                cache_control,
                extra,
            }) => {
                if cache_control.is_some() {
                    loss(losses, &here, "`cache_control` has no OpenAI equivalent");
                }
                out.push(ContentBlock::Text(TextBlock {
                    text,
                    cache_control: None,
                    extra,
                }));
            }
            ContentBlock::Thinking(t) if t.extra.contains_key(RESPONSES_KEY) => {
                loss(
                    losses,
                    here,
                    "an OpenAI reasoning item (and its encrypted content) has no Chat Completions equivalent",
                );
            }
            ContentBlock::Thinking(_) => {
                loss(
                    losses,
                    here,
                    "thinking block (and its signature) has no OpenAI Chat Completions equivalent",
                );
            }
            ContentBlock::RedactedThinking(_) => {
                loss(
                    losses,
                    here,
                    "redacted thinking has no OpenAI Chat Completions equivalent",
                );
            }
            ContentBlock::Image(ImageBlock {
                source,
                cache_control,
                extra,
            }) => {
                if cache_control.is_some() {
                    loss(losses, &here, "`cache_control` has no OpenAI equivalent");
                }
                let url = match source {
                    ImageSource::Base64 { media_type, data } => {
                        format!("data:{media_type};base64,{data}")
                    }
                    ImageSource::Url { url } => url,
                    ImageSource::Other(_) => {
                        loss(losses, here, "image source kind has no OpenAI equivalent");
                        continue;
                    }
                };
                let mut image_url = JsonMap::new();
                image_url.insert("url".to_owned(), Value::from(url));
                if let Some(detail) = extra.get("detail") {
                    image_url.insert("detail".to_owned(), detail.clone());
                }
                let mut part = JsonMap::new();
                part.insert("type".to_owned(), Value::from("image_url"));
                part.insert("image_url".to_owned(), Value::Object(image_url));
                out.push(ContentBlock::Unknown(part));
            }
            ContentBlock::ToolUse(u) => {
                loss(
                    losses,
                    here,
                    format!(
                        "tool_use `{}` inside content (not in tool_calls) cannot be sent to OpenAI",
                        u.id
                    ),
                );
            }
            ContentBlock::ToolResult(r) => {
                loss(
                    losses,
                    here,
                    format!(
                        "tool_result for `{}` inside a {} entry cannot be sent to OpenAI",
                        r.tool_use_id,
                        role.as_str()
                    ),
                );
            }
            ContentBlock::Unknown(map)
                if matches!(
                    map.get("type").and_then(Value::as_str),
                    Some("input_text" | "output_text" | "input_image")
                ) =>
            {
                if let Some(text) = super::responses::responses_part_text(&map, &here, losses) {
                    out.push(ContentBlock::text(text));
                } else if let Some(url) = map.get("image_url").and_then(Value::as_str) {
                    let mut image_url = JsonMap::new();
                    image_url.insert("url".to_owned(), Value::from(url));
                    if let Some(detail) = map.get("detail") {
                        image_url.insert("detail".to_owned(), detail.clone());
                    }
                    let mut part = JsonMap::new();
                    part.insert("type".to_owned(), Value::from("image_url"));
                    part.insert("image_url".to_owned(), Value::Object(image_url));
                    out.push(ContentBlock::Unknown(part));
                } else {
                    loss(
                        losses,
                        here,
                        "an `input_image` part without an `image_url` was left out",
                    );
                }
            }
            ContentBlock::Unknown(map) => {
                let kind = map.get("type").and_then(Value::as_str).unwrap_or("unknown");
                if OPENAI_PART_TYPES.contains(&kind) {
                    out.push(ContentBlock::Unknown(map));
                } else {
                    loss(
                        losses,
                        here,
                        format!("block type `{kind}` has no OpenAI equivalent"),
                    );
                }
            }
        }
    }
    Content::Blocks(out)
}
