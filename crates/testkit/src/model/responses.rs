//! The OpenAI Responses API wire of the scripted model (`POST /v1/responses`): its input items
//! read into the shared [`Request`](super::Request) view, and an [`Answer`] written as a
//! `response` object or as its typed event stream.

use serde_json::{Value, json};

use super::request::{Call, Message, Role, arguments, message, str_of};
use super::{Answer, created, pieces};

// ---------------------------------------------------------------------------------------------
// Reading a request

/// The system prompt (`instructions`, then the `system` and `developer` messages, joined with
/// a blank line), the conversation, and the `encrypted_content` of the `reasoning` items sent
/// back, in order.
pub(super) fn input_messages(body: &Value) -> (String, Vec<Message>, Vec<String>) {
    let mut system: Vec<String> = body
        .get("instructions")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .into_iter()
        .collect();
    let mut out: Vec<Message> = Vec::new();
    let mut reasoning = Vec::new();
    let items = match body.get("input") {
        Some(Value::String(text)) => {
            out.push(message(Role::User, text.clone(), Vec::new()));
            &[][..]
        }
        Some(Value::Array(items)) => items.as_slice(),
        _ => &[][..],
    };
    for item in items {
        // An item without a type but with a role is a message (the "easy input" form).
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .or_else(|| item.get("role").map(|_| "message"))
            .unwrap_or_default();
        match kind {
            "message" => {
                let text = content_text(item.get("content").unwrap_or(&Value::Null));
                match item.get("role").and_then(Value::as_str).unwrap_or("user") {
                    "system" | "developer" => system.push(text),
                    "assistant" => {
                        let turn = assistant_turn(&mut out);
                        if !text.is_empty() {
                            if !turn.text.is_empty() {
                                turn.text.push('\n');
                            }
                            turn.text.push_str(&text);
                        }
                    }
                    _ => out.push(message(Role::User, text, Vec::new())),
                }
            }
            "function_call" => assistant_turn(&mut out).calls.push(Call {
                id: str_of(item, "call_id"),
                name: str_of(item, "name"),
                input: arguments(str_of(item, "arguments")),
            }),
            "function_call_output" => {
                let text = content_text(item.get("output").unwrap_or(&Value::Null));
                out.push(Message {
                    call_id: Some(str_of(item, "call_id")),
                    is_error: text.starts_with("Operation failed."),
                    ..message(Role::Tool, text, Vec::new())
                });
            }
            "reasoning" => {
                assistant_turn(&mut out);
                if let Some(content) = item.get("encrypted_content").and_then(Value::as_str) {
                    reasoning.push(content.to_owned());
                }
            }
            _ => {}
        }
    }
    (system.join("\n\n"), out, reasoning)
}

/// The assistant message the next assistant-side item belongs to: the last message when it
/// is the model's (items that follow one another are one turn), else a new one.
fn assistant_turn(out: &mut Vec<Message>) -> &mut Message {
    if out.last().is_none_or(|m| m.role != Role::Assistant) {
        out.push(message(Role::Assistant, String::new(), Vec::new()));
    }
    let last = out.len() - 1;
    &mut out[last]
}

/// The text of a message's `content` or a call output's `output`: a string, or the text of its
/// `input_text` / `output_text` parts and the `refusal` of its `refusal` parts joined with
/// `\n` (images and files are not text).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p.get("type").and_then(Value::as_str) {
                Some("refusal") => p.get("refusal").and_then(Value::as_str),
                Some("input_text" | "output_text" | "text") | None => {
                    p.get("text").and_then(Value::as_str)
                }
                Some(_) => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// Writing an answer

/// One output item of an answer, in the order they go out.
enum Item<'a> {
    Reasoning(&'a str),
    Message(&'a str),
    Call(&'a Call),
}

/// SSE events of the Responses API: `event: <type>` and a `data` object carrying the same
/// `type` and an increasing `sequence_number` (from 0).
struct Events {
    out: Vec<String>,
    next: u64,
}

impl Events {
    fn emit(&mut self, kind: &str, fields: Value) {
        let mut data = json!({"type": kind, "sequence_number": self.next});
        if let (Some(data), Value::Object(fields)) = (data.as_object_mut(), fields) {
            data.extend(fields);
        }
        self.next += 1;
        self.out.push(format!("event: {kind}\ndata: {data}\n\n"));
    }
}

impl Answer {
    fn response_id(&self) -> String {
        format!("resp_scripted_{:04}", self.index)
    }

    fn reasoning_id(&self) -> String {
        format!("rs_scripted_{:04}", self.index)
    }

    /// An opaque `encrypted_content` for the reasoning item, as a client must send it back.
    fn encrypted_reasoning(&self) -> String {
        base64(format!("scripted-reasoning-{:04}", self.index).as_bytes())
    }

    /// Why the response is `incomplete`, from the stop reason; `None` when it completed.
    fn incomplete_reason(&self) -> Option<&'static str> {
        match self.stop_reason.as_deref() {
            Some("max_tokens" | "length" | "max_output_tokens") => Some("max_output_tokens"),
            Some("content_filter") => Some("content_filter"),
            _ => None,
        }
    }

    fn responses_usage(&self) -> Value {
        let input_tokens = self.input_tokens + self.cached_tokens;
        let reasoning_tokens = self
            .thinking
            .as_deref()
            .map_or(0, |t| (t.len() as u64 / 4 + 1).min(self.output_tokens));
        json!({
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": self.cached_tokens},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": input_tokens + self.output_tokens,
        })
    }

    fn items(&self) -> Vec<Item<'_>> {
        let mut items = Vec::new();
        if let Some(thinking) = &self.thinking {
            items.push(Item::Reasoning(thinking));
        }
        if let Some(text) = &self.text {
            items.push(Item::Message(text));
        }
        items.extend(self.calls.iter().map(Item::Call));
        items
    }

    /// The item's id: `rs_…`, `msg_…`, or the call's id with `fc_` for `call_`.
    fn item_id(&self, item: &Item<'_>) -> String {
        match item {
            Item::Reasoning(_) => self.reasoning_id(),
            Item::Message(_) => self.message_id(),
            Item::Call(call) => match call.id.strip_prefix("call_") {
                Some(rest) => format!("fc_{rest}"),
                None => format!("fc_{}", call.id),
            },
        }
    }

    /// The item complete (`done`) or as it starts in a stream, empty and `in_progress`.
    fn item(&self, item: &Item<'_>, done: bool) -> Value {
        let id = self.item_id(item);
        let status = if done { "completed" } else { "in_progress" };
        match item {
            Item::Reasoning(thinking) if done => json!({"type": "reasoning", "id": id,
                "summary": [{"type": "summary_text", "text": thinking}],
                "encrypted_content": self.encrypted_reasoning()}),
            Item::Reasoning(_) => json!({"type": "reasoning", "id": id, "summary": []}),
            Item::Message(text) => {
                let content = if done {
                    json!([{"type": "output_text", "text": text, "annotations": []}])
                } else {
                    json!([])
                };
                json!({"type": "message", "id": id, "status": status, "role": "assistant",
                    "content": content})
            }
            Item::Call(call) => json!({"type": "function_call", "id": id, "call_id": call.id,
                "name": call.name,
                "arguments": if done { call.input.to_string() } else { String::new() },
                "status": status}),
        }
    }

    /// The `response` object with this status and output (`usage` only once it is done).
    fn response(&self, created_at: u64, status: &str, output: Vec<Value>) -> Value {
        let done = status != "in_progress";
        let incomplete = self
            .incomplete_reason()
            .filter(|_| done)
            .map_or(Value::Null, |reason| json!({"reason": reason}));
        json!({
            "id": self.response_id(), "object": "response", "created_at": created_at,
            "status": status, "model": self.model, "output": output,
            "usage": if done { self.responses_usage() } else { Value::Null },
            "incomplete_details": incomplete, "error": null,
        })
    }

    fn final_status(&self) -> &'static str {
        if self.incomplete_reason().is_some() {
            "incomplete"
        } else {
            "completed"
        }
    }

    pub(super) fn responses_json(&self) -> Value {
        let output = self.items().iter().map(|i| self.item(i, true)).collect();
        self.response(created(), self.final_status(), output)
    }

    pub(super) fn responses_events(&self) -> Vec<String> {
        let created_at = created();
        let mut events = Events {
            out: Vec::new(),
            next: 0,
        };
        let started = self.response(created_at, "in_progress", Vec::new());
        events.emit("response.created", json!({"response": started}));
        events.emit("response.in_progress", json!({"response": started}));
        let mut output = Vec::new();
        for (index, item) in self.items().iter().enumerate() {
            let id = self.item_id(item);
            events.emit(
                "response.output_item.added",
                json!({"output_index": index, "item": self.item(item, false)}),
            );
            let at = json!({"item_id": id, "output_index": index});
            let with = |fields: Value| {
                let mut all = at.clone();
                if let (Some(all), Value::Object(fields)) = (all.as_object_mut(), fields) {
                    all.extend(fields);
                }
                all
            };
            match item {
                Item::Reasoning(thinking) => {
                    let part = |text: &str| json!({"type": "summary_text", "text": text});
                    events.emit(
                        "response.reasoning_summary_part.added",
                        with(json!({"summary_index": 0, "part": part("")})),
                    );
                    for piece in pieces(thinking, third(thinking)) {
                        events.emit(
                            "response.reasoning_summary_text.delta",
                            with(json!({"summary_index": 0, "delta": piece})),
                        );
                    }
                    events.emit(
                        "response.reasoning_summary_text.done",
                        with(json!({"summary_index": 0, "text": thinking})),
                    );
                    events.emit(
                        "response.reasoning_summary_part.done",
                        with(json!({"summary_index": 0, "part": part(thinking)})),
                    );
                }
                Item::Message(text) => {
                    let part = |text: &str| json!({"type": "output_text", "text": text, "annotations": []});
                    events.emit(
                        "response.content_part.added",
                        with(json!({"content_index": 0, "part": part("")})),
                    );
                    for piece in pieces(text, third(text)) {
                        events.emit(
                            "response.output_text.delta",
                            with(json!({"content_index": 0, "delta": piece})),
                        );
                    }
                    events.emit(
                        "response.output_text.done",
                        with(json!({"content_index": 0, "text": text})),
                    );
                    events.emit(
                        "response.content_part.done",
                        with(json!({"content_index": 0, "part": part(text)})),
                    );
                }
                Item::Call(call) => {
                    let arguments = call.input.to_string();
                    for piece in pieces(&arguments, third(&arguments).min(9)) {
                        events.emit(
                            "response.function_call_arguments.delta",
                            with(json!({"delta": piece})),
                        );
                    }
                    events.emit(
                        "response.function_call_arguments.done",
                        with(json!({"arguments": arguments})),
                    );
                }
            }
            let done = self.item(item, true);
            events.emit(
                "response.output_item.done",
                json!({"output_index": index, "item": done}),
            );
            output.push(done);
        }
        let status = self.final_status();
        events.emit(
            &format!("response.{status}"),
            json!({"response": self.response(created_at, status, output)}),
        );
        events.out
    }
}

/// A piece size that cuts `text` into at most three pieces (two or three when it has two
/// characters or more).
fn third(text: &str) -> usize {
    text.chars().count().div_ceil(3).max(1)
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}
