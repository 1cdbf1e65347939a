//! # ba-model
//!
//! Model clients of the BA-Agent pipeline: one trait, [`ModelClient`], and its providers.
//! Workspace dependency: `ba-protocol` only, so a project that only wants to call a model picks
//! this crate alone.
//!
//! - [`AnthropicClient`] (feature `anthropic`) speaks the Anthropic Messages API,
//!   [`OpenAiClient`] (feature `openai`) the Chat Completions API of OpenAI and of any
//!   compatible server, and [`ResponsesClient`] (feature `openai` too) OpenAI's Responses API
//!   (reasoning items sent back encrypted, `store: false`, `prompt_cache_key`); all stream
//!   (SSE) or not, send tools and thinking budgets, and record usage with cached tokens.
//! - [`OpenAiCompat`] says which optional fields the OpenAI client sends:
//!   [`OpenAiCompat::server`] (the `compat` profile, [`OpenAiClient::compat`]) leaves out
//!   `stream_options`, `prompt_cache_key` and `reasoning_effort` for vLLM, llama.cpp, Ollama
//!   and the like; answers are read leniently whatever the profile (tool arguments as objects,
//!   calls without ids or indexes, no usage).
//! - [`Embeddings`] turns texts into vectors (for retrieval); [`OpenAiEmbeddings`] (feature
//!   `openai`) calls any OpenAI-compatible `/embeddings` endpoint, in batches, and checks
//!   what comes back ([`EmbeddingProblem`]).
//! - [`ContextEditing`] asks Anthropic to clear old tool results and thinking server-side
//!   ([`AnthropicClient::with_context_editing`]).
//! - [`ReplayClient`] (feature `replay`) plays a recorded session file and fails loudly when
//!   the conversation leaves the recording.
//! - [`HttpConfig`] holds the per-request and stream-idle timeouts and the [`RetryPolicy`]
//!   (429, 5xx and connection failures, exponential backoff with jitter, `retry-after`).
//! - Streaming: [`ModelClient::complete_streaming`] hands [`StreamDelta`]s to a callback as
//!   they arrive; [`stream_response`] wraps a call as an async `Stream` of [`StreamItem`]s for
//!   consumers that poll. Both end with the final message rebuilt by the protocol crate's
//!   accumulators.
//! - [`ModelError`] maps onto [`ba_protocol::LlmErrorKind`] and carries the output streamed
//!   before a failure, so the orchestrator can log it with an `LLM_ERROR` block.
//!
//! All three providers are on by default; `default-features = false` leaves the trait and the
//! types (what an orchestrator needs to be generic over clients) without reqwest.
//!
//! A request carries the conversation as log entries ([`ba_protocol::LogEntry`]), not as
//! normalised messages: the log is what the orchestrator stores, the protocol crate converts it
//! to either provider without loss, and only the log keeps a recorded model failure
//! (`llm_error`), which the conversions turn into the `LLM_ERROR` block that lets a later
//! "continue" resume.
//!
//! ```
//! # #[cfg(feature = "replay")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use ba_model::{ModelClient, ModelRequest, ReplayClient, StopReason};
//! use ba_protocol::{LogEntry, LogRole};
//!
//! let recording = r#"[{"expect": {"role": "user", "text": "Hello"},
//!                      "response": {"message": {"role": "assistant", "content": "Hi there."},
//!                                   "stop_reason": "end_turn"}}]"#;
//! let client = ReplayClient::from_json(recording, "inline")?;
//! let request = ModelRequest::new(
//!     "any-model",
//!     vec![LogEntry::new("m1", LogRole::User, "2025-01-01T00:00:00Z").with_text("Hello")],
//! );
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let answer = runtime.block_on(client.complete(&request))?;
//! assert_eq!(answer.message.text(), "Hi there.");
//! assert_eq!(answer.stop_reason, StopReason::EndTurn);
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "replay"))]
//! # fn main() {}
//! ```
#![deny(missing_docs)]

#[cfg(feature = "anthropic")]
mod anthropic;
#[cfg(feature = "openai")]
mod compat;
mod embeddings;
mod error;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "openai")]
mod openai;
#[cfg(feature = "http")]
mod overflow;
#[cfg(feature = "replay")]
mod replay;
#[cfg(feature = "openai")]
mod responses;
#[cfg(feature = "http")]
mod retry;
#[cfg(feature = "http")]
mod sse;

use std::sync::Arc;

use async_trait::async_trait;
use ba_protocol::anthropic::AnthropicMessage;
use ba_protocol::convert::{Stamp, message_to_log};
use ba_protocol::{Content, LogEntry, Message, ToolSpec, Usage};
use serde::{Deserialize, Serialize};

#[cfg(feature = "anthropic")]
pub use anthropic::{AnthropicClient, ContextEditing, MIN_COMPACTION_TRIGGER, ServerCompaction};
#[cfg(feature = "openai")]
pub use compat::OpenAiCompat;
#[cfg(feature = "openai")]
pub use embeddings::OpenAiEmbeddings;
pub use embeddings::{EmbeddingProblem, Embeddings};
pub use error::{MAX_LOGGED_PARTIAL, ModelError, PartialOutput, PartialToolCall, TimeoutPhase};
#[cfg(feature = "http")]
pub use http::{ApiKey, HttpConfig};
#[cfg(feature = "openai")]
pub use openai::OpenAiClient;
#[cfg(feature = "replay")]
pub use replay::{ExpectedRequest, RecordedResponse, ReplayClient, ReplayOutcome, ReplayTurn};
#[cfg(feature = "openai")]
pub use responses::ResponsesClient;
#[cfg(feature = "http")]
pub use retry::{RetryPolicy, parse_retry_after};

/// One call to a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The provider's model name.
    pub model: String,
    /// The system prompt, sent before any system entry of the log.
    pub system: Option<String>,
    /// The conversation. Entries with `include_in_context == false` are not sent.
    pub entries: Vec<LogEntry>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Tools the provider holds back until its own tool search finds them (sent only to a
    /// client whose [`ModelClient::searches_tools`] says it can); `None` for none.
    pub deferred: Option<DeferredTools>,
    /// Cap on the tokens the model may write.
    pub max_tokens: u32,
    /// Tokens the model may spend thinking; `None` leaves thinking off.
    pub thinking_budget: Option<u32>,
    /// Whether to stream the answer (deltas reach the callback as they arrive).
    pub stream: bool,
    /// Prompt caching: where the part of the request that repeats from call to call ends, and
    /// the key that ties one conversation's calls together. `None` asks for no caching.
    pub cache: Option<CacheHint>,
    /// Tools of `tools` the provider knows as a type of its own, by name (`memory` →
    /// `memory_20250818`): a client that has the type declares the tool by it, others send the
    /// tool as it is.
    pub native_types: std::collections::BTreeMap<String, String>,
}

/// Tools sent for the provider's own tool search: their definitions are in the request (so its
/// prefix does not change from call to call) but loaded for the model only when a search finds
/// them.
#[derive(Debug, Clone, PartialEq)]
pub struct DeferredTools {
    /// The tools held back.
    pub tools: Vec<ToolSpec>,
    /// The provider's search reads a regular expression instead of words.
    pub regex: bool,
}

/// What a provider's prompt cache needs to know about a request.
///
/// The Anthropic client marks up to four cache breakpoints: the tool list, the system prompt,
/// the end of the stable entries and the end of the request; the OpenAI client sends the key
/// as `prompt_cache_key` where the server accepts it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CacheHint {
    /// Leading entries of the request that repeat unchanged in the next calls (until the
    /// conversation is compacted): the window, without what follows it.
    pub stable_entries: usize,
    /// A key for the conversation (its id, say).
    pub key: Option<String>,
}

impl ModelRequest {
    /// A request for `model` over `entries`, 4096 output tokens, no tools, no streaming.
    pub fn new(model: impl Into<String>, entries: Vec<LogEntry>) -> Self {
        Self {
            model: model.into(),
            system: None,
            entries,
            tools: Vec::new(),
            deferred: None,
            max_tokens: 4096,
            thinking_budget: None,
            stream: false,
            cache: None,
            native_types: std::collections::BTreeMap::new(),
        }
    }

    /// Asks for prompt caching.
    pub fn with_cache(mut self, cache: CacheHint) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Sets the system prompt.
    pub fn with_system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// Sets the tools.
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the output cap.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Turns thinking on with this budget.
    pub fn with_thinking_budget(mut self, budget: u32) -> Self {
        self.thinking_budget = Some(budget);
        self
    }

    /// Streams the answer or not.
    pub fn with_stream(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    /// The entries that go to the model.
    pub fn context_entries(&self) -> Vec<LogEntry> {
        self.entries
            .iter()
            .filter(|e| e.include_in_context)
            .cloned()
            .collect()
    }
}

/// Why the model stopped writing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// The answer is complete.
    EndTurn,
    /// The model wants tool results.
    ToolUse,
    /// The output cap was reached; the answer is cut.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The model refused (or the provider's content filter stopped it).
    Refusal,
    /// A reason this crate does not know, as the provider wrote it.
    Other(String),
}

impl StopReason {
    /// Maps an Anthropic `stop_reason` or an OpenAI `finish_reason`.
    pub fn from_provider(reason: &str) -> Self {
        match reason {
            "end_turn" | "stop" => Self::EndTurn,
            "tool_use" | "tool_calls" | "function_call" => Self::ToolUse,
            "max_tokens" | "length" => Self::MaxTokens,
            "stop_sequence" => Self::StopSequence,
            "refusal" | "content_filter" => Self::Refusal,
            other => Self::Other(other.to_owned()),
        }
    }
}

/// The answer of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// The assistant message: thinking, text and tool calls in the provider's order.
    pub message: Message,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// Token figures.
    pub usage: Usage,
    /// The provider's id of the answer (`msg_…`, `chatcmpl-…`).
    pub id: String,
    /// The model that answered, as the provider named it.
    pub model: String,
    /// How many times the call was retried before this answer.
    pub retries: u32,
    /// What was wrong with an answer the provider ended properly (a tool input cut at
    /// `max_tokens`); empty for a clean answer.
    pub problems: Vec<String>,
}

impl ModelResponse {
    /// The answer as log entries (one assistant entry), ids and times from `stamp`, ready to
    /// append to the conversation.
    pub fn to_log_entries(&self, stamp: &mut dyn Stamp) -> Result<Vec<LogEntry>, ModelError> {
        let message = AnthropicMessage::new(
            ba_protocol::Role::Assistant,
            Content::Blocks(self.message.content.clone()),
        );
        message_to_log(&message, stamp).map_err(|e| ModelError::InvalidResponse {
            provider: "log".to_owned(),
            message: format!("the answer cannot be written to the log: {e}"),
            partial: None,
        })
    }
}

/// A piece of an answer as it streams.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamDelta {
    /// More text of the block at `index`.
    ///
    /// Indexes tell blocks apart within one answer: for Anthropic they are the block's place
    /// in the final message; Chat Completions streams have no blocks, so there text is 0,
    /// reasoning 1 and the n-th tool call 2 + n.
    Text {
        /// Block index.
        index: usize,
        /// The text.
        text: String,
    },
    /// More thinking of the block at `index`.
    Thinking {
        /// Block index.
        index: usize,
        /// The text.
        text: String,
    },
    /// A tool call begins.
    ToolCallStarted {
        /// Block index.
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// More of a tool call's input, as a JSON fragment.
    ToolInput {
        /// Block index.
        index: usize,
        /// The fragment (may split a key or a string anywhere).
        partial_json: String,
    },
}

/// Receives deltas while an answer streams.
pub type DeltaSink<'a> = dyn FnMut(StreamDelta) + Send + 'a;

/// A language model behind a provider API (or a recording).
///
/// One required method; [`ModelClient::complete`] is provided for callers that do not want
/// deltas. Implementations are shared across tasks, so they take `&self`.
#[async_trait]
pub trait ModelClient: Send + Sync {
    /// A short name of the provider (`anthropic`, `openai`, `replay`), for logs and metrics.
    fn provider(&self) -> &str;

    /// Runs one call. When `request.stream` is set, deltas reach `on_delta` as they arrive;
    /// the final message is returned either way. On failure the error carries what was
    /// streamed before it.
    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError>;

    /// Runs one call, ignoring deltas.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.complete_streaming(request, &mut |_| {}).await
    }

    /// The context window the server gives `model`, in its own tokens, when it says so
    /// (llama.cpp's `/props`, a model list's metadata); `None` when it does not, or cannot be
    /// asked. Asking costs a request or two: callers ask once.
    async fn context_window(&self, model: &str) -> Option<u64> {
        let _ = model;
        None
    }

    /// Whether the provider searches tools itself ([`ModelRequest::deferred`]): the caller
    /// then sends the tools it holds back instead of offering a search tool of its own.
    fn searches_tools(&self) -> bool {
        false
    }
}

#[async_trait]
impl<T: ModelClient + ?Sized> ModelClient for Arc<T> {
    fn provider(&self) -> &str {
        (**self).provider()
    }
    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        (**self).complete_streaming(request, on_delta).await
    }
    async fn context_window(&self, model: &str) -> Option<u64> {
        (**self).context_window(model).await
    }
    fn searches_tools(&self) -> bool {
        (**self).searches_tools()
    }
}

#[async_trait]
impl<T: ModelClient + ?Sized> ModelClient for Box<T> {
    fn provider(&self) -> &str {
        (**self).provider()
    }
    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &mut DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        (**self).complete_streaming(request, on_delta).await
    }
    async fn context_window(&self, model: &str) -> Option<u64> {
        (**self).context_window(model).await
    }
    fn searches_tools(&self) -> bool {
        (**self).searches_tools()
    }
}

/// The client's own count of a call's tokens, for an answer whose provider reported none:
/// the request's system prompt, messages and tools, and the answer, counted by `counter`,
/// marked [`Usage::estimated`].
#[cfg(any(feature = "openai", feature = "replay"))]
pub(crate) fn estimated_usage(
    counter: &dyn ba_protocol::TokenCounter,
    request: &ModelRequest,
    answer: &Message,
) -> Usage {
    // Per message: the role and the separators around it, as OpenAI documents for its
    // tiktoken-based models.
    const MESSAGE_OVERHEAD: usize = 4;
    let mut input = request
        .system
        .as_deref()
        .map_or(0, |s| counter.count(s) + MESSAGE_OVERHEAD);
    for entry in request.context_entries() {
        input += MESSAGE_OVERHEAD + counter.count(&entry.text());
        for call in entry.calls() {
            input += counter.count(&call.function.name) + counter.count(&call.function.arguments);
        }
        if let Some(err) = &entry.llm_error {
            input += counter.count(&err.message);
            input += err
                .partial_output
                .as_deref()
                .map_or(0, |p| counter.count(p));
        }
    }
    for tool in &request.tools {
        input += counter.count(&tool.name) + counter.count(&tool.description);
        input += counter.count(&tool.input_schema.to_string());
    }
    let mut output = 0;
    for block in &answer.content {
        output += match block {
            ba_protocol::ContentBlock::Text(t) => counter.count(&t.text),
            ba_protocol::ContentBlock::Thinking(t) => counter.count(&t.thinking),
            ba_protocol::ContentBlock::ToolUse(u) => {
                counter.count(&u.name) + counter.count(&u.input.to_string())
            }
            _ => 0,
        };
    }
    Usage {
        input_tokens: input as u64,
        output_tokens: output as u64,
        estimated: true,
        ..Usage::default()
    }
}

/// What [`stream_response`] yields: the deltas as they arrive, then exactly one `Done`.
#[derive(Debug)]
#[non_exhaustive]
pub enum StreamItem {
    /// A piece of the answer.
    Delta(StreamDelta),
    /// The answer, or the failure with what was streamed before it.
    Done(Result<ModelResponse, ModelError>),
}

/// Runs one call on a tokio task and yields it as an async `Stream`: its deltas, then the
/// answer or the error. Dropping the stream cancels the call. Must be called within a tokio
/// runtime.
pub fn stream_response(
    client: Arc<dyn ModelClient>,
    request: ModelRequest,
) -> impl futures::Stream<Item = StreamItem> + Send + 'static {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let deltas = tx.clone();
        let result = client
            .complete_streaming(&request, &mut |d| {
                // A closed receiver means the caller stopped listening; the call is being
                // cancelled, so a lost delta does not matter.
                let _ = deltas.send(StreamItem::Delta(d));
            })
            .await;
        let _ = tx.send(StreamItem::Done(result));
    });
    let state = (rx, AbortOnDrop(task));
    futures::stream::unfold(state, |(mut rx, task)| async move {
        rx.recv().await.map(|item| (item, (rx, task)))
    })
}

/// Cancels the call's task when the stream that reads it is dropped.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Compile-time check that the trait stays usable as `dyn ModelClient`.
fn _object_safe(_: &dyn ModelClient) {}

#[cfg(test)]
mod tests {
    use super::*;
    use ba_protocol::convert::SequentialStamp;
    use ba_protocol::{ContentBlock, LogRole, Role};
    use serde_json::json;

    #[test]
    fn stop_reasons_of_both_providers_map_to_one_set() {
        assert_eq!(StopReason::from_provider("end_turn"), StopReason::EndTurn);
        assert_eq!(StopReason::from_provider("stop"), StopReason::EndTurn);
        assert_eq!(StopReason::from_provider("tool_calls"), StopReason::ToolUse);
        assert_eq!(StopReason::from_provider("length"), StopReason::MaxTokens);
        assert_eq!(
            StopReason::from_provider("content_filter"),
            StopReason::Refusal
        );
        assert_eq!(
            StopReason::from_provider("pause_turn"),
            StopReason::Other("pause_turn".into())
        );
    }

    #[test]
    fn response_becomes_one_assistant_entry_with_its_calls() {
        let response = ModelResponse {
            message: Message::new(
                Role::Assistant,
                vec![
                    ContentBlock::thinking("look it up", Some("sig".into())),
                    ContentBlock::text("Checking."),
                    ContentBlock::tool_use("toolu_1", "get_weather", json!({"city": "Paris"})),
                ],
            ),
            stop_reason: StopReason::ToolUse,
            usage: Usage::default(),
            id: "msg_1".into(),
            model: "m".into(),
            retries: 0,
            problems: Vec::new(),
        };
        let entries = response
            .to_log_entries(&mut SequentialStamp::default())
            .unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].role, LogRole::Assistant);
        assert_eq!(entries[0].calls()[0].id, "toolu_1");
        assert_eq!(
            entries[0].calls()[0].arguments_json().unwrap(),
            json!({"city": "Paris"})
        );
    }

    #[cfg(feature = "replay")]
    #[tokio::test]
    async fn stream_yields_deltas_then_the_answer() {
        use futures::StreamExt;
        let recording = r#"[{"response": {"message": {"role": "assistant", "content": [
            {"type": "text", "text": "Hello"},
            {"type": "tool_use", "id": "t1", "name": "calc", "input": {"a": 1}}]},
            "stop_reason": "tool_use"}}]"#;
        let client: Arc<dyn ModelClient> =
            Arc::new(ReplayClient::from_json(recording, "inline").unwrap());
        let request = ModelRequest::new("m", Vec::new()).with_stream(true);
        let items: Vec<StreamItem> = stream_response(client, request).collect().await;
        assert_eq!(items.len(), 4, "{items:?}");
        assert!(
            matches!(&items[0], StreamItem::Delta(StreamDelta::Text { text, .. }) if text == "Hello")
        );
        assert!(
            matches!(&items[2], StreamItem::Delta(StreamDelta::ToolInput { partial_json, .. }) if partial_json == r#"{"a":1}"#)
        );
        match &items[3] {
            StreamItem::Done(Ok(r)) => assert_eq!(r.stop_reason, StopReason::ToolUse),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hidden_entries_are_not_sent() {
        let mut hidden = LogEntry::new("u0", LogRole::User, "t").with_text("ui only");
        hidden.include_in_context = false;
        let shown = LogEntry::new("u1", LogRole::User, "t").with_text("hello");
        let request = ModelRequest::new("m", vec![hidden, shown]);
        let sent = request.context_entries();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].id, "u1");
    }
}
