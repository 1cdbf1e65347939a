//! Anthropic Messages streaming events and their accumulator.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Accumulated;
use super::partial_json;
use super::sse::{self, SseEvent};
use crate::anthropic::{AnthropicResponse, AnthropicUsage};
use crate::content::{ContentBlock, JsonMap};
use crate::error::{ProtocolError, Result};
use crate::message::Role;

/// A delta of one content block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockDelta {
    /// More text.
    TextDelta {
        /// The text.
        text: String,
    },
    /// More of a tool input, as a JSON fragment (may split a key or a string anywhere).
    InputJsonDelta {
        /// The fragment.
        partial_json: String,
    },
    /// More thinking.
    ThinkingDelta {
        /// The text.
        thinking: String,
    },
    /// The thinking block's signature.
    SignatureDelta {
        /// The signature.
        signature: String,
    },
    /// A citation for a text block.
    CitationsDelta {
        /// The citation object.
        citation: Value,
    },
    /// Any other delta type (`compaction_delta`, …), kept as written.
    #[serde(untagged)]
    Unknown(JsonMap),
}

/// The `delta` of `message_delta`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MessageDelta {
    /// Why generation stopped.
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// The matched stop sequence.
    #[serde(default)]
    pub stop_sequence: Option<String>,
    /// Other fields (`stop_details`, …).
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// One event of a Messages stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// The message shell (id, model, usage so far), with empty content.
    MessageStart {
        /// The shell.
        message: AnthropicResponse,
    },
    /// A block begins at `index`.
    ContentBlockStart {
        /// Block index.
        index: usize,
        /// The block as it starts (empty text, tool use with `{}` input, …).
        content_block: ContentBlock,
    },
    /// A block grows.
    ContentBlockDelta {
        /// Block index.
        index: usize,
        /// The growth.
        delta: BlockDelta,
    },
    /// A block is complete.
    ContentBlockStop {
        /// Block index.
        index: usize,
    },
    /// Stop reason and usage.
    MessageDelta {
        /// Stop reason and other fields.
        delta: MessageDelta,
        /// Usage so far.
        #[serde(default)]
        usage: Option<JsonMap>,
    },
    /// The message is complete.
    MessageStop,
    /// Keep-alive.
    Ping,
    /// The provider reports an error mid-stream.
    Error {
        /// `{type, message}`.
        error: Value,
    },
    /// Any other event type, kept as written.
    #[serde(untagged)]
    Unknown(JsonMap),
}

impl StreamEvent {
    /// Reads an event from the `data:` of an SSE event.
    pub fn from_sse(event: &SseEvent) -> Result<Self> {
        serde_json::from_str(&event.data).map_err(|e| {
            ProtocolError::json(
                format!(
                    "Anthropic stream event `{}`",
                    event.event.as_deref().unwrap_or("?")
                ),
                &e,
            )
        })
    }
}

#[derive(Debug)]
struct OpenBlock {
    block: ContentBlock,
    json: Option<String>,
    stopped: bool,
}

/// Rebuilds the final message from stream events.
#[derive(Debug, Default)]
pub struct AnthropicAccumulator {
    message: Option<AnthropicResponse>,
    blocks: Vec<OpenBlock>,
    stopped: bool,
    error: Option<String>,
}

impl AnthropicAccumulator {
    /// A new accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one event. Fails on an event that breaks the protocol (a delta for a block that
    /// never started, a delta of the wrong kind).
    pub fn push(&mut self, event: StreamEvent) -> Result<()> {
        match event {
            StreamEvent::MessageStart { message } => {
                self.blocks = message
                    .content
                    .iter()
                    .cloned()
                    .map(|block| OpenBlock {
                        block,
                        json: None,
                        stopped: true,
                    })
                    .collect();
                self.message = Some(message);
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                if index != self.blocks.len() {
                    return Err(ProtocolError::Stream(format!(
                        "content_block_start for index {index}, expected {}",
                        self.blocks.len()
                    )));
                }
                self.blocks.push(OpenBlock {
                    block: content_block,
                    json: None,
                    stopped: false,
                });
            }
            StreamEvent::ContentBlockDelta { index, delta } => {
                let open = self.blocks.get_mut(index).ok_or_else(|| {
                    ProtocolError::Stream(format!(
                        "content_block_delta for block {index}, which never started"
                    ))
                })?;
                apply_delta(open, index, delta)?;
            }
            StreamEvent::ContentBlockStop { index } => {
                let open = self.blocks.get_mut(index).ok_or_else(|| {
                    ProtocolError::Stream(format!(
                        "content_block_stop for block {index}, which never started"
                    ))
                })?;
                open.stopped = true;
                if let (ContentBlock::ToolUse(u), Some(json)) = (&mut open.block, open.json.take())
                {
                    u.input = if json.trim().is_empty() {
                        Value::Object(JsonMap::new())
                    } else {
                        serde_json::from_str(&json).map_err(|e| {
                            ProtocolError::Stream(format!(
                                "tool input of block {index} (`{}`) is not valid JSON: {e}",
                                u.id
                            ))
                        })?
                    };
                }
            }
            StreamEvent::MessageDelta { delta, usage } => {
                let message = self.message.as_mut().ok_or_else(|| {
                    ProtocolError::Stream("message_delta before message_start".to_owned())
                })?;
                if delta.stop_reason.is_some() {
                    message.stop_reason = delta.stop_reason;
                }
                if delta.stop_sequence.is_some() {
                    message.stop_sequence = delta.stop_sequence;
                }
                message.extra.extend(delta.extra);
                if let Some(usage) = usage {
                    merge_usage(&mut message.usage, usage);
                }
            }
            StreamEvent::MessageStop => self.stopped = true,
            StreamEvent::Ping | StreamEvent::Unknown(_) => {}
            StreamEvent::Error { error } => {
                let text = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error");
                let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
                self.error = Some(format!("{kind}: {text}"));
            }
        }
        Ok(())
    }

    /// Feeds one SSE event.
    pub fn push_sse(&mut self, event: &SseEvent) -> Result<()> {
        self.push(StreamEvent::from_sse(event)?)
    }

    /// The text streamed so far (all text blocks), for recording a cut stream.
    pub fn partial_text(&self) -> String {
        let blocks: Vec<ContentBlock> = self.blocks.iter().map(|b| b.block.clone()).collect();
        crate::content::join_text(&blocks)
    }

    /// The message from what was received. A block that never stopped is kept; a tool input
    /// cut mid-JSON is repaired as far as it goes and reported.
    pub fn finish(self) -> Result<Accumulated<AnthropicResponse>> {
        let mut problems = Vec::new();
        let mut message = self.message.ok_or_else(|| {
            ProtocolError::Stream("the stream has no message_start event".to_owned())
        })?;
        if let Some(error) = self.error {
            problems.push(format!("the stream reported an error: {error}"));
        }
        let mut content = Vec::with_capacity(self.blocks.len());
        for (index, mut open) in self.blocks.into_iter().enumerate() {
            if !open.stopped {
                problems.push(format!(
                    "block {index} ({}) never stopped",
                    open.block.type_name()
                ));
            }
            if let (ContentBlock::ToolUse(u), Some(json)) = (&mut open.block, open.json.take()) {
                match partial_json::repair(&json) {
                    Some(value) => u.input = value,
                    None => u.input = Value::Object(JsonMap::new()),
                }
                problems.push(format!(
                    "tool input of block {index} (`{}`) was cut mid-JSON after {} bytes",
                    u.id,
                    json.len()
                ));
            }
            content.push(open.block);
        }
        message.content = content;
        message.role = Role::Assistant;
        if !self.stopped {
            problems.push("the stream ended without message_stop".to_owned());
        }
        let complete = self.stopped && problems.is_empty();
        Ok(Accumulated {
            message,
            complete,
            problems,
        })
    }
}

fn apply_delta(open: &mut OpenBlock, index: usize, delta: BlockDelta) -> Result<()> {
    let mismatch = |block: &ContentBlock, delta: &str| {
        ProtocolError::Stream(format!(
            "{delta} for block {index}, which is a `{}` block",
            block.type_name()
        ))
    };
    match (&mut open.block, delta) {
        (ContentBlock::Text(t), BlockDelta::TextDelta { text }) => t.text.push_str(&text),
        (ContentBlock::Text(t), BlockDelta::CitationsDelta { citation }) => {
            let list = t
                .extra
                .entry("citations")
                .or_insert_with(|| Value::Array(Vec::new()));
            if !list.is_array() {
                *list = Value::Array(Vec::new());
            }
            if let Value::Array(items) = list {
                items.push(citation);
            }
        }
        (ContentBlock::Thinking(t), BlockDelta::ThinkingDelta { thinking }) => {
            t.thinking.push_str(&thinking)
        }
        (ContentBlock::Thinking(t), BlockDelta::SignatureDelta { signature }) => {
            t.signature
                .get_or_insert_with(String::new)
                .push_str(&signature);
        }
        (ContentBlock::ToolUse(_), BlockDelta::InputJsonDelta { partial_json }) => {
            open.json
                .get_or_insert_with(String::new)
                .push_str(&partial_json);
        }
        (ContentBlock::Unknown(map), BlockDelta::Unknown(delta)) => merge_unknown(map, delta),
        (ContentBlock::Unknown(map), known) => {
            if let Ok(Value::Object(delta)) = serde_json::to_value(&known) {
                merge_unknown(map, delta);
            }
        }
        (block, BlockDelta::Unknown(delta)) => {
            let kind = delta
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_owned();
            return Err(mismatch(block, &format!("`{kind}` delta")));
        }
        (block, known) => {
            let kind = serde_json::to_value(&known)
                .ok()
                .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default();
            return Err(mismatch(block, &format!("`{kind}`")));
        }
    }
    Ok(())
}

/// Merges a delta of an unknown kind into an unknown block: strings append, other values
/// replace, so a `compaction_delta` fills a `compaction` block's `content`.
fn merge_unknown(block: &mut JsonMap, delta: JsonMap) {
    for (key, value) in delta {
        if key == "type" {
            continue;
        }
        match (block.get_mut(&key), value) {
            (Some(Value::String(existing)), Value::String(more)) => existing.push_str(&more),
            (_, value) => {
                block.insert(key, value);
            }
        }
    }
}

fn merge_usage(usage: &mut AnthropicUsage, update: JsonMap) {
    let mut merged = match serde_json::to_value(&*usage) {
        Ok(Value::Object(map)) => map,
        _ => JsonMap::new(),
    };
    for (k, v) in update {
        merged.insert(k, v);
    }
    if let Ok(new) = serde_json::from_value(Value::Object(merged)) {
        *usage = new;
    }
}

/// Accumulates a whole SSE text (as recorded) into its final message.
pub fn accumulate_sse(text: &str) -> Result<Accumulated<AnthropicResponse>> {
    let mut acc = AnthropicAccumulator::new();
    for event in sse::parse(text) {
        acc.push_sse(&event)?;
    }
    acc.finish()
}
