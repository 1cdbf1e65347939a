//! The OpenAI Responses API client (`POST {base}/responses`).

use std::collections::BTreeMap;

use async_trait::async_trait;
use ba_protocol::convert::{log_to_responses, reasoning_block};
use ba_protocol::responses::{
    MessageContent, MessageItem, ResponseItem, ResponsesInput, ResponsesResponse, ResponsesUsage,
};
use ba_protocol::stream::responses::{ResponsesAccumulator, ResponsesStreamEvent};
use ba_protocol::stream::sse::SseEvent;
use ba_protocol::{ContentBlock, JsonMap, LogRole, Message, Role, Usage};
use serde_json::{Value, json};

use super::error::{ModelError, PartialOutput, PartialToolCall};
use super::http::{ApiKey, HttpConfig, Transport};
use super::openai::{call_input, effort_of};
use super::sse::{StreamState, read_stream};
use super::{DeltaSink, ModelClient, ModelRequest, ModelResponse, StopReason, StreamDelta};

const PROVIDER: &str = "openai-responses";

/// A client of OpenAI's Responses API, the API of OpenAI's own agents.
///
/// Each call sends the whole conversation (`store: false` by default: nothing is kept on
/// OpenAI's side, so no `previous_response_id`), asks for the reasoning back encrypted
/// (`include: ["reasoning.encrypted_content"]`) and sends the reasoning items of earlier
/// answers with the conversation, so the model keeps its reasoning across tool calls. The
/// request's cache key goes as `prompt_cache_key`; cached input tokens are reported as cache
/// reads. Timeouts, retries and the bound on the answer's size are the shared
/// [`HttpConfig`]'s.
#[derive(Debug, Clone)]
pub struct ResponsesClient {
    transport: Transport,
    key: Option<ApiKey>,
    base_url: String,
    store: bool,
    prompt_cache_key: bool,
}

impl ResponsesClient {
    /// The public API.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";
    /// The environment variable the key is read from by [`ResponsesClient::from_env`].
    pub const KEY_VAR: &'static str = "OPENAI_API_KEY";

    /// A client with this key (`None` for a local server that wants none), the public base
    /// URL and default timeouts and retries.
    pub fn new(key: Option<ApiKey>) -> Result<Self, ModelError> {
        Ok(Self {
            transport: Transport::new(PROVIDER, HttpConfig::default(), Self::DEFAULT_BASE_URL)?,
            key,
            base_url: Self::DEFAULT_BASE_URL.to_owned(),
            store: false,
            prompt_cache_key: true,
        })
    }

    /// A client with the key from `OPENAI_API_KEY`.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::new(Some(ApiKey::from_env(Self::KEY_VAR, PROVIDER)?))
    }

    /// Sends to another base URL (the part before `/responses`); a trailing `/` is ignored.
    /// Fails when it is not an `http` or `https` URL.
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

    /// Whether OpenAI may store the responses (`store`; off by default). The conversation is
    /// sent whole either way.
    pub fn with_store(mut self, yes: bool) -> Self {
        self.store = yes;
        self
    }

    /// Whether a request's cache key is sent as `prompt_cache_key` (on by default).
    pub fn with_prompt_cache_key(mut self, yes: bool) -> Self {
        self.prompt_cache_key = yes;
        self
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let converted = log_to_responses(&request.context_entries());
        for loss in &converted.losses {
            tracing::debug!(path = %loss.path, what = %loss.what, "not sent to the Responses API");
        }
        let mut body = converted.value;
        let mut items = match std::mem::replace(&mut body.input, ResponsesInput::Items(Vec::new()))
        {
            ResponsesInput::Items(items) => items,
            ResponsesInput::Text(text) => vec![user_text(text)],
        };
        let has_reasoning = items
            .iter()
            .any(|i| matches!(i, ResponseItem::Reasoning(_)));
        match (&request.system, body.instructions.take()) {
            (Some(system), Some(logged)) => {
                body.instructions = Some(system.clone());
                items.insert(0, system_text(logged));
            }
            (Some(system), None) => body.instructions = Some(system.clone()),
            (None, logged) => body.instructions = logged,
        }
        body.input = ResponsesInput::Items(items);
        let extra = &mut body.extra;
        extra.insert("model".to_owned(), json!(request.model));
        extra.insert("max_output_tokens".to_owned(), json!(request.max_tokens));
        extra.insert("store".to_owned(), json!(self.store));
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                // `strict` said outright: the published schema requires it, and strict
                // validation (every property required, no others) is not what the tools'
                // schemas are written for.
                .map(|t| {
                    json!({"type": "function", "name": t.name, "description": t.description,
                           "parameters": t.input_schema, "strict": false})
                })
                .collect();
            extra.insert("tools".to_owned(), Value::Array(tools));
        }
        if let Some(budget) = request.thinking_budget {
            extra.insert(
                "reasoning".to_owned(),
                json!({"effort": effort_of(budget), "summary": "auto"}),
            );
        }
        if !self.store && (request.thinking_budget.is_some() || has_reasoning) {
            // Without storage the reasoning comes back only encrypted, and only when asked.
            extra.insert("include".to_owned(), json!(["reasoning.encrypted_content"]));
        }
        if request.stream {
            extra.insert("stream".to_owned(), Value::Bool(true));
        }
        if let Some(key) = request.cache.as_ref().and_then(|c| c.key.as_ref())
            && self.prompt_cache_key
        {
            extra.insert("prompt_cache_key".to_owned(), json!(key));
        }
        serde_json::to_value(&body).unwrap_or(Value::Null)
    }
}

fn user_text(text: String) -> ResponseItem {
    ResponseItem::Message(MessageItem {
        role: LogRole::User,
        content: MessageContent::Text(text),
        typed: true,
        extra: JsonMap::new(),
    })
}

fn system_text(text: String) -> ResponseItem {
    ResponseItem::Message(MessageItem {
        role: LogRole::System,
        content: MessageContent::Text(text),
        typed: true,
        extra: JsonMap::new(),
    })
}

#[async_trait]
impl ModelClient for ResponsesClient {
    fn provider(&self) -> &str {
        PROVIDER
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let body = self.request_body(request);
        let url = format!("{}/responses", self.base_url);
        let (response, retries, deadline, call_deadline) = self
            .transport
            .send_bearer(&url, self.key.as_ref(), &body)
            .await?;
        if request.stream && Transport::streams(&response) {
            return read_stream(
                &self.transport,
                response,
                ResponsesStream::default(),
                on_delta,
                retries,
                call_deadline,
            )
            .await;
        }
        let parsed: ResponsesResponse = self
            .transport
            .body_json(response, deadline, "a response")
            .await?;
        to_response(parsed, retries, Vec::new())
    }

    async fn context_window(&self, model: &str) -> Option<u64> {
        self.transport
            .served_window(&self.base_url, self.key.as_ref(), model)
            .await
    }
}

fn failed(message: String) -> ModelError {
    ModelError::Server {
        provider: PROVIDER.to_owned(),
        status: 500,
        message,
        attempts: 1,
        partial: None,
    }
}

fn to_response(
    parsed: ResponsesResponse,
    retries: u32,
    mut problems: Vec<String>,
) -> Result<ModelResponse, ModelError> {
    if parsed.status.as_deref() == Some("failed") {
        let error = parsed.extra.get("error");
        let message = error
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("the response failed");
        let code = error
            .and_then(|e| e.get("code"))
            .and_then(Value::as_str)
            .unwrap_or("failed");
        return Err(failed(format!("{code}: {message}")));
    }
    let (message, refused) = to_message(&parsed.output, &mut problems);
    let calls = message
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolUse(_)));
    let stop_reason = match (parsed.incomplete_reason(), calls, refused) {
        (Some("max_output_tokens"), _, _) => StopReason::MaxTokens,
        (Some("content_filter"), _, _) => StopReason::Refusal,
        (Some(other), _, _) => StopReason::Other(other.to_owned()),
        (None, true, _) => StopReason::ToolUse,
        (None, false, true) => StopReason::Refusal,
        (None, false, false) => StopReason::EndTurn,
    };
    Ok(ModelResponse {
        message: message.with_id(parsed.id.clone()),
        stop_reason,
        usage: parsed.usage.as_ref().map(usage).unwrap_or_default(),
        id: parsed.id,
        model: parsed.model.unwrap_or_default(),
        retries,
        problems,
    })
}

/// The output items as one assistant message: reasoning items as thinking blocks that keep
/// the item (and its encrypted content) for the next request, text and refusals as text, calls
/// as tool-use blocks with the `call_id`. Also says whether the model refused.
fn to_message(output: &[ResponseItem], problems: &mut Vec<String>) -> (Message, bool) {
    let mut blocks = Vec::new();
    let mut refused = false;
    for item in output {
        match item {
            ResponseItem::Reasoning(r) => blocks.push(reasoning_block(r)),
            ResponseItem::Message(m) => match &m.content {
                MessageContent::Text(text) => blocks.push(ContentBlock::text(text.clone())),
                MessageContent::Parts(parts) => {
                    for part in parts {
                        let text = part.get("text").and_then(Value::as_str);
                        let refusal = part.get("refusal").and_then(Value::as_str);
                        refused |= refusal.is_some();
                        if let Some(text) = text.or(refusal) {
                            blocks.push(ContentBlock::text(text));
                        }
                    }
                }
            },
            ResponseItem::FunctionCall(c) => {
                let input = call_input(&c.arguments, &c.call_id, problems);
                blocks.push(ContentBlock::tool_use(
                    c.call_id.clone(),
                    c.name.clone(),
                    input,
                ));
            }
            ResponseItem::FunctionCallOutput(_) | ResponseItem::Other(_) => {
                problems.push(format!(
                    "an output item of kind `{}` was left out of the answer",
                    item.kind()
                ));
            }
        }
    }
    (Message::new(Role::Assistant, blocks), refused)
}

fn usage(u: &ResponsesUsage) -> Usage {
    let cached = u.cached_tokens();
    Usage {
        // The Responses API counts cache reads inside the input; split them out as Anthropic
        // does.
        input_tokens: u.input_tokens.saturating_sub(cached),
        output_tokens: u.output_tokens,
        cache_read_tokens: cached,
        cache_write_tokens: 0,
        estimated: false,
    }
}

/// One event stream: the protocol accumulator, and the calls announced so far (for deltas
/// and for what a cut stream left).
#[derive(Debug, Default)]
struct ResponsesStream {
    acc: ResponsesAccumulator,
    calls: BTreeMap<usize, PartialToolCall>,
}

impl StreamState for ResponsesStream {
    fn push(&mut self, event: &SseEvent, on_delta: &mut DeltaSink<'_>) -> Result<(), ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let parsed =
            ResponsesStreamEvent::from_json(data).map_err(|e| ModelError::InvalidResponse {
                provider: PROVIDER.to_owned(),
                message: e.to_string(),
                partial: None,
            })?;
        let index = parsed.output_index.unwrap_or(0);
        let delta = || parsed.delta.clone().unwrap_or_default();
        match parsed.kind.as_str() {
            "error" => {
                self.acc.push(&parsed);
                return Err(failed(
                    self.acc
                        .error()
                        .unwrap_or_else(|| "the stream reported an error".to_owned()),
                ));
            }
            "response.failed" => {
                self.acc.push(&parsed);
                return Err(failed(
                    self.acc
                        .error()
                        .unwrap_or_else(|| "the response failed".to_owned()),
                ));
            }
            "response.output_item.added" => {
                let item = parsed.item.as_ref();
                let field = |k: &str| {
                    item.and_then(|i| i.get(k))
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                };
                if field("type") == "function_call" {
                    let call = PartialToolCall {
                        id: field("call_id"),
                        name: field("name"),
                        partial_json: String::new(),
                    };
                    on_delta(StreamDelta::ToolCallStarted {
                        index,
                        id: call.id.clone(),
                        name: call.name.clone(),
                    });
                    self.calls.insert(index, call);
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                on_delta(StreamDelta::Text {
                    index,
                    text: delta(),
                });
            }
            "response.reasoning_summary_text.delta" => {
                on_delta(StreamDelta::Thinking {
                    index,
                    text: delta(),
                });
            }
            "response.function_call_arguments.delta" => {
                let piece = delta();
                if let Some(call) = self.calls.get_mut(&index) {
                    call.partial_json.push_str(&piece);
                }
                on_delta(StreamDelta::ToolInput {
                    index,
                    partial_json: piece,
                });
            }
            "response.output_item.done" => {
                // A finished call's arguments are whole: not cut.
                self.calls.remove(&index);
            }
            _ => {}
        }
        self.acc.push(&parsed);
        Ok(())
    }

    fn into_partial(self) -> PartialOutput {
        let text = self.acc.partial_text();
        let mut ignored = Vec::new();
        let message = self
            .acc
            .finish()
            .ok()
            .map(|a| to_message(&a.message.output, &mut ignored).0);
        PartialOutput {
            text,
            message,
            cut_tool_calls: self.calls.into_values().collect(),
        }
    }

    fn finish(self, retries: u32) -> Result<ModelResponse, ModelError> {
        if !self.acc.ended() {
            return Err(ModelError::StreamCut {
                provider: PROVIDER.to_owned(),
                message: "the stream ended before `response.completed`".to_owned(),
                partial: Box::new(self.into_partial()),
            });
        }
        let accumulated = self.acc.finish().map_err(|e| ModelError::StreamCut {
            provider: PROVIDER.to_owned(),
            message: e.to_string(),
            partial: Box::default(),
        })?;
        to_response(accumulated.message, retries, accumulated.problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::{LogEntry, ToolSpec};

    #[test]
    fn body_has_instructions_tools_flat_store_off_and_the_cache_key() {
        let client = ResponsesClient::new(None).unwrap();
        let request = ModelRequest::new(
            "gpt-5",
            vec![LogEntry::new("u1", LogRole::User, "t").with_text("Hello")],
        )
        .with_system("Be brief.")
        .with_tools(vec![ToolSpec::new(
            "calc",
            "Adds.",
            json!({"type": "object"}),
        )])
        .with_thinking_budget(4096)
        .with_stream(true)
        .with_cache(crate::CacheHint {
            stable_entries: 1,
            key: Some("conv-1".into()),
        });
        let body = client.request_body(&request);
        assert_eq!(body["instructions"], "Be brief.");
        assert_eq!(
            body["input"],
            json!([{"type": "message", "role": "user", "content": "Hello"}])
        );
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "name": "calc", "description": "Adds.", "parameters": {"type": "object"}, "strict": false}])
        );
        assert_eq!(body["store"], false);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(
            body["reasoning"],
            json!({"effort": "medium", "summary": "auto"})
        );
        assert_eq!(body["prompt_cache_key"], "conv-1");
        assert_eq!(body["max_output_tokens"], 4096);
        assert_eq!(body["stream"], true);
        let body = client.with_prompt_cache_key(false).request_body(&request);
        assert!(body.get("prompt_cache_key").is_none());
    }

    #[test]
    fn cached_input_tokens_are_split_out() {
        let u: ResponsesUsage = serde_json::from_value(json!({
            "input_tokens": 1830, "input_tokens_details": {"cached_tokens": 1536},
            "output_tokens": 412, "total_tokens": 2242}))
        .unwrap();
        assert_eq!(
            usage(&u),
            Usage {
                input_tokens: 294,
                output_tokens: 412,
                cache_read_tokens: 1536,
                cache_write_tokens: 0,
                estimated: false,
            }
        );
    }
}
