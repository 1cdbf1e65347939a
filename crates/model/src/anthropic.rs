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
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::{ModelError, PartialOutput, PartialToolCall};
use super::http::{ApiKey, HttpConfig, Transport};
use super::sse::{StreamState, read_stream};
use super::{
    CacheHint, DeltaSink, ModelClient, ModelRequest, ModelResponse, StopReason, StreamDelta, Usage,
};

const PROVIDER: &str = "anthropic";

/// The beta the API's tool search needs.
const TOOL_SEARCH_BETA: &str = "advanced-tool-use-2025-11-20";

/// The beta the API's own memory tool needs.
const MEMORY_BETA: &str = "context-management-2025-06-27";

/// How the API's own memory tool types begin (`memory_20250818`): a tool declared with one is
/// sent by its type alone, and the request turns [`MEMORY_BETA`] on.
const MEMORY_TYPE_PREFIX: &str = "memory_";

/// The beta that context editing needs.
const CONTEXT_MANAGEMENT_BETA: &str = "context-management-2025-06-27";

/// The beta that server-side compaction needs.
const COMPACTION_BETA: &str = "compact-2026-01-12";

/// The API's least compaction trigger, in input tokens.
pub const MIN_COMPACTION_TRIGGER: u64 = 50_000;

/// Server-side compaction (`compact_20260112`): once a request's input passes the trigger, the
/// API summarises the conversation before the latest turns into a `compaction` block that
/// opens its answer, and from then on reads nothing before that block. The block is kept in
/// the log like any other (an assistant entry's content block) and sent back as it came; the
/// context builder starts the window at it. A field left unset is not sent, so the API's
/// default applies (a trigger of 150 000 input tokens, its own summary instructions).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ServerCompaction {
    /// Input tokens from which the API compacts (at least [`MIN_COMPACTION_TRIGGER`]).
    pub trigger_tokens: Option<u64>,
    /// What the summary must keep, replacing the API's own instructions.
    pub instructions: Option<String>,
}

impl ServerCompaction {
    /// Compaction with the API's trigger and instructions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Compacts once the prompt has this many input tokens.
    pub fn with_trigger_tokens(mut self, tokens: u64) -> Self {
        self.trigger_tokens = Some(tokens);
        self
    }

    /// Writes the summary by these instructions.
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// The `compact_20260112` edit.
    fn to_json(&self) -> Value {
        let mut edit = serde_json::Map::new();
        edit.insert("type".to_owned(), json!("compact_20260112"));
        if let Some(tokens) = self.trigger_tokens {
            edit.insert(
                "trigger".to_owned(),
                json!({"type": "input_tokens", "value": tokens}),
            );
        }
        if let Some(instructions) = &self.instructions {
            edit.insert("instructions".to_owned(), json!(instructions));
        }
        Value::Object(edit)
    }
}

/// Context editing: the API clears old tool results (and old thinking) from the prompt before
/// the model reads it, while the client keeps sending the whole conversation
/// (`context_management` in the body, beta `context-management-2025-06-27`).
///
/// Tool results are cleared once the prompt passes [`trigger_tokens`](Self::trigger_tokens);
/// thinking of earlier turns only when [`keep_thinking_turns`](Self::keep_thinking_turns) is
/// set and the request thinks (the API refuses the edit otherwise). A part left unset is not
/// sent, so the API's default applies. The fields read from the CLI configuration's
/// `context_editing:` map under the same names.
///
/// An agent that compresses its own window should leave the clearing to the provider: the CLI
/// sets the trigger, when not given, to where the agent's strategies would have started, and
/// raises the agent's own trigger to the whole window (`ContextBudget::with_thresholds(1.0,
/// target)` in `ba-context`), so those run only when a request would not fit at all.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ContextEditing {
    /// Input tokens from which tool results are cleared (the API's default is 100 000).
    pub trigger_tokens: Option<u64>,
    /// The most recent tool uses kept whole (the API's default is 3).
    pub keep_tool_uses: Option<u64>,
    /// Input tokens cleared at least each time, so that breaking the prompt cache is worth it.
    pub clear_at_least: Option<u64>,
    /// Tools whose results are never cleared.
    #[serde(default)]
    pub exclude_tools: Vec<String>,
    /// Whether the inputs of cleared calls are cleared too (the API's default is no).
    pub clear_tool_inputs: Option<bool>,
    /// Clear the thinking of earlier turns, keeping this many recent turns of it.
    pub keep_thinking_turns: Option<u64>,
    /// Server-side compaction (see [`ServerCompaction`]). Set alone — no tool-result clearing
    /// setting beside it — it is the only edit sent.
    pub compact: Option<ServerCompaction>,
}

impl ContextEditing {
    /// Tool results cleared with the API's defaults; thinking kept.
    pub fn new() -> Self {
        Self::default()
    }

    /// Clears tool results once the prompt has this many input tokens.
    pub fn with_trigger_tokens(mut self, tokens: u64) -> Self {
        self.trigger_tokens = Some(tokens);
        self
    }

    /// Keeps the most recent `uses` tool uses.
    pub fn with_keep_tool_uses(mut self, uses: u64) -> Self {
        self.keep_tool_uses = Some(uses);
        self
    }

    /// Clears at least this many input tokens each time.
    pub fn with_clear_at_least(mut self, tokens: u64) -> Self {
        self.clear_at_least = Some(tokens);
        self
    }

    /// Never clears the results of these tools.
    pub fn with_exclude_tools(
        mut self,
        tools: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.exclude_tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// Whether cleared calls lose their inputs too.
    pub fn with_clear_tool_inputs(mut self, yes: bool) -> Self {
        self.clear_tool_inputs = Some(yes);
        self
    }

    /// Clears the thinking of earlier turns, keeping the last `turns`.
    pub fn with_keep_thinking_turns(mut self, turns: u64) -> Self {
        self.keep_thinking_turns = Some(turns);
        self
    }

    /// Asks the API to compact the conversation server-side.
    pub fn with_compaction(mut self, compaction: ServerCompaction) -> Self {
        self.compact = Some(compaction);
        self
    }

    /// Whether tool results are cleared: always, unless compaction is the only setting.
    pub fn clears_tool_results(&self) -> bool {
        self.compact.is_none()
            || self.trigger_tokens.is_some()
            || self.keep_tool_uses.is_some()
            || self.clear_at_least.is_some()
            || !self.exclude_tools.is_empty()
            || self.clear_tool_inputs.is_some()
    }

    /// The betas the edits sent for a request that thinks or not need.
    fn betas(&self, thinking: bool) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.clears_tool_results() || (thinking && self.keep_thinking_turns.is_some()) {
            out.push(CONTEXT_MANAGEMENT_BETA);
        }
        if self.compact.is_some() {
            out.push(COMPACTION_BETA);
        }
        out
    }

    /// The `context_management` object for a request that thinks or not (the thinking edit
    /// comes first, as the API requires).
    pub fn to_json(&self, thinking: bool) -> Value {
        let mut edits = Vec::new();
        if let (Some(turns), true) = (self.keep_thinking_turns, thinking) {
            edits.push(json!({
                "type": "clear_thinking_20251015",
                "keep": {"type": "thinking_turns", "value": turns},
            }));
        }
        if !self.clears_tool_results() {
            if let Some(compact) = &self.compact {
                edits.push(compact.to_json());
            }
            return json!({ "edits": edits });
        }
        let mut tools = serde_json::Map::new();
        tools.insert("type".to_owned(), json!("clear_tool_uses_20250919"));
        let parts = [
            ("trigger", "input_tokens", self.trigger_tokens),
            ("keep", "tool_uses", self.keep_tool_uses),
            ("clear_at_least", "input_tokens", self.clear_at_least),
        ];
        for (key, kind, value) in parts {
            if let Some(value) = value {
                tools.insert(key.to_owned(), json!({"type": kind, "value": value}));
            }
        }
        if !self.exclude_tools.is_empty() {
            tools.insert("exclude_tools".to_owned(), json!(self.exclude_tools));
        }
        if let Some(yes) = self.clear_tool_inputs {
            tools.insert("clear_tool_inputs".to_owned(), json!(yes));
        }
        edits.push(Value::Object(tools));
        if let Some(compact) = &self.compact {
            edits.push(compact.to_json());
        }
        json!({ "edits": edits })
    }
}

/// A client of the Anthropic Messages API (`POST {base}/v1/messages`).
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    transport: Transport,
    key: ApiKey,
    base_url: String,
    version: String,
    betas: Vec<String>,
    context_editing: Option<ContextEditing>,
    /// Whether held-back tools go to the API's own tool search.
    tool_search: bool,
}

/// Whether the request declares its tool `name` as the API's own memory tool.
fn native_memory(request: &ModelRequest, name: &str) -> bool {
    request
        .native_types
        .get(name)
        .is_some_and(|t| t.starts_with(MEMORY_TYPE_PREFIX))
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
            betas: Vec::new(),
            context_editing: None,
            tool_search: true,
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

    /// Turns on a beta feature: its name is sent in the `anthropic-beta` header, joined by
    /// commas with the others.
    pub fn with_beta(mut self, beta: impl Into<String>) -> Self {
        let beta = beta.into();
        if !self.betas.contains(&beta) {
            self.betas.push(beta);
        }
        self
    }

    /// Whether tools a request holds back ([`ModelRequest::deferred`]) go to the API's own tool
    /// search (`defer_loading`, with the `advanced-tool-use-2025-11-20` beta): on by default;
    /// off, the caller offers a search tool of its own (for a model or a gateway without it).
    pub fn with_tool_search(mut self, on: bool) -> Self {
        self.tool_search = on;
        self
    }

    /// Asks the API to clear old tool results (and thinking) server-side; see
    /// [`ContextEditing`].
    pub fn with_context_editing(mut self, editing: ContextEditing) -> Self {
        self.context_editing = Some(editing);
        self
    }

    /// The `anthropic-beta` header of a request that thinks or not: every beta turned on and
    /// those its context editing needs, comma-separated; `None` for none.
    fn beta_header(&self, thinking: bool, deferred: bool, memory: bool) -> Option<String> {
        let mut betas: Vec<&str> = self.betas.iter().map(String::as_str).collect();
        if deferred && !betas.contains(&TOOL_SEARCH_BETA) {
            betas.push(TOOL_SEARCH_BETA);
        }
        if memory && !betas.contains(&MEMORY_BETA) {
            betas.push(MEMORY_BETA);
        }
        for beta in self
            .context_editing
            .iter()
            .flat_map(|editing| editing.betas(thinking))
        {
            if !betas.contains(&beta) {
                betas.push(beta);
            }
        }
        (!betas.is_empty()).then(|| betas.join(","))
    }

    /// The JSON body this client sends for `request`: [`AnthropicClient::request_body`] with
    /// the client's context editing.
    pub fn body(&self, request: &ModelRequest) -> Value {
        let mut body = Self::request_body(request);
        if let (Some(editing), Value::Object(fields)) = (&self.context_editing, &mut body) {
            let thinking = request.thinking_budget.is_some();
            fields.insert("context_management".to_owned(), editing.to_json(thinking));
        }
        body
    }

    /// The JSON body sent for `request` by any client (no client setting in it).
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
        if !request.tools.is_empty() || request.deferred.is_some() {
            let mut tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| match request.native_types.get(&t.name) {
                    Some(native) if native_memory(request, &t.name) => {
                        json!({"type": native, "name": t.name})
                    }
                    _ => json!({
                        "name": t.name,
                        "description": t.description,
                        "input_schema": t.input_schema,
                    }),
                })
                .collect();
            // Held-back tools after the others, then the API's search: the list is the same
            // from call to call, so the cached prefix holds.
            if let Some(deferred) = &request.deferred {
                tools.extend(deferred.tools.iter().map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "input_schema": t.input_schema,
                        "defer_loading": true,
                    })
                }));
                tools.push(if deferred.regex {
                    json!({"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"})
                } else {
                    json!({"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"})
                });
            }
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

    fn searches_tools(&self) -> bool {
        self.tool_search
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let body = self.body(request);
        let url = format!("{}/v1/messages", self.base_url);
        let key = self.key.header_value("", PROVIDER)?;
        let beta = self.beta_header(
            request.thinking_budget.is_some(),
            request.deferred.is_some(),
            request
                .tools
                .iter()
                .any(|t| native_memory(request, &t.name)),
        );
        let (response, retries, deadline, call_deadline) = self
            .transport
            .send(|| {
                let builder = self
                    .transport
                    .client
                    .post(&url)
                    .header("x-api-key", key.clone())
                    .header("anthropic-version", &self.version);
                match &beta {
                    Some(beta) => builder.header("anthropic-beta", beta),
                    None => builder,
                }
                .json(&body)
            })
            .await?;
        if request.stream && Transport::streams(&response) {
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
        if let Some(applied) = parsed.extra.get("context_management") {
            log_applied_edits(applied);
        }
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

/// Logs the edits the API says it made (`context_management.applied_edits`).
fn log_applied_edits(context_management: &Value) {
    let edits = context_management
        .get("applied_edits")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for edit in edits {
        let count = |key: &str| edit.get(key).and_then(Value::as_u64);
        let kind = edit.get("type").and_then(Value::as_str).unwrap_or("?");
        tracing::info!(
            edit = kind,
            cleared_tool_uses = count("cleared_tool_uses"),
            cleared_thinking_turns = count("cleared_thinking_turns"),
            cleared_input_tokens = count("cleared_input_tokens"),
            "the API cleared part of the context"
        );
    }
}

/// The `context_management` of a stream event: beside `delta` in `message_delta` (where the
/// API puts it), inside `delta`, or in `message_start`'s message.
fn context_management_of(event: &SseEvent) -> Option<Value> {
    if !event.data.contains("context_management") {
        return None;
    }
    let value: Value = serde_json::from_str(&event.data).ok()?;
    [
        value.get("context_management"),
        value.pointer("/delta/context_management"),
        value.pointer("/message/context_management"),
    ]
    .into_iter()
    .flatten()
    .find(|v| v.is_object())
    .cloned()
}

fn usage(u: &AnthropicUsage) -> Usage {
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_read_tokens: u.cache_read_input_tokens.unwrap_or(0),
        cache_write_tokens: u.cache_creation_input_tokens.unwrap_or(0),
        estimated: false,
    }
}

/// One Messages stream: the protocol accumulator, plus the raw input of tool calls still open
/// (the accumulator only parses it when the block stops).
#[derive(Debug, Default)]
struct AnthropicStream {
    acc: AnthropicAccumulator,
    open_calls: BTreeMap<usize, PartialToolCall>,
    message_stopped: bool,
    context_management: Option<Value>,
}

impl AnthropicStream {
    fn cut_calls(&self) -> Vec<PartialToolCall> {
        self.open_calls.values().cloned().collect()
    }
}

impl StreamState for AnthropicStream {
    fn push(&mut self, event: &SseEvent, on_delta: &mut DeltaSink<'_>) -> Result<(), ModelError> {
        if let Some(edits) = context_management_of(event) {
            self.context_management = Some(edits);
        }
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
        if let Some(applied) = &self.context_management {
            log_applied_edits(applied);
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
    fn context_editing_sends_the_parts_set_and_thinking_only_when_thinking() {
        let editing = ContextEditing::new()
            .with_trigger_tokens(30_000)
            .with_keep_tool_uses(2)
            .with_exclude_tools(["web_search"])
            .with_keep_thinking_turns(1);
        assert_eq!(
            editing.to_json(true),
            json!({"edits": [
                {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}},
                {"type": "clear_tool_uses_20250919",
                 "trigger": {"type": "input_tokens", "value": 30000},
                 "keep": {"type": "tool_uses", "value": 2},
                 "exclude_tools": ["web_search"]},
            ]})
        );
        assert_eq!(
            ContextEditing::new().to_json(true),
            json!({"edits": [{"type": "clear_tool_uses_20250919"}]})
        );
        assert_eq!(
            editing.to_json(false)["edits"].as_array().map(Vec::len),
            Some(1)
        );
    }

    #[test]
    fn applied_edits_are_found_wherever_a_stream_event_carries_them() {
        let applied = json!({"applied_edits": [{"type": "clear_tool_uses_20250919",
            "cleared_tool_uses": 3, "cleared_input_tokens": 9000}]});
        let events = [
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "context_management": applied}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
                   "context_management": applied}}),
            json!({"type": "message_start", "message": {"context_management": applied}}),
        ];
        for event in events {
            let event = SseEvent {
                event: None,
                data: event.to_string(),
                id: None,
            };
            assert_eq!(context_management_of(&event), Some(applied.clone()));
        }
    }

    #[test]
    fn client_debug_hides_the_key() {
        let client = AnthropicClient::new(ApiKey::new("sk-ant-very-secret")).unwrap();
        let shown = format!("{client:?}");
        assert!(!shown.contains("very-secret"), "{shown}");
    }
}
