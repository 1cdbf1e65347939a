//! OpenAI Responses API wire types (`POST /v1/responses`): the request's input items, the
//! response's output items, usage.
//!
//! A Responses conversation is a flat list of typed items rather than messages: `message`
//! (user, system, developer or assistant text), `function_call` / `function_call_output`
//! (tied by `call_id`), `reasoning` (a summary, and the model's reasoning as
//! `encrypted_content`, which must be sent back for the model to keep it when nothing is stored
//! server-side). Items of any other kind (`compaction` items from `/responses/compact`,
//! `item_reference`, hosted tool calls) are kept whole as [`ResponseItem::Other`], so a request
//! read and written again is the same JSON. Every typed item keeps the fields this crate does
//! not model (`id`, `status`, …) in its `extra` map, and content parts are kept as written.
//!
//! ```
//! use ba_protocol::responses::{ResponseItem, ResponsesRequest};
//!
//! let req = ResponsesRequest::from_json(r#"{
//!   "model": "gpt-5", "instructions": "Be brief.", "store": false,
//!   "input": [
//!     {"role": "user", "content": "Weather in Paris?"},
//!     {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA…"},
//!     {"type": "function_call", "call_id": "call_1", "name": "get_weather",
//!      "arguments": "{\"city\":\"Paris\"}"},
//!     {"type": "function_call_output", "call_id": "call_1", "output": "18°C"}
//!   ]
//! }"#)?;
//! let items = req.items();
//! assert!(matches!(&items[1], ResponseItem::Reasoning(r) if r.encrypted_content.is_some()));
//! assert_eq!(serde_json::to_value(&req)?["input"][0], serde_json::json!(
//!     {"role": "user", "content": "Weather in Paris?"}));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::content::{JsonMap, kind_of};
use crate::error::{ProtocolError, Result};
use crate::log::LogRole;

/// Input content part types of the Responses API.
pub const RESPONSES_PART_TYPES: &[&str] = &[
    "input_text",
    "input_image",
    "input_file",
    "input_audio",
    "output_text",
    "refusal",
];

/// The content of a `message` item: a string, or parts (`input_text`, `output_text`,
/// `input_image`, `refusal`, …) kept as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Content parts, each a JSON object with a `type`.
    Parts(#[schemars(with = "Vec<Value>")] Vec<JsonMap>),
}

impl MessageContent {
    /// The text: the string, or the text of the `input_text`, `output_text` and `refusal`
    /// parts joined by newlines.
    pub fn to_text(&self) -> Cow<'_, str> {
        match self {
            Self::Text(text) => Cow::Borrowed(text),
            Self::Parts(parts) => Cow::Owned(parts_text(parts)),
        }
    }
}

pub(crate) fn parts_text(parts: &[JsonMap]) -> String {
    parts
        .iter()
        .filter_map(|p| {
            p.get("text")
                .or_else(|| p.get("refusal"))
                .and_then(Value::as_str)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A `message` item.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageItem {
    /// `user`, `system`, `developer` or `assistant`.
    pub role: LogRole,
    /// The content.
    pub content: MessageContent,
    /// Whether the item said `"type": "message"` (the short input form leaves it out).
    pub typed: bool,
    /// Other fields (`id`, `status`, …), kept as written.
    pub extra: JsonMap,
}

/// A `function_call` item: the model calls a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallItem {
    /// The id the result answers with.
    pub call_id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as a JSON string, kept byte for byte.
    pub arguments: String,
    /// Other fields (`id` = `fc_…`, `status`, …), kept as written.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// The output of a tool call: a string, or content parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FunctionOutput {
    /// Plain text.
    Text(String),
    /// Content parts (`input_text`, `input_image`, …), kept as written.
    Parts(Vec<JsonMap>),
}

/// A `function_call_output` item: a tool's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallOutputItem {
    /// The call it answers.
    pub call_id: String,
    /// The result.
    pub output: FunctionOutput,
    /// Other fields (`id`, `status`, …), kept as written.
    #[serde(flatten)]
    pub extra: JsonMap,
}

/// A `reasoning` item: a summary of the model's reasoning and, when asked for with
/// `include: ["reasoning.encrypted_content"]`, the reasoning itself, encrypted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningItem {
    /// Item id (`rs_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Summary parts (`{"type": "summary_text", "text": …}`), kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Vec<JsonMap>>,
    /// The reasoning, opaque; send it back unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_content: Option<String>,
    /// Other fields (`content`, `status`, …), kept as written.
    #[serde(flatten)]
    pub extra: JsonMap,
}

impl ReasoningItem {
    /// The summary texts joined by blank lines.
    pub fn summary_text(&self) -> String {
        self.summary
            .iter()
            .flatten()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

/// One item of a Responses input or output.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseItem {
    /// `message`.
    Message(MessageItem),
    /// `function_call`.
    FunctionCall(FunctionCallItem),
    /// `function_call_output`.
    FunctionCallOutput(FunctionCallOutputItem),
    /// `reasoning`.
    Reasoning(ReasoningItem),
    /// Any other kind (`compaction`, `item_reference`, hosted tool calls …), kept whole.
    Other(JsonMap),
}

impl ResponseItem {
    /// The item's `type` (`message` for a message written without one).
    pub fn kind(&self) -> &str {
        match self {
            Self::Message(_) => "message",
            Self::FunctionCall(_) => "function_call",
            Self::FunctionCallOutput(_) => "function_call_output",
            Self::Reasoning(_) => "reasoning",
            Self::Other(map) => map.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// Reads one item; the error names what is wrong.
    pub fn from_value(value: Value) -> std::result::Result<Self, serde_json::Error> {
        let Value::Object(mut map) = value else {
            return Err(serde_json::Error::custom(format_args!(
                "an item must be an object, found {}",
                kind_of(&value)
            )));
        };
        let kind = match map.get("type") {
            None => None,
            Some(Value::String(kind)) => Some(kind.clone()),
            Some(other) => {
                return Err(serde_json::Error::custom(format_args!(
                    "field `type` must be a string, found {}",
                    kind_of(other)
                )));
            }
        };
        let untyped_message = kind.is_none() && map.contains_key("role");
        match kind.as_deref() {
            Some("message") | None if untyped_message || kind.is_some() => {
                map.remove("type");
                let role = match map.remove("role") {
                    Some(Value::String(role)) => match role.as_str() {
                        "user" => LogRole::User,
                        "assistant" => LogRole::Assistant,
                        "system" => LogRole::System,
                        "developer" => LogRole::Developer,
                        other => {
                            return Err(serde_json::Error::custom(format_args!(
                                "field `role`: unknown role \"{other}\""
                            )));
                        }
                    },
                    Some(other) => {
                        return Err(serde_json::Error::custom(format_args!(
                            "field `role` must be a string, found {}",
                            kind_of(&other)
                        )));
                    }
                    None => return Err(serde_json::Error::missing_field("role")),
                };
                let content = match map.remove("content") {
                    Some(v) => serde_json::from_value(v).map_err(|_| {
                        serde_json::Error::custom(
                            "field `content` must be a string or an array of part objects",
                        )
                    })?,
                    None => return Err(serde_json::Error::missing_field("content")),
                };
                Ok(Self::Message(MessageItem {
                    role,
                    content,
                    typed: !untyped_message,
                    extra: map,
                }))
            }
            Some("function_call") => {
                map.remove("type");
                Ok(Self::FunctionCall(serde_json::from_value(Value::Object(
                    map,
                ))?))
            }
            Some("function_call_output") => {
                map.remove("type");
                Ok(Self::FunctionCallOutput(serde_json::from_value(
                    Value::Object(map),
                )?))
            }
            Some("reasoning") => {
                map.remove("type");
                Ok(Self::Reasoning(serde_json::from_value(Value::Object(map))?))
            }
            Some(_) => Ok(Self::Other(map)),
            None => Err(serde_json::Error::custom(
                "an item needs a `type` (or a `role`, for a message)",
            )),
        }
    }
}

impl Serialize for ResponseItem {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        let rest = match self {
            Self::Message(m) => {
                if m.typed {
                    map.serialize_entry("type", "message")?;
                }
                map.serialize_entry("role", &m.role)?;
                map.serialize_entry("content", &m.content)?;
                &m.extra
            }
            Self::Other(raw) => raw,
            Self::FunctionCall(_) | Self::FunctionCallOutput(_) | Self::Reasoning(_) => {
                map.serialize_entry("type", self.kind())?;
                let value = match self {
                    Self::FunctionCall(c) => serde_json::to_value(c),
                    Self::FunctionCallOutput(o) => serde_json::to_value(o),
                    Self::Reasoning(r) => serde_json::to_value(r),
                    _ => Ok(Value::Null),
                }
                .map_err(serde::ser::Error::custom)?;
                if let Value::Object(fields) = value {
                    for (k, v) in &fields {
                        map.serialize_entry(k, v)?;
                    }
                }
                return map.end();
            }
        };
        for (k, v) in rest {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ResponseItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Self::from_value(Value::deserialize(d)?).map_err(D::Error::custom)
    }
}

impl JsonSchema for ResponseItem {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("ResponseItem")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({
            "description": "One item of a Responses input or output: `message` (role, content), `function_call` (call_id, name, arguments), `function_call_output` (call_id, output), `reasoning` (id, summary, encrypted_content), or another kind kept whole.",
            "type": "object",
            "properties": {
                "type": { "type": "string" },
                "role": { "enum": ["user", "assistant", "system", "developer"] },
                "content": { "anyOf": [{ "type": "string" }, { "type": "array", "items": { "type": "object" } }] },
                "call_id": { "type": "string" },
                "name": { "type": "string" },
                "arguments": { "type": "string" },
                "output": { "anyOf": [{ "type": "string" }, { "type": "array", "items": { "type": "object" } }] },
                "summary": { "type": "array", "items": { "type": "object" } },
                "encrypted_content": { "type": "string" }
            }
        })
    }
}

/// The `input` of a request: a string (one user message) or items.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum ResponsesInput {
    /// One user message.
    Text(String),
    /// Items.
    Items(Vec<ResponseItem>),
}

/// A Responses request body, or just its conversation (`instructions` and `input`).
#[derive(Debug, Clone, PartialEq, JsonSchema)]
pub struct ResponsesRequest {
    /// The system instructions.
    pub instructions: Option<String>,
    /// The conversation.
    pub input: ResponsesInput,
    /// Other request fields (`model`, `tools`, `store`, `include`, `prompt_cache_key`, …),
    /// kept as written.
    #[schemars(skip)]
    pub extra: JsonMap,
}

impl ResponsesRequest {
    /// Reads a request body; errors name the item index and field.
    pub fn from_json(text: &str) -> Result<Self> {
        crate::validate::check_size("Responses request", text, crate::validate::MAX_INPUT_BYTES)?;
        let value: Value =
            serde_json::from_str(text).map_err(|e| ProtocolError::json("Responses request", &e))?;
        Self::from_json_value(value)
    }

    /// Reads a request from parsed JSON.
    pub fn from_json_value(value: Value) -> Result<Self> {
        let Value::Object(mut map) = value else {
            return Err(ProtocolError::invalid(
                "$",
                format!("a request must be an object, found {}", kind_of(&value)),
            ));
        };
        let instructions = match map.remove("instructions") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text),
            Some(other) => {
                return Err(ProtocolError::invalid(
                    "instructions",
                    format!("must be a string, found {}", kind_of(&other)),
                ));
            }
        };
        let input = match map.remove("input") {
            Some(Value::String(text)) => ResponsesInput::Text(text),
            Some(Value::Array(items)) => ResponsesInput::Items(read_items(items, "input")?),
            Some(other) => {
                return Err(ProtocolError::invalid(
                    "input",
                    format!("must be a string or an array, found {}", kind_of(&other)),
                ));
            }
            None => return Err(ProtocolError::invalid("input", "missing field `input`")),
        };
        Ok(Self {
            instructions,
            input,
            extra: map,
        })
    }

    /// The items of the input (a string input is one user message).
    pub fn items(&self) -> Cow<'_, [ResponseItem]> {
        match &self.input {
            ResponsesInput::Items(items) => Cow::Borrowed(items),
            ResponsesInput::Text(text) => Cow::Owned(vec![ResponseItem::Message(MessageItem {
                role: LogRole::User,
                content: MessageContent::Text(text.clone()),
                typed: false,
                extra: JsonMap::new(),
            })]),
        }
    }

    /// The conversation as `{"instructions": …, "input": […]}`, without the other fields.
    pub fn conversation_json(&self) -> Value {
        let mut map = JsonMap::new();
        if let Some(instructions) = &self.instructions {
            map.insert(
                "instructions".to_owned(),
                Value::String(instructions.clone()),
            );
        }
        map.insert(
            "input".to_owned(),
            serde_json::to_value(&self.input).unwrap_or(Value::Null),
        );
        Value::Object(map)
    }
}

pub(crate) fn read_items(items: Vec<Value>, path: &str) -> Result<Vec<ResponseItem>> {
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        out.push(
            ResponseItem::from_value(item)
                .map_err(|e| ProtocolError::invalid(format!("{path}[{i}]"), e.to_string()))?,
        );
    }
    Ok(out)
}

impl Serialize for ResponsesRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(instructions) = &self.instructions {
            map.serialize_entry("instructions", instructions)?;
        }
        map.serialize_entry("input", &self.input)?;
        for (k, v) in &self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ResponsesRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Self::from_json_value(Value::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// Token usage of a response.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ResponsesUsage {
    /// Input tokens, the cached ones included.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens, the reasoning ones included.
    #[serde(default)]
    pub output_tokens: u64,
    /// `cached_tokens`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Value>")]
    pub input_tokens_details: Option<JsonMap>,
    /// `reasoning_tokens`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Value>")]
    pub output_tokens_details: Option<JsonMap>,
    /// Other fields (`total_tokens`, …), kept as written.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: JsonMap,
}

impl ResponsesUsage {
    /// Input tokens the provider read from its prompt cache.
    pub fn cached_tokens(&self) -> u64 {
        detail(self.input_tokens_details.as_ref(), "cached_tokens")
    }

    /// Output tokens spent reasoning.
    pub fn reasoning_tokens(&self) -> u64 {
        detail(self.output_tokens_details.as_ref(), "reasoning_tokens")
    }
}

fn detail(map: Option<&JsonMap>, key: &str) -> u64 {
    map.and_then(|m| m.get(key))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// A Responses API response (and what a stream accumulates to).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResponsesResponse {
    /// Response id (`resp_…`).
    #[serde(default)]
    pub id: String,
    /// The model that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `completed`, `incomplete`, `failed`, `in_progress`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The output items, in order.
    #[serde(default)]
    pub output: Vec<ResponseItem>,
    /// Token usage, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ResponsesUsage>,
    /// Other fields (`object`, `created_at`, `incomplete_details`, `error`, …), kept as
    /// written.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: JsonMap,
}

impl ResponsesResponse {
    /// Reads a response body; errors name the output index and field.
    pub fn from_json(text: &str) -> Result<Self> {
        crate::validate::check_size("Responses response", text, crate::validate::MAX_INPUT_BYTES)?;
        let mut value: Value = serde_json::from_str(text)
            .map_err(|e| ProtocolError::json("Responses response", &e))?;
        // The items are read one by one, so an error names the one that is wrong; the rest of
        // the response after them.
        let output = match value.as_object_mut().and_then(|m| m.remove("output")) {
            Some(Value::Array(items)) => Some(read_items(items, "output")?),
            Some(other) => {
                return Err(ProtocolError::invalid(
                    "output",
                    format!("must be an array, found {}", kind_of(&other)),
                ));
            }
            None => None,
        };
        let mut response: Self = serde_json::from_value(value)
            .map_err(|e| ProtocolError::json("Responses response", &e))?;
        if let Some(output) = output {
            response.output = output;
        }
        Ok(response)
    }

    /// Why the answer ended early (`incomplete_details.reason`: `max_output_tokens`,
    /// `content_filter`), when it did.
    pub fn incomplete_reason(&self) -> Option<&str> {
        self.extra
            .get("incomplete_details")
            .and_then(|d| d.get("reason"))
            .and_then(Value::as_str)
    }

    /// The output's text: the assistant messages' text and refusals, joined by newlines.
    pub fn output_text(&self) -> String {
        self.output
            .iter()
            .filter_map(|item| match item {
                ResponseItem::Message(m) => Some(m.content.to_text().into_owned()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}
