//! The request view of the scripted model: what a request to any of its wires says, read into
//! one shape ([`Request`]) that rules decide on.

use std::fmt;

use serde_json::{Value, json};

/// Which API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Anthropic Messages (`POST /v1/messages`).
    Anthropic,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`).
    OpenAi,
    /// The OpenAI Responses API (`POST /v1/responses`).
    Responses,
}

impl fmt::Display for Wire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Anthropic => "anthropic",
            Self::OpenAi => "openai",
            Self::Responses => "responses",
        })
    }
}

/// Who wrote a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The person (text the client sent as the user, not tool results).
    User,
    /// The model: text and tool calls.
    Assistant,
    /// One tool result (a `tool_result` block of an Anthropic user message, an OpenAI `tool`
    /// message, a Responses API `function_call_output` item).
    Tool,
}

/// A tool call an assistant message made.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The call id (`toolu_…`, `call_…`; a Responses API `function_call`'s `call_id`, not its
    /// item `id`).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The input (OpenAI's string-encoded arguments parsed; kept as a JSON string when they
    /// do not parse).
    pub input: Value,
}

/// One message of the conversation, the same on every wire. The system prompt is not among
/// them (see [`Request::system`]). On the Responses API, whose input is a list of items, the
/// assistant-side items that follow one another (assistant messages, `function_call`s,
/// `reasoning`) make one assistant message: one turn of the model.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text: the text blocks or parts joined with `\n` (a tool result's text for
    /// [`Role::Tool`]).
    pub text: String,
    /// The tool calls of an assistant message.
    pub calls: Vec<Call>,
    /// The call a [`Role::Tool`] message answers.
    pub call_id: Option<String>,
    /// Whether a tool result is an error: Anthropic's `is_error`; on the OpenAI wires, which
    /// have no such field, whether the text is a failure observation (it begins with
    /// `Operation failed.`, as the tool runtime writes them).
    pub is_error: bool,
}

/// A tool result, with the call it answers.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The call id.
    pub call_id: String,
    /// The tool's name, found through the call id in an earlier assistant message (empty when
    /// no assistant message made that call).
    pub name: String,
    /// The call's input (`null` when the call was not found).
    pub input: Value,
    /// The result's text.
    pub text: String,
    /// Whether it is an error (see [`Message::is_error`]).
    pub is_error: bool,
}

/// A request the model received, as JSON and as a view that reads the same on every wire.
#[derive(Debug, Clone)]
pub struct Request {
    pub(super) index: usize,
    pub(super) wire: Wire,
    pub(super) path: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Value,
    system: String,
    tools: Vec<String>,
    messages: Vec<Message>,
    /// Where the last user message is in `messages`.
    last_user: Option<usize>,
    results: Vec<ToolResult>,
    /// The `encrypted_content` of the Responses API `reasoning` items sent back.
    reasoning: Vec<String>,
}

impl Request {
    /// The view of a request body of `wire` (the server builds these; a test can too).
    pub fn new(wire: Wire, body: Value) -> Self {
        let (system, messages, reasoning) = match wire {
            Wire::Anthropic => {
                let (system, messages) = anthropic_messages(&body);
                (system, messages, Vec::new())
            }
            Wire::OpenAi => {
                let (system, messages) = openai_messages(&body);
                (system, messages, Vec::new())
            }
            Wire::Responses => super::responses::input_messages(&body),
        };
        let tools = body
            .get("tools")
            .and_then(Value::as_array)
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| {
                        t.get("name")
                            .or_else(|| t.get("function").and_then(|f| f.get("name")))
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let last_user = messages.iter().rposition(|m| m.role == Role::User);
        let since = last_user.map_or(0, |i| i + 1);
        let results = messages[since..]
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| {
                let id = m.call_id.clone().unwrap_or_default();
                let call = messages.iter().flat_map(|m| &m.calls).find(|c| c.id == id);
                ToolResult {
                    name: call.map(|c| c.name.clone()).unwrap_or_default(),
                    input: call.map(|c| c.input.clone()).unwrap_or(Value::Null),
                    call_id: id,
                    text: m.text.clone(),
                    is_error: m.is_error,
                }
            })
            .collect();
        let path = match wire {
            Wire::Anthropic => "/v1/messages",
            Wire::OpenAi => "/v1/chat/completions",
            Wire::Responses => "/v1/responses",
        };
        Self {
            index: 0,
            wire,
            path: path.to_owned(),
            headers: Vec::new(),
            body,
            system,
            tools,
            messages,
            last_user,
            results,
            reasoning,
        }
    }

    /// Which request of the server this is, from 0.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The wire it came in on.
    pub fn wire(&self) -> Wire {
        self.wire
    }

    /// Whether the client asked for a stream (`"stream": true`).
    pub fn streams(&self) -> bool {
        self.body.get("stream").and_then(Value::as_bool) == Some(true)
    }

    /// The path it was sent to.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// A header, by its name in any case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON body as received.
    pub fn body(&self) -> &Value {
        &self.body
    }

    /// The `model` the client asked for.
    pub fn model(&self) -> &str {
        self.body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The names of the tools offered, in order.
    pub fn tools(&self) -> &[String] {
        &self.tools
    }

    /// Whether a tool of this name is offered.
    pub fn offers(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| t == tool)
    }

    /// The system prompt: Anthropic's `system` (its text blocks joined with a blank line), or
    /// the `system` and `developer` messages of an OpenAI request joined the same way (on the
    /// Responses API after its `instructions`).
    pub fn system(&self) -> &str {
        &self.system
    }

    /// The conversation, system prompt left out.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The text of the last user message (not counting tool results); empty when there is
    /// none.
    pub fn last_user_text(&self) -> &str {
        self.last_user
            .map_or("", |i| self.messages[i].text.as_str())
    }

    /// The uploads the last user message names, in order of first mention, each once: every
    /// `upload_` followed by three or more digits, and the content of every
    /// `<file_ref>…</file_ref>`.
    pub fn uploads(&self) -> Vec<String> {
        upload_ids(self.last_user_text())
    }

    /// The tool results since the last user message, in order.
    pub fn tool_results(&self) -> &[ToolResult] {
        &self.results
    }

    /// The last tool result since the last user message.
    pub fn last_result(&self) -> Option<&ToolResult> {
        self.results.last()
    }

    /// How many assistant turns there have been since the last user message: 0 when the
    /// model is asked for the first time, 1 after one round of tool calls, and so on.
    pub fn round(&self) -> usize {
        let since = self.last_user.map_or(0, |i| i + 1);
        self.messages[since..]
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count()
    }

    /// The `encrypted_content` of every `reasoning` item a Responses API request sent back in
    /// its `input`, in order (items without one are left out); empty on the other wires.
    pub fn reasoning_sent_back(&self) -> Vec<String> {
        self.reasoning.clone()
    }

    /// Whether any part of what the model was shown (system prompt, messages, tool
    /// definitions: the whole body) contains `needle`.
    pub fn shows(&self, needle: &str) -> bool {
        contains_text(&self.body, needle)
    }
}

fn contains_text(value: &Value, needle: &str) -> bool {
    match value {
        Value::String(s) => s.contains(needle),
        Value::Array(items) => items.iter().any(|v| contains_text(v, needle)),
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.contains(needle) || contains_text(v, needle)),
        _ => false,
    }
}

/// The upload ids a text names (see [`Request::uploads`]).
pub fn upload_ids(text: &str) -> Vec<String> {
    let mut found: Vec<(usize, String)> = Vec::new();
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut from = 0;
    while let Some(at) = text[from..].find("upload_") {
        let start = from + at;
        let digits_from = start + "upload_".len();
        let digits = bytes[digits_from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let end = digits_from + digits;
        let bounded =
            (start == 0 || !word(bytes[start - 1])) && bytes.get(end).is_none_or(|b| !word(*b));
        if digits >= 3 && bounded {
            found.push((start, text[start..end].to_owned()));
        }
        from = digits_from;
    }
    let mut from = 0;
    while let Some(at) = text[from..].find("<file_ref>") {
        let start = from + at + "<file_ref>".len();
        let Some(len) = text[start..].find("</file_ref>") else {
            break;
        };
        let id = text[start..start + len].trim();
        if !id.is_empty() {
            found.push((start, id.to_owned()));
        }
        from = start + len;
    }
    found.sort_by_key(|(at, _)| *at);
    let mut ids: Vec<String> = Vec::new();
    for (_, id) in found {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// The text of an Anthropic content (a string, or blocks whose `text` parts are joined).
fn anthropic_text(content: &Value, sep: &str) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(sep),
        _ => String::new(),
    }
}

fn anthropic_messages(body: &Value) -> (String, Vec<Message>) {
    let system = body
        .get("system")
        .map(|s| anthropic_text(s, "\n\n"))
        .unwrap_or_default();
    let mut out = Vec::new();
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let content = m.get("content").unwrap_or(&Value::Null);
        let assistant = m.get("role").and_then(Value::as_str) == Some("assistant");
        if assistant {
            let calls = content
                .as_array()
                .into_iter()
                .flatten()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                .map(|b| Call {
                    id: str_of(b, "id"),
                    name: str_of(b, "name"),
                    input: b.get("input").cloned().unwrap_or(Value::Null),
                })
                .collect();
            out.push(message(
                Role::Assistant,
                anthropic_text(content, "\n"),
                calls,
            ));
            continue;
        }
        for block in content.as_array().into_iter().flatten() {
            if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                out.push(Message {
                    call_id: Some(str_of(block, "tool_use_id")),
                    is_error: block.get("is_error").and_then(Value::as_bool) == Some(true),
                    ..message(
                        Role::Tool,
                        anthropic_text(block.get("content").unwrap_or(&Value::Null), "\n"),
                        Vec::new(),
                    )
                });
            }
        }
        let text = anthropic_text(content, "\n");
        // A user message of tool results alone is no word from the person.
        let only_results = content.as_array().is_some_and(|blocks| {
            blocks
                .iter()
                .all(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        });
        if !only_results || !text.is_empty() {
            out.push(message(Role::User, text, Vec::new()));
        }
    }
    (system, out)
}

/// The text of an OpenAI content (a string, or parts whose `text` is joined).
fn openai_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn openai_messages(body: &Value) -> (String, Vec<Message>) {
    let mut system = Vec::new();
    let mut out = Vec::new();
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let text = openai_text(m.get("content").unwrap_or(&Value::Null));
        match m.get("role").and_then(Value::as_str).unwrap_or_default() {
            "system" | "developer" => system.push(text),
            "assistant" => {
                let calls = m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        let function = c.get("function").unwrap_or(&Value::Null);
                        Call {
                            id: str_of(c, "id"),
                            name: str_of(function, "name"),
                            input: arguments(str_of(function, "arguments")),
                        }
                    })
                    .collect();
                out.push(message(Role::Assistant, text, calls));
            }
            "tool" | "function" => out.push(Message {
                call_id: Some(str_of(m, "tool_call_id")),
                is_error: text.starts_with("Operation failed."),
                ..message(Role::Tool, text, Vec::new())
            }),
            _ => out.push(message(Role::User, text, Vec::new())),
        }
    }
    (system.join("\n\n"), out)
}

/// A call's string-encoded arguments parsed (`{}` when blank, the string itself when they do
/// not parse).
pub(super) fn arguments(arguments: String) -> Value {
    if arguments.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(&arguments).unwrap_or(Value::String(arguments))
    }
}

pub(super) fn message(role: Role, text: String, calls: Vec<Call>) -> Message {
    Message {
        role,
        text,
        calls,
        call_id: None,
        is_error: false,
    }
}

pub(super) fn str_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
