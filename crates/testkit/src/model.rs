//! A model that decides, for tests: [`ScriptedModel`] is an HTTP server on 127.0.0.1 that
//! speaks three wires: the Anthropic Messages API (`POST /v1/messages`), OpenAI Chat
//! Completions (`POST /v1/chat/completions`) and the OpenAI Responses API
//! (`POST /v1/responses`), each as one JSON body or as a server-sent event stream when the
//! request says `"stream": true`. It answers every request by rules over what the request
//! says ([`Request`]: which tools are offered, which uploads the last user message names, what
//! the last tool result said, how many assistant turns there have been since the user spoke)
//! rather than by replaying a recording, so the same script serves every wire, streaming or
//! not, whatever the client around it sends first.
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
//! // `model.openai_base_url()`, a Responses API one at `model.responses_base_url()`;
//! // afterwards scan what the model was shown:
//! for request in model.requests() {
//!     assert!(!request.system().contains("/home/"));
//! }
//! # }
//! ```
//!
//! It also serves OpenAI-compatible embeddings (`POST /v1/embeddings`): a hashed bag of words
//! per input ([`hashed_embedding`], so texts that share words are close), or a fault set with
//! [`Builder::embeddings`] / [`ScriptedModel::set_embeddings`] ([`EmbeddingsReply`]: an error
//! status, a vector too few, a dimension that differs, a number that is not finite, an answer
//! too large); [`ScriptedModel::embedding_requests`] lists what was embedded.
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
//! usage chunk when `stream_options.include_usage` asks for one, then `data: [DONE]`; and on
//! the Responses API a `response` object whose `output` holds `reasoning` (a summary and an
//! `encrypted_content`), `message` (`output_text`) and `function_call` items, streamed as
//! typed events with an increasing `sequence_number`: `response.created`,
//! `response.in_progress`, then for each item `response.output_item.added`, its parts and
//! deltas (`response.reasoning_summary_part.added`, `response.reasoning_summary_text.delta` /
//! `.done`, `response.reasoning_summary_part.done`; `response.content_part.added`,
//! `response.output_text.delta` / `.done`, `response.content_part.done`;
//! `response.function_call_arguments.delta` / `.done`) and `response.output_item.done`, and
//! last `response.completed` (`response.incomplete` when the turn stopped for its token
//! limit), with no `[DONE]`. Streams go out with `transfer-encoding: chunked`, one event per
//! chunk; connections are kept alive between requests unless the client asks to close.

#![warn(missing_docs, missing_debug_implementations)]

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

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
    embeddings: EmbeddingsReply,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.rules.iter().map(|r| r.name.as_str()).collect();
        f.debug_struct("Builder")
            .field("rules", &names)
            .field("embeddings", &self.embeddings)
            .finish()
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

    /// How `POST /v1/embeddings` answers (hashed vectors unless told otherwise; see
    /// [`ScriptedModel::set_embeddings`] to change it later).
    pub fn embeddings(mut self, reply: EmbeddingsReply) -> Self {
        self.embeddings = reply;
        self
    }

    /// Binds 127.0.0.1 on a free port and starts serving (on the current tokio runtime).
    pub async fn start(self) -> ScriptedModel {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            rules: self.rules,
            log: Mutex::new(Vec::new()),
            embeddings: Mutex::new(self.embeddings),
            embedded: Mutex::new(Vec::new()),
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
    embeddings: Mutex<EmbeddingsReply>,
    /// The embeddings requests, in order.
    embedded: Mutex<Vec<EmbeddingRequest>>,
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
        Builder {
            rules: Vec::new(),
            embeddings: EmbeddingsReply::default(),
        }
    }

    /// `http://127.0.0.1:<port>`: the server answers `/v1/messages`, `/v1/chat/completions`
    /// and `/v1/responses` (and `/messages`, `/chat/completions`, `/responses`) under it.
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

    /// The base URL for an OpenAI Responses API client (which appends `/responses`): `…/v1`.
    pub fn responses_base_url(&self) -> String {
        format!("{}/v1", self.base_url)
    }

    /// The base URL for an OpenAI-compatible embeddings client (which appends `/embeddings`):
    /// `…/v1`.
    pub fn embeddings_base_url(&self) -> String {
        format!("{}/v1", self.base_url)
    }

    /// How `POST /v1/embeddings` answers from now on.
    pub fn set_embeddings(&self, reply: EmbeddingsReply) {
        *self.shared.embeddings.lock().unwrap() = reply;
    }

    /// Every embeddings request received so far, in order (these are not in
    /// [`ScriptedModel::requests`]).
    pub fn embedding_requests(&self) -> Vec<EmbeddingRequest> {
        self.shared.embedded.lock().unwrap().clone()
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
    fn embed(&self, request: &RawRequest) -> Response {
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return error_reply(Wire::OpenAi, 400, "the request body is not JSON", true);
        };
        let texts = embeddings::inputs(&body);
        let model = body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        self.embedded.lock().unwrap().push(EmbeddingRequest {
            model: model.clone(),
            input: texts.clone(),
            headers: request.headers.clone(),
        });
        let how = self.embeddings.lock().unwrap().clone();
        embeddings::reply(&how, &model, &texts)
    }

    fn answer(&self, wire: Option<Wire>, request: RawRequest) -> Response {
        let Some(wire) = wire else {
            return Response::json(
                404,
                json!({"error": {"type": "not_found_error",
                    "message": format!("the scripted model serves POST /v1/messages, POST /v1/chat/completions and POST /v1/responses, not {} {}", request.method, request.path)}}),
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
            Wire::OpenAi | Wire::Responses => "call_scripted_",
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
            cached_tokens: turn.cached_tokens,
            cache_write_tokens: turn.cache_write_tokens,
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
            (Wire::Responses, false) => Body::Json(answer.responses_json()),
            (Wire::Responses, true) => Body::Events(answer.responses_events()),
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
        Wire::OpenAi | Wire::Responses => {
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

/// One answer, ready to be written on any wire.
struct Answer {
    index: usize,
    model: String,
    thinking: Option<String>,
    text: Option<String>,
    calls: Vec<Call>,
    /// Input tokens not read from the prompt cache.
    input_tokens: u64,
    output_tokens: u64,
    /// Input tokens read from the prompt cache.
    cached_tokens: u64,
    /// Input tokens written to the prompt cache (Anthropic only).
    cache_write_tokens: u64,
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
        json!({"input_tokens": self.input_tokens, "cache_creation_input_tokens": self.cache_write_tokens,
            "cache_read_input_tokens": self.cached_tokens, "output_tokens": output_tokens})
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
        let prompt_tokens = self.input_tokens + self.cached_tokens;
        json!({"prompt_tokens": prompt_tokens, "completion_tokens": self.output_tokens,
            "total_tokens": prompt_tokens + self.output_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
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

mod embeddings;
mod http;
mod request;
mod responses;
mod turn;

pub use self::embeddings::{EMBEDDING_DIM, EmbeddingRequest, EmbeddingsReply, hashed_embedding};
use self::http::{RawRequest, serve_connection};
pub use self::request::{Call, Message, Request, Role, ToolResult, Wire, upload_ids};
pub use self::turn::Turn;

#[cfg(test)]
mod tests;
