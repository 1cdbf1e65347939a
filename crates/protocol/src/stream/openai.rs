//! OpenAI Chat Completions stream chunks and their accumulator.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Accumulated;
use super::sse::{self, SseEvent};
use crate::content::{Content, JsonMap};
use crate::error::{ProtocolError, Result};
use crate::log::{FunctionCall, LogRole};
use crate::openai::{ChatChoice, ChatMessage, ChatResponse, ChatToolCall, ChatUsage};

/// The function part of a tool-call delta.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FunctionDelta {
    /// The name, sent once.
    #[serde(default)]
    pub name: Option<String>,
    /// More of the arguments string.
    #[serde(default)]
    pub arguments: Option<String>,
}

/// A tool-call delta; the calls of one message are told apart by `index`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolCallDelta {
    /// Which call of the message this grows.
    pub index: usize,
    /// The call id, sent once.
    #[serde(default)]
    pub id: Option<String>,
    /// `function`, sent once.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Name and argument fragments.
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

/// The `delta` of a chunk's choice.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChunkDelta {
    /// The role, sent once.
    #[serde(default)]
    pub role: Option<String>,
    /// More text.
    #[serde(default)]
    pub content: Option<String>,
    /// More refusal text.
    #[serde(default)]
    pub refusal: Option<String>,
    /// Tool-call fragments.
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
    /// Other fields (`reasoning_content` of compatible servers, …).
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// One choice of a chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkChoice {
    /// Choice index.
    #[serde(default)]
    pub index: u32,
    /// The growth.
    #[serde(default)]
    pub delta: ChunkDelta,
    /// Set on the last chunk of the choice.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// One `chat.completion.chunk`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatChunk {
    /// Completion id.
    #[serde(default)]
    pub id: String,
    /// Model.
    #[serde(default)]
    pub model: String,
    /// The choices this chunk grows.
    #[serde(default)]
    pub choices: Vec<ChunkChoice>,
    /// Usage, on the last chunk when requested.
    #[serde(default)]
    pub usage: Option<ChatUsage>,
    /// Other fields.
    #[serde(flatten)]
    pub extra: JsonMap,
}

#[derive(Debug, Default)]
struct ChoiceState {
    content: Option<String>,
    refusal: Option<String>,
    calls: BTreeMap<usize, (String, String, String)>,
    extra: JsonMap,
    finish_reason: Option<String>,
}

/// Rebuilds the final response from chunks.
#[derive(Debug, Default)]
pub struct OpenAiAccumulator {
    id: String,
    model: String,
    choices: BTreeMap<u32, ChoiceState>,
    usage: Option<ChatUsage>,
    extra: JsonMap,
    done: bool,
    chunks: usize,
}

impl OpenAiAccumulator {
    /// A new accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one chunk.
    pub fn push(&mut self, chunk: ChatChunk) {
        self.chunks += 1;
        if self.id.is_empty() {
            self.id = chunk.id;
        }
        if self.model.is_empty() {
            self.model = chunk.model;
        }
        self.extra.extend(chunk.extra);
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        for choice in chunk.choices {
            let state = self.choices.entry(choice.index).or_default();
            let delta = choice.delta;
            if let Some(text) = delta.content {
                state
                    .content
                    .get_or_insert_with(String::new)
                    .push_str(&text);
            }
            if let Some(text) = delta.refusal {
                state
                    .refusal
                    .get_or_insert_with(String::new)
                    .push_str(&text);
            }
            for call in delta.tool_calls.unwrap_or_default() {
                let entry = state.calls.entry(call.index).or_default();
                if let Some(id) = call.id {
                    entry.0 = id;
                }
                if let Some(function) = call.function {
                    if let Some(name) = function.name {
                        entry.1.push_str(&name);
                    }
                    if let Some(arguments) = function.arguments {
                        entry.2.push_str(&arguments);
                    }
                }
            }
            for (k, v) in delta.extra {
                match (state.extra.get_mut(&k), v) {
                    (Some(Value::String(existing)), Value::String(more)) => {
                        existing.push_str(&more)
                    }
                    (_, v) => {
                        state.extra.insert(k, v);
                    }
                }
            }
            if choice.finish_reason.is_some() {
                state.finish_reason = choice.finish_reason;
            }
        }
    }

    /// Feeds one SSE event; `[DONE]` marks the end.
    pub fn push_sse(&mut self, event: &SseEvent) -> Result<()> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: ChatChunk = serde_json::from_str(data)
            .map_err(|e| ProtocolError::json("OpenAI stream chunk", &e))?;
        self.push(chunk);
        Ok(())
    }

    /// The text streamed so far (choice 0), for recording a cut stream.
    pub fn partial_text(&self) -> String {
        self.choices
            .get(&0)
            .and_then(|c| c.content.clone())
            .unwrap_or_default()
    }

    /// The response from what was received; a call whose arguments are not valid JSON is
    /// reported.
    pub fn finish(self) -> Result<Accumulated<ChatResponse>> {
        if self.chunks == 0 {
            return Err(ProtocolError::Stream("the stream has no chunk".to_owned()));
        }
        let mut problems = Vec::new();
        let mut choices = Vec::with_capacity(self.choices.len());
        for (index, state) in self.choices {
            let mut tool_calls = Vec::with_capacity(state.calls.len());
            for (call_index, (id, name, arguments)) in state.calls {
                if !arguments.is_empty() && serde_json::from_str::<Value>(&arguments).is_err() {
                    problems.push(format!("tool call {call_index} (`{id}`) of choice {index}: arguments are not complete JSON"));
                }
                tool_calls.push(ChatToolCall {
                    id,
                    function: FunctionCall { name, arguments },
                    extra: JsonMap::new(),
                });
            }
            let mut extra = state.extra;
            if let Some(refusal) = state.refusal {
                extra.insert("refusal".to_owned(), Value::from(refusal));
            }
            if state.finish_reason.is_none() {
                problems.push(format!("choice {index} has no finish_reason"));
            }
            choices.push(ChatChoice {
                index,
                message: ChatMessage {
                    role: LogRole::Assistant,
                    content: state.content.map(Content::Text),
                    name: None,
                    tool_calls: (!tool_calls.is_empty()).then_some(tool_calls),
                    tool_call_id: None,
                    extra,
                },
                finish_reason: state.finish_reason,
                extra: JsonMap::new(),
            });
        }
        let complete = problems.is_empty();
        let mut extra = self.extra;
        extra.insert("object".to_owned(), Value::from("chat.completion"));
        let message = ChatResponse {
            id: self.id,
            model: self.model,
            choices,
            usage: self.usage,
            extra,
        };
        Ok(Accumulated {
            message,
            complete,
            problems,
        })
    }

    /// Whether `[DONE]` was seen.
    pub fn saw_done(&self) -> bool {
        self.done
    }
}

/// Accumulates a whole SSE text (as recorded) into its final response.
pub fn accumulate_sse(text: &str) -> Result<Accumulated<ChatResponse>> {
    let mut acc = OpenAiAccumulator::new();
    for event in sse::parse(text) {
        acc.push_sse(&event)?;
    }
    acc.finish()
}

/// Accumulates chunks given as JSON values (as the OpenAPI examples record them).
pub fn accumulate_chunks(chunks: &[Value]) -> Result<Accumulated<ChatResponse>> {
    let mut acc = OpenAiAccumulator::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let chunk: ChatChunk = serde_json::from_value(chunk.clone())
            .map_err(|e| ProtocolError::invalid(format!("chunks[{i}]"), e.to_string()))?;
        acc.push(chunk);
    }
    acc.finish()
}
