//! The Anthropic Messages API client.

use std::collections::BTreeMap;

use async_trait::async_trait;
use ba_protocol::CacheControl;
use ba_protocol::anthropic::{AnthropicRequest, AnthropicResponse, AnthropicUsage};
use ba_protocol::convert::log_to_anthropic;
use ba_protocol::join_text;
use ba_protocol::stream::anthropic::{AnthropicAccumulator, BlockDelta, StreamEvent};
use ba_protocol::stream::sse::SseEvent;
use ba_protocol::{Content, ContentBlock};
use serde_json::{Value, json};

use super::error::{ModelError, PartialOutput, PartialToolCall};
use super::http::{ApiKey, HttpConfig, Transport};
use super::sse::{StreamState, read_stream};
use super::{
    CacheHint, DeltaSink, ModelClient, ModelRequest, ModelResponse, StopReason, StreamDelta, Usage,
};

const PROVIDER: &str = "anthropic";

/// A client of the Anthropic Messages API (`POST {base}/v1/messages`).
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    transport: Transport,
    key: ApiKey,
    base_url: String,
    version: String,
}

impl AnthropicClient {
    /// The public API.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";
    /// The environment variable the key is read from by [`AnthropicClient::from_env`].
    pub const KEY_VAR: &'static str = "ANTHROPIC_API_KEY";

    /// A client with this key, the public base URL and default timeouts and retries.
    pub fn new(key: ApiKey) -> Result<Self, ModelError> {
        Ok(Self {
            transport: Transport::new(PROVIDER, HttpConfig::default(), Self::DEFAULT_BASE_URL)?,
            key,
            base_url: Self::DEFAULT_BASE_URL.to_owned(),
            version: "2023-06-01".to_owned(),
        })
    }

    /// A client with the key from `ANTHROPIC_API_KEY`.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::new(ApiKey::from_env(Self::KEY_VAR, PROVIDER)?)
    }

    /// Sends to another base URL (a proxy, a mock server); a trailing `/` is ignored. Fails
    /// when it is not an `http` or `https` URL.
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

    /// The JSON body sent for `request`.
    pub fn request_body(request: &ModelRequest) -> Value {
        let converted = log_to_anthropic(&request.context_entries());
        for loss in &converted.losses {
            tracing::debug!(path = %loss.path, what = %loss.what, "not sent to Anthropic");
        }
        let mut body = converted.value;
        if let Some(system) = &request.system {
            body.system = Some(match body.system.take() {
                None => Content::Text(system.clone()),
                Some(Content::Text(rest)) => Content::Text(format!("{system}\n\n{rest}")),
                Some(Content::Blocks(mut blocks)) => {
                    blocks.insert(0, ContentBlock::text(system.clone()));
                    Content::Blocks(blocks)
                }
            });
        }
        let extra = &mut body.extra;
        extra.insert("model".to_owned(), json!(request.model));
        extra.insert("max_tokens".to_owned(), json!(request.max_tokens));
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "input_schema": t.input_schema,
                    })
                })
                .collect();
            extra.insert("tools".to_owned(), Value::Array(tools));
        }
        if let Some(budget) = request.thinking_budget {
            extra.insert(
                "thinking".to_owned(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        if request.stream {
            extra.insert("stream".to_owned(), Value::Bool(true));
        }
        if let Some(cache) = &request.cache {
            mark_breakpoints(&mut body, request, cache);
        }
        serde_json::to_value(&body).unwrap_or(Value::Null)
    }
}

/// The Anthropic API takes at most this many cache breakpoints a request.
const MAX_BREAKPOINTS: usize = 4;

/// Marks the cache breakpoints of a request: the last tool (the tool list opens every prefix),
/// the last system block, the last block of the stable entries (read back by every call until
/// the next compaction) and the last block of the request (written for the next call).
fn mark_breakpoints(body: &mut AnthropicRequest, request: &ModelRequest, cache: &CacheHint) {
    let mut marks = 0;
    if let Some(Value::Array(tools)) = body.extra.get_mut("tools")
        && let Some(Value::Object(last)) = tools.last_mut()
    {
        last.insert("cache_control".to_owned(), json!({"type": "ephemeral"}));
        marks += 1;
    }
    if let Some(system) = body.system.take() {
        let mut blocks = system.into_blocks();
        if let Some(block) = blocks.iter_mut().rev().find_map(cache_slot) {
            *block = Some(CacheControl::ephemeral());
            marks += 1;
        }
        body.system = Some(Content::Blocks(blocks));
    }
    // Where the stable entries end in the request's messages: convert them alone.
    let entries = request.context_entries();
    let stable = cache.stable_entries.min(entries.len());
    let stable_end = if stable == 0 {
        None
    } else {
        let prefix = log_to_anthropic(&entries[..stable]).value;
        prefix.messages.len().checked_sub(1).map(|m| {
            let blocks = match &prefix.messages[m].content {
                Content::Text(_) => 1,
                Content::Blocks(b) => b.len(),
            };
            (m, blocks)
        })
    };
    let last = body.messages.len().checked_sub(1).map(|m| (m, usize::MAX));
    for (m, blocks) in stable_end.into_iter().chain(last) {
        if marks >= MAX_BREAKPOINTS {
            break;
        }
        let Some(message) = body.messages.get_mut(m) else {
            continue;
        };
        let content = std::mem::replace(&mut message.content, Content::Blocks(Vec::new()));
        let mut all = content.into_blocks();
        let end = blocks.min(all.len());
        if let Some(slot) = all[..end].iter_mut().rev().find_map(cache_slot)
            && slot.is_none()
        {
            *slot = Some(CacheControl::ephemeral());
            marks += 1;
        }
        message.content = Content::Blocks(all);
    }
}

/// The cache marker of a block that may carry one (not thinking, whose blocks cannot).
fn cache_slot(block: &mut ContentBlock) -> Option<&mut Option<CacheControl>> {
    match block {
        ContentBlock::Text(b) => Some(&mut b.cache_control),
        ContentBlock::ToolUse(b) => Some(&mut b.cache_control),
        ContentBlock::ToolResult(b) => Some(&mut b.cache_control),
        ContentBlock::Image(b) => Some(&mut b.cache_control),
        _ => None,
    }
}

#[async_trait]
impl ModelClient for AnthropicClient {
    fn provider(&self) -> &str {
        PROVIDER
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let body = Self::request_body(request);
        let url = format!("{}/v1/messages", self.base_url);
        let key = self.key.header_value("", PROVIDER)?;
        let (response, retries, deadline, call_deadline) = self
            .transport
            .send(|| {
                self.transport
                    .client
                    .post(&url)
                    .header("x-api-key", key.clone())
                    .header("anthropic-version", &self.version)
                    .json(&body)
            })
            .await?;
        if request.stream {
            return read_stream(
                &self.transport,
                response,
                AnthropicStream::default(),
                on_delta,
                retries,
                call_deadline,
            )
            .await;
        }
        let parsed: AnthropicResponse = self
            .transport
            .body_json(response, deadline, "a Messages response")
            .await?;
        Ok(to_response(parsed, retries, Vec::new()))
    }
}

fn to_response(parsed: AnthropicResponse, retries: u32, problems: Vec<String>) -> ModelResponse {
    ModelResponse {
        message: parsed.to_message(),
        stop_reason: parsed.stop_reason.as_deref().map_or(
            StopReason::Other("none".to_owned()),
            StopReason::from_provider,
        ),
        usage: usage(&parsed.usage),
        id: parsed.id,
        model: parsed.model,
        retries,
        problems,
    }
}

fn usage(u: &AnthropicUsage) -> Usage {
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_input_tokens.unwrap_or(0),
        cache_write_tokens: u.cache_creation_input_tokens.unwrap_or(0),
    }
}

/// One Messages stream: the protocol accumulator, plus the raw input of tool calls still open
/// (the accumulator only parses it when the block stops).
#[derive(Debug, Default)]
struct AnthropicStream {
    acc: AnthropicAccumulator,
    open_calls: BTreeMap<usize, PartialToolCall>,
    message_stopped: bool,
}

impl AnthropicStream {
    fn cut_calls(&self) -> Vec<PartialToolCall> {
        self.open_calls.values().cloned().collect()
    }
}

impl StreamState for AnthropicStream {
    fn push(&mut self, event: &SseEvent, on_delta: &mut DeltaSink<'_>) -> Result<(), ModelError> {
        let parsed = StreamEvent::from_sse(event).map_err(|e| ModelError::InvalidResponse {
            provider: PROVIDER.to_owned(),
            message: e.to_string(),
            partial: None,
        })?;
        match &parsed {
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => match content_block {
                ContentBlock::ToolUse(u) => {
                    self.open_calls.insert(
                        *index,
                        PartialToolCall {
                            id: u.id.clone(),
                            name: u.name.clone(),
                            partial_json: String::new(),
                        },
                    );
                    on_delta(StreamDelta::ToolCallStarted {
                        index: *index,
                        id: u.id.clone(),
                        name: u.name.clone(),
                    });
                }
                ContentBlock::Text(t) if !t.text.is_empty() => on_delta(StreamDelta::Text {
                    index: *index,
                    text: t.text.clone(),
                }),
                ContentBlock::Thinking(t) if !t.thinking.is_empty() => {
                    on_delta(StreamDelta::Thinking {
                        index: *index,
                        text: t.thinking.clone(),
                    })
                }
                _ => {}
            },
            StreamEvent::ContentBlockDelta { index, delta } => match delta {
                BlockDelta::TextDelta { text } => on_delta(StreamDelta::Text {
                    index: *index,
                    text: text.clone(),
                }),
                BlockDelta::ThinkingDelta { thinking } => on_delta(StreamDelta::Thinking {
                    index: *index,
                    text: thinking.clone(),
                }),
                BlockDelta::InputJsonDelta { partial_json } => {
                    if let Some(call) = self.open_calls.get_mut(index) {
                        call.partial_json.push_str(partial_json);
                    }
                    if !partial_json.is_empty() {
                        on_delta(StreamDelta::ToolInput {
                            index: *index,
                            partial_json: partial_json.clone(),
                        });
                    }
                }
                _ => {}
            },
            StreamEvent::ContentBlockStop { index } => {
                self.open_calls.remove(index);
            }
            StreamEvent::MessageStop => self.message_stopped = true,
            StreamEvent::Error { error } => return Err(stream_error(error)),
            _ => {}
        }
        self.acc
            .push(parsed)
            .map_err(|e| ModelError::InvalidResponse {
                provider: PROVIDER.to_owned(),
                message: e.to_string(),
                partial: None,
            })
    }

    fn into_partial(self) -> PartialOutput {
        let cut_tool_calls = self.cut_calls();
        let text = self.acc.partial_text();
        let message = self.acc.finish().ok().map(|a| a.message.to_message());
        PartialOutput {
            text,
            message,
            cut_tool_calls,
        }
    }

    fn finish(self, retries: u32) -> Result<ModelResponse, ModelError> {
        let cut_tool_calls = self.cut_calls();
        let accumulated = self.acc.finish().map_err(|e| ModelError::StreamCut {
            provider: PROVIDER.to_owned(),
            message: e.to_string(),
            partial: Box::default(),
        })?;
        if !self.message_stopped {
            let message = accumulated.message.to_message();
            return Err(ModelError::StreamCut {
                provider: PROVIDER.to_owned(),
                message: accumulated.problems.join("; "),
                partial: Box::new(PartialOutput {
                    text: join_text(&message.content),
                    message: Some(message),
                    cut_tool_calls,
                }),
            });
        }
        Ok(to_response(
            accumulated.message,
            retries,
            accumulated.problems,
        ))
    }
}

/// An `error` event inside a stream, as the error it stands for.
fn stream_error(error: &Value) -> ModelError {
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the stream reported an error")
        .to_owned();
    let provider = PROVIDER.to_owned();
    match kind {
        "overloaded_error" => ModelError::Server {
            provider,
            status: 529,
            message,
            attempts: 1,
            partial: None,
        },
        "api_error" => ModelError::Server {
            provider,
            status: 500,
            message,
            attempts: 1,
            partial: None,
        },
        "rate_limit_error" => ModelError::RateLimited {
            provider,
            message,
            retry_after: None,
            attempts: 1,
        },
        _ => ModelError::InvalidResponse {
            provider,
            message: format!("{kind}: {message}"),
            partial: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::ToolSpec;
    use ba_protocol::{LogEntry, LogRole};

    #[test]
    fn body_carries_system_tools_thinking_and_stream() {
        let entries = vec![
            LogEntry::new("s", LogRole::System, "t").with_text("Logged system."),
            LogEntry::new("u", LogRole::User, "t").with_text("Hi"),
        ];
        let request = ModelRequest::new("claude-x", entries)
            .with_system("Be brief.")
            .with_tools(vec![ToolSpec::new(
                "calc",
                "Adds.",
                json!({"type": "object"}),
            )])
            .with_thinking_budget(2048)
            .with_stream(true);
        let body = AnthropicClient::request_body(&request);
        assert_eq!(body["system"], json!("Be brief.\n\nLogged system."));
        assert_eq!(body["messages"], json!([{"role": "user", "content": "Hi"}]));
        assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
        assert_eq!(body["thinking"]["budget_tokens"], json!(2048));
        assert_eq!(body["stream"], json!(true));
        assert_eq!(body["max_tokens"], json!(4096));
    }

    #[test]
    fn client_debug_hides_the_key() {
        let client = AnthropicClient::new(ApiKey::new("sk-ant-very-secret")).unwrap();
        let shown = format!("{client:?}");
        assert!(!shown.contains("very-secret"), "{shown}");
    }
}
