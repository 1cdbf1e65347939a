//! A model that decides, for tests: [`ScriptedModel`] is an HTTP server on 127.0.0.1 that
//! speaks the Anthropic Messages wire (`POST /v1/messages`) and the OpenAI Chat Completions
//! wire (`POST /v1/chat/completions`), each as one JSON body or as a server-sent event stream
//! when the request says `"stream": true`. It answers every request by rules over what the
//! request says ([`Request`]: which tools are offered, which uploads the last user message
//! names, what the last tool result said, how many assistant turns there have been since the
//! user spoke) rather than by replaying a recording, so the same script serves both wires,
//! streaming or not, whatever the client around it sends first.
//!
//! A journey is a few lines:
//!
//! ```no_run
//! # async fn journey() {
//! use ba_testkit::model::{ScriptedModel, Turn};
//! use serde_json::json;
//!
//! let model = ScriptedModel::builder()
//!     .rule(
//!         "read the upload",
//!         |r| r.offers("file_reader") && r.round() == 0 && !r.uploads().is_empty(),
//!         |r| Turn::calls(r.uploads().iter().map(|u| ("file_reader", json!({"path": u})))),
//!     )
//!     .rule(
//!         "answer",
//!         |r| r.last_result().is_some(),
//!         |r| Turn::text(format!("done: {}", r.last_result().unwrap().text)),
//!     )
//!     .start()
//!     .await;
//! // Point an Anthropic client at `model.anthropic_base_url()`, an OpenAI-compatible one at
//! // `model.openai_base_url()`; afterwards scan what the model was shown:
//! for request in model.requests() {
//!     assert!(!request.system().contains("/home/"));
//! }
//! # }
//! ```
//!
//! Rules are tried in order and the first whose condition holds answers. When none holds
//! (or a rule panics) the reply is an HTTP 500 in the wire's error shape, with
//! `x-should-retry: false` so the client does not retry, naming the request and the last user
//! text: the test fails at once with a message that says what the script did not expect.
//!
//! The replies have the shapes real providers send: `message_start`, `content_block_start` /
//! `content_block_delta` (`thinking_delta`, `signature_delta`, `text_delta`,
//! `input_json_delta` cut into pieces) / `content_block_stop`, `message_delta` with the stop
//! reason and usage, `message_stop`; and `chat.completion.chunk`s whose `tool_calls` deltas
//! carry `index`, `id`, the function name and the arguments in pieces, a `finish_reason`, a
//! usage chunk when `stream_options.include_usage` asks for one, then `data: [DONE]`. Streams
//! go out with `transfer-encoding: chunked`, one event per chunk; connections are kept alive
//! between requests unless the client asks to close.

#![warn(missing_docs, missing_debug_implementations)]

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

// ---------------------------------------------------------------------------------------------
// The request view

/// Which API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Anthropic Messages (`POST /v1/messages`).
    Anthropic,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`).
    OpenAi,
}

impl fmt::Display for Wire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Anthropic => "anthropic",
            Self::OpenAi => "openai",
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
    /// message).
    Tool,
}

/// A tool call an assistant message made.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The call id (`toolu_…`, `call_…`).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The input (OpenAI's string-encoded arguments parsed; kept as a JSON string when they
    /// do not parse).
    pub input: Value,
}

/// One message of the conversation, the same for both wires. The system prompt is not among
/// them (see [`Request::system`]).
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
    /// Whether a tool result is an error: Anthropic's `is_error`; on the OpenAI wire, which
    /// has no such field, whether the text is a failure observation (it begins with
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

/// A request the model received, as JSON and as a view that reads the same on both wires.
#[derive(Debug, Clone)]
pub struct Request {
    index: usize,
    wire: Wire,
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
    system: String,
    tools: Vec<String>,
    messages: Vec<Message>,
    /// Where the last user message is in `messages`.
    last_user: Option<usize>,
    results: Vec<ToolResult>,
}

impl Request {
    /// The view of a request body of `wire` (the server builds these; a test can too).
    pub fn new(wire: Wire, body: Value) -> Self {
        let (system, messages) = match wire {
            Wire::Anthropic => anthropic_messages(&body),
            Wire::OpenAi => openai_messages(&body),
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
    /// the `system` and `developer` messages of an OpenAI request joined the same way.
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
                        let arguments = str_of(function, "arguments");
                        Call {
                            id: str_of(c, "id"),
                            name: str_of(function, "name"),
                            input: if arguments.trim().is_empty() {
                                json!({})
                            } else {
                                serde_json::from_str(&arguments).unwrap_or(Value::String(arguments))
                            },
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

fn message(role: Role, text: String, calls: Vec<Call>) -> Message {
    Message {
        role,
        text,
        calls,
        call_id: None,
        is_error: false,
    }
}

fn str_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

// ---------------------------------------------------------------------------------------------
// Turns

/// What the model answers: text (a final answer), tool calls, or both (text first); optionally
/// thinking before them. Or an HTTP error ([`Turn::fail`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    thinking: Option<String>,
    text: Option<String>,
    calls: Vec<(String, Value)>,
    usage: Option<(u64, u64)>,
    stop_reason: Option<String>,
    failure: Option<(u16, String)>,
    held: bool,
}

impl Turn {
    fn empty() -> Self {
        Self {
            thinking: None,
            text: None,
            calls: Vec::new(),
            usage: None,
            stop_reason: None,
            failure: None,
            held: false,
        }
    }

    /// No reply at all: the connection is held open until the client closes it (a run
    /// cancelled or killed) or the server stops — a model call that is still under way for as
    /// long as the test needs one.
    pub fn hold() -> Self {
        Self {
            held: true,
            ..Self::empty()
        }
    }

    /// A text answer (stop reason `end_turn` / `stop`).
    pub fn text(text: impl Into<String>) -> Self {
        Self::empty().with_text(text)
    }

    /// One tool call (stop reason `tool_use` / `tool_calls`); its id is generated.
    pub fn call(name: impl Into<String>, input: Value) -> Self {
        Self::empty().with_call(name, input)
    }

    /// Tool calls, in order, each `(name, input)`; their ids are generated, unique on the
    /// server.
    pub fn calls<N: Into<String>>(calls: impl IntoIterator<Item = (N, Value)>) -> Self {
        Self {
            calls: calls.into_iter().map(|(n, v)| (n.into(), v)).collect(),
            ..Self::empty()
        }
    }

    /// An HTTP error reply of this status, with the message in the wire's error shape
    /// (`{"type":"error","error":{…}}`, `{"error":{…}}`); the client's retry policy applies.
    pub fn fail(status: u16, message: impl Into<String>) -> Self {
        Self {
            failure: Some((status, message.into())),
            ..Self::empty()
        }
    }

    /// The same turn with this text (before its tool calls, if any).
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// The same turn with one more tool call.
    pub fn with_call(mut self, name: impl Into<String>, input: Value) -> Self {
        self.calls.push((name.into(), input));
        self
    }

    /// The same turn with thinking before the rest (an Anthropic `thinking` block with a
    /// signature; `reasoning_content` on the OpenAI wire, as compatible servers send it).
    pub fn with_thinking(mut self, thinking: impl Into<String>) -> Self {
        self.thinking = Some(thinking.into());
        self
    }

    /// The same turn with these token counts instead of the estimate (a quarter of the
    /// request body's bytes in, a quarter of the answer's out).
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some((input_tokens, output_tokens));
        self
    }

    /// The same turn with this stop reason as the wire spells it (`max_tokens`, `length`, …)
    /// instead of the one its content implies.
    pub fn with_stop_reason(mut self, reason: impl Into<String>) -> Self {
        self.stop_reason = Some(reason.into());
        self
    }
}

// ---------------------------------------------------------------------------------------------
// The server

type When = Box<dyn Fn(&Request) -> bool + Send + Sync>;
type Then = Box<dyn Fn(&Request) -> Turn + Send + Sync>;

struct Rule {
    name: String,
    when: When,
    then: Then,
}

/// Builds a [`ScriptedModel`]: rules, then [`Builder::start`].
pub struct Builder {
    rules: Vec<Rule>,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.rules.iter().map(|r| r.name.as_str()).collect();
        f.debug_struct("Builder").field("rules", &names).finish()
    }
}

impl Builder {
    /// Adds a rule: when `when` holds for a request, `then` answers it. Rules are tried in
    /// the order they were added; the first that holds answers. `name` shows in
    /// [`ScriptedModel::fired`] and in the error when nothing matched.
    pub fn rule(
        mut self,
        name: impl Into<String>,
        when: impl Fn(&Request) -> bool + Send + Sync + 'static,
        then: impl Fn(&Request) -> Turn + Send + Sync + 'static,
    ) -> Self {
        self.rules.push(Rule {
            name: name.into(),
            when: Box::new(when),
            then: Box::new(then),
        });
        self
    }

    /// Binds 127.0.0.1 on a free port and starts serving (on the current tokio runtime).
    pub async fn start(self) -> ScriptedModel {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            rules: self.rules,
            log: Mutex::new(Vec::new()),
            arrived: tokio::sync::Notify::new(),
            next_call: AtomicU64::new(1),
        });
        let serving = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            // Dropped with this task, the set aborts every connection still open.
            let mut connections = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                while connections.try_join_next().is_some() {}
                connections.spawn(serve_connection(stream, Arc::clone(&serving)));
            }
        });
        ScriptedModel {
            base_url: format!("http://{addr}"),
            shared,
            task,
        }
    }
}

struct Exchange {
    request: Request,
    rule: Option<String>,
}

struct Shared {
    rules: Vec<Rule>,
    log: Mutex<Vec<Exchange>>,
    arrived: tokio::sync::Notify,
    next_call: AtomicU64,
}

/// The scripted model server; it stops when dropped.
pub struct ScriptedModel {
    base_url: String,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("base_url", &self.base_url)
            .field("requests", &self.shared.log.lock().unwrap().len())
            .finish()
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ScriptedModel {
    /// A builder with no rules.
    pub fn builder() -> Builder {
        Builder { rules: Vec::new() }
    }

    /// `http://127.0.0.1:<port>`: the server answers `/v1/messages` and
    /// `/v1/chat/completions` (and `/chat/completions`, `/messages`) under it.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The base URL for an Anthropic client (which appends `/v1/messages`).
    pub fn anthropic_base_url(&self) -> String {
        self.base_url.clone()
    }

    /// The base URL for an OpenAI-compatible client (which appends `/chat/completions`):
    /// `…/v1`.
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base_url)
    }

    /// Every request received so far, in order (including those no rule answered).
    pub fn requests(&self) -> Vec<Request> {
        let log = self.shared.log.lock().unwrap();
        log.iter().map(|e| e.request.clone()).collect()
    }

    /// For each request received, the name of the rule that answered it (`None` when none
    /// matched or the rule panicked).
    pub fn fired(&self) -> Vec<Option<String>> {
        let log = self.shared.log.lock().unwrap();
        log.iter().map(|e| e.rule.clone()).collect()
    }

    /// Waits until at least `n` requests have been answered.
    pub async fn wait_for_requests(&self, n: usize) {
        loop {
            let notified = self.shared.arrived.notified();
            if self.shared.log.lock().unwrap().len() >= n {
                return;
            }
            notified.await;
        }
    }
}

/// A reply before it is written: a whole body, or SSE events.
struct Response {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Body,
}

enum Body {
    Json(Value),
    Events(Vec<String>),
    /// Nothing is sent: the request stays open until the client goes.
    Held,
}

impl Response {
    fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Body::Json(body),
        }
    }
}

impl Shared {
    fn answer(&self, wire: Option<Wire>, request: RawRequest) -> Response {
        let Some(wire) = wire else {
            return Response::json(
                404,
                json!({"error": {"type": "not_found_error",
                    "message": format!("the scripted model serves POST /v1/messages and POST /v1/chat/completions, not {} {}", request.method, request.path)}}),
            );
        };
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return error_reply(wire, 400, "the request body is not JSON", false);
        };
        let mut view = Request::new(wire, body);
        view.path = request.path;
        view.headers = request.headers;
        // The request is logged before the rules run, so a test sees it even when they fail.
        let index = {
            let mut log = self.log.lock().unwrap();
            view.index = log.len();
            log.push(Exchange {
                request: view.clone(),
                rule: None,
            });
            view.index
        };
        let decided = catch_unwind(AssertUnwindSafe(|| {
            self.rules
                .iter()
                .find(|rule| (rule.when)(&view))
                .map(|rule| (rule.name.clone(), (rule.then)(&view)))
        }));
        let response = match decided {
            Ok(Some((name, turn))) => {
                self.log.lock().unwrap()[index].rule = Some(name);
                self.render(&view, turn)
            }
            Ok(None) => {
                let names: Vec<&str> = self.rules.iter().map(|r| r.name.as_str()).collect();
                error_reply(
                    wire,
                    500,
                    &format!(
                        "scripted model: no rule matched request #{index} ({wire}, round {}, tools offered {:?}, last tool result {:?}; rules tried: {names:?}); last user text: {:?}",
                        view.round(),
                        view.tools(),
                        view.last_result().map(|r| (&r.name, &r.text)),
                        view.last_user_text()
                    ),
                    true,
                )
            }
            Err(panic) => {
                let what = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("a panic");
                error_reply(
                    wire,
                    500,
                    &format!(
                        "scripted model: a rule panicked on request #{index} ({what}); last user text: {:?}",
                        view.last_user_text()
                    ),
                    true,
                )
            }
        };
        self.arrived.notify_waiters();
        response
    }

    fn render(&self, request: &Request, turn: Turn) -> Response {
        if turn.held {
            return Response {
                status: 200,
                headers: Vec::new(),
                body: Body::Held,
            };
        }
        if let Some((status, message)) = &turn.failure {
            return error_reply(request.wire, *status, message, false);
        }
        let prefix = match request.wire {
            Wire::Anthropic => "toolu_scripted_",
            Wire::OpenAi => "call_scripted_",
        };
        let calls: Vec<Call> = turn
            .calls
            .iter()
            .map(|(name, input)| Call {
                id: format!(
                    "{prefix}{:04}",
                    self.next_call.fetch_add(1, Ordering::Relaxed)
                ),
                name: name.clone(),
                input: input.clone(),
            })
            .collect();
        let (input_tokens, output_tokens) = turn.usage.unwrap_or_else(|| {
            let out: usize = turn.text.as_deref().map_or(0, str::len)
                + turn.thinking.as_deref().map_or(0, str::len)
                + calls
                    .iter()
                    .map(|c| c.name.len() + c.input.to_string().len())
                    .sum::<usize>();
            (
                (request.body.to_string().len() / 4).max(1) as u64,
                (out / 4 + 1) as u64,
            )
        });
        let answer = Answer {
            index: request.index,
            model: if request.model().is_empty() {
                "scripted-model".to_owned()
            } else {
                request.model().to_owned()
            },
            thinking: turn.thinking.filter(|t| !t.is_empty()),
            text: turn.text,
            calls,
            input_tokens,
            output_tokens,
            stop_reason: turn.stop_reason,
        };
        let stream = request.streams();
        let body = match (request.wire, stream) {
            (Wire::Anthropic, false) => Body::Json(answer.anthropic_json()),
            (Wire::Anthropic, true) => Body::Events(answer.anthropic_events()),
            (Wire::OpenAi, false) => Body::Json(answer.openai_json()),
            (Wire::OpenAi, true) => {
                let usage = request
                    .body
                    .pointer("/stream_options/include_usage")
                    .and_then(Value::as_bool)
                    == Some(true);
                Body::Events(answer.openai_chunks(usage))
            }
        };
        Response {
            status: 200,
            headers: Vec::new(),
            body,
        }
    }
}

/// An error reply in the wire's shape; `final_` adds `x-should-retry: false`.
fn error_reply(wire: Wire, status: u16, message: &str, final_: bool) -> Response {
    let body = match wire {
        Wire::Anthropic => {
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Wire::OpenAi => {
            let kind = match status {
                400..=499 => "invalid_request_error",
                _ => "server_error",
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
        }
    };
    let mut response = Response::json(status, body);
    if final_ {
        response
            .headers
            .push(("x-should-retry", "false".to_owned()));
    }
    response
}

/// One answer, ready to be written on either wire.
struct Answer {
    index: usize,
    model: String,
    thinking: Option<String>,
    text: Option<String>,
    calls: Vec<Call>,
    input_tokens: u64,
    output_tokens: u64,
    stop_reason: Option<String>,
}

/// A signature for scripted thinking (opaque to clients, required when sent back).
const SIGNATURE: &str = "c2NyaXB0ZWQtdGhpbmtpbmc=";

impl Answer {
    fn anthropic_stop(&self) -> String {
        self.stop_reason.clone().unwrap_or_else(|| {
            if self.calls.is_empty() {
                "end_turn".to_owned()
            } else {
                "tool_use".to_owned()
            }
        })
    }

    fn openai_stop(&self) -> String {
        self.stop_reason.clone().unwrap_or_else(|| {
            if self.calls.is_empty() {
                "stop".to_owned()
            } else {
                "tool_calls".to_owned()
            }
        })
    }

    fn message_id(&self) -> String {
        format!("msg_scripted_{:04}", self.index)
    }

    fn completion_id(&self) -> String {
        format!("chatcmpl-scripted-{:04}", self.index)
    }

    fn anthropic_usage(&self, output_tokens: u64) -> Value {
        json!({"input_tokens": self.input_tokens, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0, "output_tokens": output_tokens})
    }

    fn anthropic_json(&self) -> Value {
        let mut content = Vec::new();
        if let Some(thinking) = &self.thinking {
            content.push(json!({"type": "thinking", "thinking": thinking, "signature": SIGNATURE}));
        }
        if let Some(text) = &self.text {
            content.push(json!({"type": "text", "text": text}));
        }
        for call in &self.calls {
            content.push(
                json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}),
            );
        }
        json!({
            "id": self.message_id(), "type": "message", "role": "assistant", "model": self.model,
            "content": content, "stop_reason": self.anthropic_stop(), "stop_sequence": null,
            "usage": self.anthropic_usage(self.output_tokens),
        })
    }

    fn anthropic_events(&self) -> Vec<String> {
        fn event(name: &str, data: Value) -> String {
            format!("event: {name}\ndata: {data}\n\n")
        }
        let mut out = vec![event(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": self.message_id(), "type": "message", "role": "assistant",
                "model": self.model, "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": self.anthropic_usage(1)}}),
        )];
        let mut index = 0;
        let mut block = |out: &mut Vec<String>, start: Value, deltas: Vec<Value>| {
            out.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            ));
            if index == 0 {
                out.push(event("ping", json!({"type": "ping"})));
            }
            for delta in deltas {
                out.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": delta}),
                ));
            }
            out.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        };
        if let Some(thinking) = &self.thinking {
            let mut deltas: Vec<Value> = pieces(thinking, 12)
                .map(|p| json!({"type": "thinking_delta", "thinking": p}))
                .collect();
            deltas.push(json!({"type": "signature_delta", "signature": SIGNATURE}));
            block(
                &mut out,
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                deltas,
            );
        }
        if let Some(text) = &self.text {
            let deltas = pieces(text, 12)
                .map(|p| json!({"type": "text_delta", "text": p}))
                .collect();
            block(&mut out, json!({"type": "text", "text": ""}), deltas);
        }
        for call in &self.calls {
            let input = call.input.to_string();
            let deltas = std::iter::once("")
                .chain(pieces(&input, 9))
                .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                .collect();
            block(
                &mut out,
                json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
                deltas,
            );
        }
        out.push(event(
            "message_delta",
            json!({"type": "message_delta",
                "delta": {"stop_reason": self.anthropic_stop(), "stop_sequence": null},
                "usage": {"output_tokens": self.output_tokens}}),
        ));
        out.push(event("message_stop", json!({"type": "message_stop"})));
        out
    }

    fn openai_usage(&self) -> Value {
        json!({"prompt_tokens": self.input_tokens, "completion_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0}})
    }

    fn openai_json(&self) -> Value {
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        message.insert("content".into(), json!(self.text));
        if let Some(thinking) = &self.thinking {
            message.insert("reasoning_content".into(), json!(thinking));
        }
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function",
                        "function": {"name": c.name, "arguments": c.input.to_string()}})
                })
                .collect();
            message.insert("tool_calls".into(), Value::Array(calls));
        }
        message.insert("refusal".into(), Value::Null);
        json!({
            "id": self.completion_id(), "object": "chat.completion", "created": created(),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": null,
                "finish_reason": self.openai_stop()}],
            "usage": self.openai_usage(),
        })
    }

    fn openai_chunks(&self, usage: bool) -> Vec<String> {
        let created = created();
        let chunk = |choices: Value, usage: Option<Value>| {
            let mut c = json!({"id": self.completion_id(), "object": "chat.completion.chunk",
                "created": created, "model": self.model, "choices": choices});
            if let Some(usage) = usage {
                c["usage"] = usage;
            }
            format!("data: {c}\n\n")
        };
        let delta = |delta: Value| {
            chunk(
                json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]),
                None,
            )
        };
        let mut out = vec![delta(json!({"role": "assistant", "content": ""}))];
        if let Some(thinking) = &self.thinking {
            out.extend(pieces(thinking, 12).map(|p| delta(json!({"reasoning_content": p}))));
        }
        if let Some(text) = &self.text {
            out.extend(pieces(text, 12).map(|p| delta(json!({"content": p}))));
        }
        for (i, call) in self.calls.iter().enumerate() {
            out.push(delta(json!({"tool_calls": [{"index": i, "id": call.id,
                "type": "function", "function": {"name": call.name, "arguments": ""}}]})));
            let input = call.input.to_string();
            out.extend(pieces(&input, 9).map(|p| {
                delta(json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}))
            }));
        }
        out.push(chunk(
            json!([{"index": 0, "delta": {}, "logprobs": null,
                "finish_reason": self.openai_stop()}]),
            None,
        ));
        if usage {
            out.push(chunk(json!([]), Some(self.openai_usage())));
        }
        out.push("data: [DONE]\n\n".to_owned());
        out
    }
}

fn created() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `text` in pieces of at most `chars` characters (never splitting a character).
fn pieces(text: &str, chars: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest
            .char_indices()
            .nth(chars)
            .map_or(rest.len(), |(at, _)| at);
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

// ---------------------------------------------------------------------------------------------
// HTTP/1.1

struct RawRequest {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawRequest {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Serves the requests of one connection until the client closes it or asks to.
async fn serve_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buf = Vec::new();
    loop {
        let Some(request) = read_request(&mut stream, &mut buf).await else {
            return;
        };
        let close = request
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let path = request.path.split('?').next().unwrap_or_default();
        let wire = match (request.method.as_str(), path) {
            ("POST", p) if p.ends_with("/chat/completions") => Some(Wire::OpenAi),
            ("POST", p) if p.ends_with("/messages") => Some(Wire::Anthropic),
            _ => None,
        };
        let response = shared.answer(wire, request);
        if matches!(response.body, Body::Held) {
            // Read until the client closes (what it sends meanwhile is ignored).
            while fill(&mut stream, &mut buf).await.is_some() {}
            return;
        }
        if write_response(&mut stream, response, close).await.is_err() || close {
            let _ = stream.shutdown().await;
            return;
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Scripted",
    }
}

async fn write_response(
    stream: &mut TcpStream,
    response: Response,
    close: bool,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\n",
        response.status,
        reason(response.status)
    );
    for (k, v) in &response.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let connection = if close { "close" } else { "keep-alive" };
    head.push_str(&format!("connection: {connection}\r\n"));
    match response.body {
        Body::Held => Ok(()),
        Body::Json(body) => {
            let body = body.to_string();
            head.push_str(&format!(
                "content-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            ));
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
            stream.flush().await
        }
        Body::Events(events) => {
            head.push_str(
                "content-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
            );
            stream.write_all(head.as_bytes()).await?;
            for event in events {
                let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                stream.write_all(chunk.as_bytes()).await?;
                stream.flush().await?;
                // Let the client read each event on its own.
                tokio::task::yield_now().await;
            }
            stream.write_all(b"0\r\n\r\n").await?;
            stream.flush().await
        }
    }
}

/// Reads more bytes into `buf`; `None` when the connection ends.
async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 8192];
    let n = stream.read(&mut chunk).await.ok()?;
    if n == 0 {
        return None;
    }
    buf.extend_from_slice(&chunk[..n]);
    Some(())
}

/// Where `needle` starts in `buf` at or after `from`, reading more until it comes.
async fn read_until(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    from: usize,
    needle: &[u8],
) -> Option<usize> {
    loop {
        if let Some(at) = buf
            .get(from..)
            .and_then(|tail| tail.windows(needle.len()).position(|w| w == needle))
        {
            return Some(from + at);
        }
        fill(stream, buf).await?;
    }
}

/// Reads one request (`Content-Length` or chunked body) from the front of `buf` and the
/// stream, leaving what follows it in `buf`.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<RawRequest> {
    let head_end = read_until(stream, buf, 0, b"\r\n\r\n").await?;
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    buf.drain(..head_end + 4);
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let path = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut request = RawRequest {
        method,
        path,
        headers,
        body: Vec::new(),
    };
    if request
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .ok()?;
    }
    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        loop {
            let line_end = read_until(stream, buf, 0, b"\r\n").await?;
            let line = String::from_utf8_lossy(&buf[..line_end]).into_owned();
            let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
            buf.drain(..line_end + 2);
            if size == 0 {
                // Trailers, if any, end with an empty line.
                loop {
                    let end = read_until(stream, buf, 0, b"\r\n").await?;
                    buf.drain(..end + 2);
                    if end == 0 {
                        break;
                    }
                }
                break;
            }
            while buf.len() < size + 2 {
                fill(stream, buf).await?;
            }
            request.body.extend(buf.drain(..size));
            buf.drain(..2);
        }
    } else {
        let length: usize = request
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < length {
            fill(stream, buf).await?;
        }
        request.body = buf.drain(..length).collect();
    }
    Some(request)
}

#[cfg(test)]
mod tests;
