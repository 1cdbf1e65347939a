//! The OpenAI Chat Completions client, for OpenAI and any compatible server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use ba_protocol::convert::log_to_openai;
use ba_protocol::openai::{ChatMessage, ChatResponse, ChatUsage};
use ba_protocol::stream::openai::{ChatChunk, ChunkChoice, ChunkDelta, OpenAiAccumulator};
use ba_protocol::stream::partial_json;
use ba_protocol::stream::sse::SseEvent;
use ba_protocol::{ContentBlock, LogRole, Message, Role};
use serde_json::{Value, json};

use super::compat::{self, LenientChunks, OpenAiCompat};
use super::error::{ModelError, PartialOutput, PartialToolCall};
use super::http::{ApiKey, HttpConfig, Transport};
use super::sse::{StreamState, read_stream};
use super::{DeltaSink, ModelClient, ModelRequest, ModelResponse, StreamDelta};
use ba_protocol::{ApproxCounter, TokenCounter, Usage};

const PROVIDER: &str = "openai";

/// Block indexes of OpenAI deltas: the stream has no blocks, so text, reasoning and each tool
/// call get fixed indexes.
const TEXT_INDEX: usize = 0;
const REASONING_INDEX: usize = 1;
const FIRST_CALL_INDEX: usize = 2;

/// A client of the Chat Completions API (`POST {base}/chat/completions`).
///
/// Which optional request fields it sends is its [`OpenAiCompat`] profile: OpenAI's by
/// default, [`OpenAiCompat::server`] (through [`OpenAiClient::compat`] or
/// [`OpenAiClient::with_compat`]) for local and other compatible servers. Answers are read
/// leniently either way: tool arguments given as JSON objects, calls without ids or indexes,
/// ids and names repeated in every delta, no usage, calls made under `finish_reason: "stop"`.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    transport: Transport,
    key: Option<ApiKey>,
    base_url: String,
    compat: OpenAiCompat,
    /// Set once the server refused `stream_options`: later streams go without it.
    refuses_stream_usage: Arc<AtomicBool>,
    counter: Counter,
}

/// The counter of the usage estimated for answers that came without one.
#[derive(Clone)]
struct Counter(Arc<dyn TokenCounter>);

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name())
    }
}

impl OpenAiClient {
    /// The public API.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";
    /// The environment variable the key is read from by [`OpenAiClient::from_env`].
    pub const KEY_VAR: &'static str = "OPENAI_API_KEY";

    /// A client with this key (`None` for a local server that wants none), the public base
    /// URL and default timeouts and retries.
    pub fn new(key: Option<ApiKey>) -> Result<Self, ModelError> {
        Ok(Self {
            transport: Transport::new(PROVIDER, HttpConfig::default(), Self::DEFAULT_BASE_URL)?,
            key,
            base_url: Self::DEFAULT_BASE_URL.to_owned(),
            compat: OpenAiCompat::openai(),
            refuses_stream_usage: Arc::default(),
            counter: Counter(Arc::new(ApproxCounter)),
        })
    }

    /// A client with the `compat` profile ([`OpenAiCompat::server`]), for vLLM, llama.cpp's
    /// server, Ollama's `/v1`, LM Studio and other compatible servers; give the base URL with
    /// [`OpenAiClient::with_base_url`].
    pub fn compat(key: Option<ApiKey>) -> Result<Self, ModelError> {
        Ok(Self::new(key)?.with_compat(OpenAiCompat::server()))
    }

    /// Sends the optional request fields `compat` says.
    pub fn with_compat(mut self, compat: OpenAiCompat) -> Self {
        self.compat = compat;
        self
    }

    /// The profile the requests are written with.
    pub fn compat_profile(&self) -> OpenAiCompat {
        self.compat
    }

    /// A client with the key from `OPENAI_API_KEY`.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::new(Some(ApiKey::from_env(Self::KEY_VAR, PROVIDER)?))
    }

    /// Sends to another base URL (the part before `/chat/completions`); a trailing `/` is
    /// ignored. Fails when it is not an `http` or `https` URL.
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Result<Self, ModelError> {
        let base_url = base_url.into().trim_end_matches('/').to_owned();
        self.transport = Transport::new(PROVIDER, self.transport.config, &base_url)?;
        self.base_url = base_url;
        Ok(self)
    }

    /// Sets the timeouts and retry policy.
    pub fn with_http(mut self, config: HttpConfig) -> Self {
        self.transport.config = config;
        self
    }

    /// Sends the output cap as `max_completion_tokens` (OpenAI's reasoning models require it)
    /// instead of `max_tokens` (which every compatible server reads).
    pub fn with_max_completion_tokens(mut self, yes: bool) -> Self {
        self.compat.max_completion_tokens = yes;
        self
    }

    /// Whether a thinking budget is sent as `reasoning_effort` (on by default; servers that
    /// reject the field need it off).
    pub fn with_reasoning_effort(mut self, yes: bool) -> Self {
        self.compat.reasoning_effort = yes;
        self
    }

    /// Whether a request's cache key is sent as `prompt_cache_key`. By default it is sent to
    /// OpenAI's own API only: a compatible server may refuse a field it does not know.
    pub fn with_prompt_cache_key(mut self, yes: bool) -> Self {
        self.compat.prompt_cache_key = Some(yes);
        self
    }

    /// Whether streams ask for a final usage chunk (`stream_options`; on by default).
    pub fn with_stream_usage(mut self, yes: bool) -> Self {
        self.compat.stream_usage = yes;
        self
    }

    /// The counter of the usage reported for an answer that came without one (marked
    /// [`Usage::estimated`]); a rough four-bytes-a-token count unless set.
    pub fn with_token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = Counter(counter);
        self
    }

    fn asks_stream_usage(&self) -> bool {
        self.compat.stream_usage && !self.refuses_stream_usage.load(Ordering::Relaxed)
    }

    fn sends_cache_key(&self) -> bool {
        self.compat
            .prompt_cache_key
            .unwrap_or_else(|| self.base_url.starts_with("https://api.openai.com"))
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let converted = log_to_openai(&request.context_entries());
        for loss in &converted.losses {
            tracing::debug!(path = %loss.path, what = %loss.what, "not sent to OpenAI");
        }
        let mut body = converted.value;
        if let Some(system) = &request.system {
            body.messages
                .insert(0, ChatMessage::new(LogRole::System, system.clone()));
        }
        let extra = &mut body.extra;
        extra.insert("model".to_owned(), json!(request.model));
        let cap = if self.compat.max_completion_tokens {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        extra.insert(cap.to_owned(), json!(request.max_tokens));
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    }})
                })
                .collect();
            extra.insert("tools".to_owned(), Value::Array(tools));
        }
        if let (Some(budget), true) = (request.thinking_budget, self.compat.reasoning_effort) {
            // Chat Completions has no token budget for reasoning, only an effort level.
            extra.insert("reasoning_effort".to_owned(), json!(effort_of(budget)));
        }
        if request.stream {
            extra.insert("stream".to_owned(), Value::Bool(true));
            if self.asks_stream_usage() {
                extra.insert("stream_options".to_owned(), json!({"include_usage": true}));
            }
        }
        // OpenAI caches prompt prefixes by itself; the key routes one conversation's calls to
        // the same cache.
        if let Some(key) = request.cache.as_ref().and_then(|c| c.key.as_ref())
            && self.sends_cache_key()
        {
            extra.insert("prompt_cache_key".to_owned(), json!(key));
        }
        serde_json::to_value(&body).unwrap_or(Value::Null)
    }
}

#[async_trait]
impl ModelClient for OpenAiClient {
    fn provider(&self) -> &str {
        PROVIDER
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let url = format!("{}/chat/completions", self.base_url);
        let body = self.request_body(request);
        let sent = match self
            .transport
            .send_bearer(&url, self.key.as_ref(), &body)
            .await
        {
            Err(ModelError::Rejected { message, .. })
                if body.get("stream_options").is_some() && names_stream_usage(&message) =>
            {
                // Learnt once for this client: the server takes no `stream_options`.
                tracing::info!(
                    base_url = %self.base_url,
                    "the server refused stream_options; streams go on without it"
                );
                self.refuses_stream_usage.store(true, Ordering::Relaxed);
                let body = self.request_body(request);
                self.transport
                    .send_bearer(&url, self.key.as_ref(), &body)
                    .await
            }
            other => other,
        };
        let (response, retries, deadline, call_deadline) = sent?;
        let mut answer = if request.stream && Transport::streams(&response) {
            read_stream(
                &self.transport,
                response,
                OpenAiStream::default(),
                on_delta,
                retries,
                call_deadline,
            )
            .await?
        } else {
            let mut value: Value = self
                .transport
                .body_json(response, deadline, "a chat completion")
                .await?;
            compat::lenient_response(&mut value);
            let parsed: ChatResponse = serde_json::from_value(value)
                .map_err(|e| invalid(format!("the body is not a chat completion: {e}")))?;
            to_response(parsed, retries, Vec::new())?
        };
        if answer.usage == Usage::default() {
            answer.usage = super::estimated_usage(&*self.counter.0, request, &answer.message);
        }
        Ok(answer)
    }

    async fn context_window(&self, model: &str) -> Option<u64> {
        self.transport
            .served_window(&self.base_url, self.key.as_ref(), model)
            .await
    }
}

/// Whether a refusal names the field that asks for a stream's usage.
fn names_stream_usage(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    message.contains("stream_options") || message.contains("include_usage")
}

/// The token figures llama.cpp's server gives in `timings` when no usage was asked for:
/// prompt tokens evaluated (`prompt_n`), read from its cache (`cache_n`) and written
/// (`predicted_n`).
fn usage_of_timings(timings: &Value) -> Option<Usage> {
    let n = |k: &str| timings.get(k).and_then(Value::as_u64);
    let usage = Usage {
        input_tokens: n("prompt_n")?,
        output_tokens: n("predicted_n")?,
        cache_read_tokens: n("cache_n").unwrap_or(0),
        ..Usage::default()
    };
    (usage != Usage::default()).then_some(usage)
}

/// The reasoning text compatible servers stream beside the content.
fn reasoning_of(extra: &ba_protocol::JsonMap) -> Option<&str> {
    extra
        .get("reasoning_content")
        .or_else(|| extra.get("reasoning"))
        .and_then(Value::as_str)
}

fn to_response(
    parsed: ChatResponse,
    retries: u32,
    mut problems: Vec<String>,
) -> Result<ModelResponse, ModelError> {
    let choice = parsed
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ModelError::InvalidResponse {
            provider: PROVIDER.to_owned(),
            message: "the response has no choice".to_owned(),
            partial: None,
        })?;
    let message = to_message(&choice.message, &mut problems);
    let made_calls = message
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolUse(_)));
    Ok(ModelResponse {
        message: message.with_id(parsed.id.clone()),
        stop_reason: compat::stop_reason(choice.finish_reason.as_deref(), made_calls),
        usage: parsed
            .usage
            .as_ref()
            .map(usage)
            .or_else(|| parsed.extra.get("timings").and_then(usage_of_timings))
            .unwrap_or_default(),
        id: parsed.id,
        model: parsed.model,
        retries,
        problems,
    })
}

fn to_message(message: &ChatMessage, problems: &mut Vec<String>) -> Message {
    let mut blocks = Vec::new();
    if let Some(reasoning) = reasoning_of(&message.extra).filter(|r| !r.is_empty()) {
        blocks.push(ContentBlock::thinking(reasoning, None));
    }
    if let Some(content) = &message.content {
        let text = content.to_text();
        if !text.is_empty() {
            blocks.push(ContentBlock::text(text.into_owned()));
        }
    }
    if let Some(refusal) = message.extra.get("refusal").and_then(Value::as_str) {
        blocks.push(ContentBlock::text(refusal));
    }
    for call in message.tool_calls.iter().flatten() {
        let input = call_input(&call.function.arguments, &call.id, problems);
        blocks.push(ContentBlock::tool_use(
            call.id.clone(),
            call.function.name.clone(),
            input,
        ));
    }
    Message::new(Role::Assistant, blocks)
}

/// The effort level the OpenAI APIs take for a thinking budget: they have no token budget for
/// reasoning.
pub(super) fn effort_of(budget: u32) -> &'static str {
    match budget {
        0..2048 => "low",
        2048..8192 => "medium",
        _ => "high",
    }
}

/// A call's JSON-string arguments as the tool's input: `{}` when empty, repaired as far as
/// they go (and said in `problems`) when they are not valid JSON.
pub(super) fn call_input(raw: &str, call_id: &str, problems: &mut Vec<String>) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    serde_json::from_str(raw).unwrap_or_else(|e| {
        problems.push(format!(
            "arguments of tool call `{call_id}` are not valid JSON ({e}); repaired as far as they go"
        ));
        partial_json::repair(raw).unwrap_or_else(|| Value::String(raw.to_owned()))
    })
}

fn usage(u: &ChatUsage) -> Usage {
    let cached = u
        .extra
        .get("prompt_tokens_details")
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Usage {
        // OpenAI counts cache reads inside the prompt; split them out as Anthropic does.
        input_tokens: u.prompt_tokens.saturating_sub(cached),
        output_tokens: u.completion_tokens,
        cache_read_tokens: cached,
        ..Usage::default()
    }
}

/// One chunk stream: the protocol accumulator, plus what the deltas need (which calls have
/// been announced, their raw arguments so far).
#[derive(Debug, Default)]
struct OpenAiStream {
    acc: OpenAiAccumulator,
    lenient: LenientChunks,
    calls: BTreeMap<usize, PartialToolCall>,
    announced: BTreeMap<usize, bool>,
    finish_reason: Option<String>,
    /// llama.cpp's `timings` of the last chunk that had them.
    timings: Option<Value>,
}

impl StreamState for OpenAiStream {
    fn push(&mut self, event: &SseEvent, on_delta: &mut DeltaSink<'_>) -> Result<(), ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return self.acc.push_sse(event).map_err(|e| invalid(e.to_string()));
        }
        let mut value: Value = serde_json::from_str(data)
            .map_err(|e| invalid(format!("a stream chunk is not JSON: {e}")))?;
        if let Some(error) = value.get("error") {
            let body = json!({"error": error}).to_string();
            let (kind, message) = super::http::provider_error(&body);
            if let Some(overflow) = super::overflow::read(400, &body) {
                return Err(ModelError::ContextOverflow {
                    provider: PROVIDER.to_owned(),
                    limit: overflow.limit,
                    requested: overflow.requested,
                    message,
                });
            }
            return Err(ModelError::Server {
                provider: PROVIDER.to_owned(),
                status: 500,
                message: format!("{kind}: {message}"),
                attempts: 1,
                partial: None,
            });
        }
        if let Some(timings) = value.get("timings") {
            self.timings = Some(timings.clone());
        }
        self.lenient.chunk(&mut value);
        let chunk: ChatChunk = serde_json::from_value(value).map_err(|e| {
            invalid(format!(
                "a stream chunk is not a chat.completion.chunk: {e}"
            ))
        })?;
        for choice in chunk.choices.iter().filter(|c| c.index == 0) {
            let delta = &choice.delta;
            if let Some(text) = reasoning_of(&delta.extra).filter(|t| !t.is_empty()) {
                on_delta(StreamDelta::Thinking {
                    index: REASONING_INDEX,
                    text: text.to_owned(),
                });
            }
            if let Some(text) = delta.content.as_ref().filter(|t| !t.is_empty()) {
                on_delta(StreamDelta::Text {
                    index: TEXT_INDEX,
                    text: text.clone(),
                });
            }
            for call in delta.tool_calls.iter().flatten() {
                let index = FIRST_CALL_INDEX + call.index;
                let entry = self.calls.entry(index).or_insert_with(|| PartialToolCall {
                    id: String::new(),
                    name: String::new(),
                    partial_json: String::new(),
                });
                if let Some(id) = &call.id {
                    entry.id.clone_from(id);
                }
                let function = call.function.as_ref();
                if let Some(name) = function.and_then(|f| f.name.as_ref()) {
                    entry.name.push_str(name);
                }
                let announced = self.announced.entry(index).or_default();
                if !*announced && !entry.id.is_empty() && !entry.name.is_empty() {
                    *announced = true;
                    on_delta(StreamDelta::ToolCallStarted {
                        index,
                        id: entry.id.clone(),
                        name: entry.name.clone(),
                    });
                }
                if let Some(args) = function.and_then(|f| f.arguments.as_ref()) {
                    entry.partial_json.push_str(args);
                    if !args.is_empty() {
                        on_delta(StreamDelta::ToolInput {
                            index,
                            partial_json: args.clone(),
                        });
                    }
                }
            }
            if choice.finish_reason.is_some() {
                self.finish_reason.clone_from(&choice.finish_reason);
            }
        }
        self.acc.push(chunk);
        Ok(())
    }

    fn into_partial(self) -> PartialOutput {
        let text = self.acc.partial_text();
        let mut ignored = Vec::new();
        let message = self
            .acc
            .finish()
            .ok()
            .and_then(|a| a.message.choices.into_iter().next())
            .map(|choice| to_message(&choice.message, &mut ignored));
        let cut_tool_calls = self
            .calls
            .into_values()
            .filter(|c| serde_json::from_str::<Value>(&c.partial_json).is_err())
            .collect();
        PartialOutput {
            text,
            message,
            cut_tool_calls,
        }
    }

    fn finish(mut self, retries: u32) -> Result<ModelResponse, ModelError> {
        if self.finish_reason.is_none() && !self.acc.saw_done() {
            let message = "the stream ended without a finish_reason or [DONE]".to_owned();
            return Err(ModelError::StreamCut {
                provider: PROVIDER.to_owned(),
                message,
                partial: Box::new(self.into_partial()),
            });
        }
        if self.finish_reason.is_none() {
            // `[DONE]` without a finish_reason (some servers never send one): the answer is
            // complete; whether it stopped for its calls is decided like a `stop`.
            self.acc.push(ChatChunk {
                id: String::new(),
                model: String::new(),
                choices: vec![ChunkChoice {
                    index: 0,
                    delta: ChunkDelta::default(),
                    finish_reason: Some("stop".to_owned()),
                }],
                usage: None,
                extra: ba_protocol::JsonMap::new(),
            });
        }
        let accumulated = self.acc.finish().map_err(|e| ModelError::StreamCut {
            provider: PROVIDER.to_owned(),
            message: e.to_string(),
            partial: Box::default(),
        })?;
        let mut response = to_response(accumulated.message, retries, accumulated.problems)?;
        if response.usage == Usage::default()
            && let Some(usage) = self.timings.as_ref().and_then(usage_of_timings)
        {
            response.usage = usage;
        }
        if response.message.content.is_empty() && response.usage == Usage::default() {
            return Err(ModelError::InvalidResponse {
                provider: PROVIDER.to_owned(),
                message: "the stream carried no content".to_owned(),
                partial: None,
            });
        }
        Ok(response)
    }
}

fn invalid(message: String) -> ModelError {
    ModelError::InvalidResponse {
        provider: PROVIDER.to_owned(),
        message,
        partial: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::LogEntry;
    use ba_protocol::ToolSpec;

    #[test]
    fn body_has_system_first_tools_as_functions_and_usage_in_streams() {
        let client = OpenAiClient::new(None).unwrap();
        let request = ModelRequest::new(
            "gpt-x",
            vec![LogEntry::new("u", LogRole::User, "t").with_text("Hi")],
        )
        .with_system("Be brief.")
        .with_tools(vec![ToolSpec::new(
            "calc",
            "Adds.",
            json!({"type": "object"}),
        )])
        .with_thinking_budget(4000)
        .with_stream(true);
        let body = client.request_body(&request);
        assert_eq!(
            body["messages"],
            json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
        );
        assert_eq!(
            body["tools"][0]["function"]["parameters"],
            json!({"type": "object"})
        );
        assert_eq!(body["reasoning_effort"], json!("medium"));
        assert_eq!(body["stream_options"]["include_usage"], json!(true));
        assert_eq!(body["max_tokens"], json!(4096));
        let body = client
            .with_max_completion_tokens(true)
            .request_body(&request);
        assert_eq!(body["max_completion_tokens"], json!(4096));
        assert!(body.get("max_tokens").is_none());
    }

    #[test]
    fn cached_prompt_tokens_are_split_out() {
        let u: ChatUsage = serde_json::from_value(json!({
            "prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107,
            "prompt_tokens_details": {"cached_tokens": 60}
        }))
        .unwrap();
        assert_eq!(
            usage(&u),
            Usage {
                input_tokens: 40,
                output_tokens: 7,
                cache_read_tokens: 60,
                cache_write_tokens: 0,
                estimated: false,
            }
        );
    }
}
