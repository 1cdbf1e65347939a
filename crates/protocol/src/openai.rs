//! OpenAI Chat Completions wire types: request messages, tool calls, responses.

use schemars::JsonSchema;
use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::content::{Content, JsonMap, kind_of};
use crate::error::{ProtocolError, Result};
use crate::fields::Fields;
use crate::log::{FunctionCall, LogRole};

/// Roles of Chat Completions messages; the same set as the log's.
pub type ChatRole = LogRole;

/// Content part types the Chat Completions API defines; other block types cannot be sent.
pub const OPENAI_PART_TYPES: &[&str] = &["text", "image_url", "input_audio", "file", "refusal"];

/// A tool call of an assistant message.
#[derive(Debug, Clone, PartialEq, JsonSchema)]
pub struct ChatToolCall {
    /// Call id (`call_…`).
    pub id: String,
    /// The function and its JSON-string arguments.
    pub function: FunctionCall,
    /// Other fields, kept as written.
    #[schemars(skip)]
    pub extra: JsonMap,
}

impl Serialize for ChatToolCall {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry("function", &self.function)?;
        for (k, v) in &self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ChatToolCall {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let mut f = Fields::from_value::<D::Error>(Value::deserialize(d)?, "tool call")?;
        let id = f.req_string("id")?;
        match f.opt_string::<D::Error>("type")?.as_deref() {
            None | Some("function") => {}
            Some(other) => {
                return Err(D::Error::custom(format_args!(
                    "tool call `{id}`: field `type` must be \"function\", found \"{other}\""
                )));
            }
        }
        let function: FunctionCall = f.opt("function")?.ok_or_else(|| f.missing("function"))?;
        Ok(Self {
            id,
            function,
            extra: f.rest(),
        })
    }
}

/// One Chat Completions message.
#[derive(Debug, Clone, PartialEq, JsonSchema)]
pub struct ChatMessage {
    /// The role.
    pub role: ChatRole,
    /// A string or content parts; `null` and absent are the same.
    pub content: Option<Content>,
    /// Participant name.
    pub name: Option<String>,
    /// Tool calls of an assistant message.
    pub tool_calls: Option<Vec<ChatToolCall>>,
    /// The call a `tool` message answers.
    pub tool_call_id: Option<String>,
    /// Other fields (`refusal`, `audio`, `annotations`, …), kept as written.
    #[schemars(skip)]
    pub extra: JsonMap,
}

impl ChatMessage {
    /// A message with a role and text.
    pub fn new(role: ChatRole, text: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(Content::Text(text.into())),
            name: None,
            tool_calls: None,
            tool_call_id: None,
            extra: JsonMap::new(),
        }
    }

    pub(crate) fn from_value<E: serde::de::Error>(value: Value) -> std::result::Result<Self, E> {
        let mut f = Fields::from_value::<E>(value, "message")?;
        let role = match f.remove("role") {
            Some(Value::String(role)) => match role.as_str() {
                "system" => LogRole::System,
                "developer" => LogRole::Developer,
                "user" => LogRole::User,
                "assistant" => LogRole::Assistant,
                "tool" => LogRole::Tool,
                "function" => {
                    return Err(E::custom(
                        "field `role`: the deprecated `function` role is not supported; use `tool` messages",
                    ));
                }
                other => {
                    return Err(E::custom(format_args!(
                        "field `role`: unknown role \"{other}\""
                    )));
                }
            },
            Some(other) => {
                return Err(E::custom(format_args!(
                    "field `role` must be a string, found {}",
                    kind_of(&other)
                )));
            }
            None => return Err(f.missing("role")),
        };
        let content = match f.remove("content") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                Content::from_value::<E>(v)
                    .map_err(|e| E::custom(format_args!("field `content`: {e}")))?,
            ),
        };
        Ok(Self {
            role,
            content,
            name: f.opt_string("name")?,
            tool_calls: f.opt("tool_calls")?,
            tool_call_id: f.opt_string("tool_call_id")?,
            extra: f.rest(),
        })
    }
}

impl Serialize for ChatMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("role", &self.role)?;
        match &self.content {
            Some(content) => map.serialize_entry("content", content)?,
            // An assistant message that only calls tools carries `content: null`.
            None if self.role == LogRole::Assistant => {
                map.serialize_entry("content", &Value::Null)?
            }
            None => {}
        }
        if let Some(name) = &self.name {
            map.serialize_entry("name", name)?;
        }
        if let Some(calls) = &self.tool_calls {
            map.serialize_entry("tool_calls", calls)?;
        }
        if let Some(id) = &self.tool_call_id {
            map.serialize_entry("tool_call_id", id)?;
        }
        for (k, v) in &self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ChatMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Self::from_value(Value::deserialize(d)?)
    }
}

/// A Chat Completions request body, or just its conversation (`{"messages":[…]}`).
#[derive(Debug, Clone, PartialEq, Default, JsonSchema)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Other request fields (`model`, `tools`, `stream`, …), kept as written.
    #[schemars(skip)]
    pub extra: JsonMap,
}

impl ChatRequest {
    /// Reads a request body; errors name the message index and field.
    pub fn from_json(text: &str) -> Result<Self> {
        crate::validate::check_size("OpenAI request", text, crate::validate::MAX_INPUT_BYTES)?;
        let value: Value =
            serde_json::from_str(text).map_err(|e| ProtocolError::json("OpenAI request", &e))?;
        Self::from_json_value(value)
    }

    /// Reads a request from parsed JSON.
    pub fn from_json_value(value: Value) -> Result<Self> {
        let invalid =
            |path: String, e: serde_json::Error| ProtocolError::invalid(path, e.to_string());
        let mut f = Fields::from_value::<serde_json::Error>(value, "OpenAI request")
            .map_err(|e| invalid("$".to_owned(), e))?;
        let messages = match f.remove("messages") {
            Some(Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    out.push(
                        ChatMessage::from_value(item)
                            .map_err(|e| invalid(format!("messages[{i}]"), e))?,
                    );
                }
                out
            }
            Some(other) => {
                return Err(ProtocolError::invalid(
                    "messages",
                    format!("must be an array, found {}", kind_of(&other)),
                ));
            }
            None => {
                return Err(ProtocolError::invalid(
                    "messages",
                    "missing field `messages`",
                ));
            }
        };
        Ok(Self {
            messages,
            extra: f.rest(),
        })
    }

    /// The conversation part of the request, serialisable as `{"messages":[…]}`.
    pub fn conversation(&self) -> ChatConversation<'_> {
        ChatConversation {
            messages: &self.messages,
        }
    }

    /// The conversation as `{"messages":[…]}`, without the other request fields.
    pub fn conversation_json(&self) -> Value {
        serde_json::json!({ "messages": serde_json::to_value(&self.messages).unwrap_or(Value::Array(Vec::new())) })
    }
}

/// A borrowed view of a request's conversation: `{"messages":[…]}`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ChatConversation<'a> {
    /// The messages.
    pub messages: &'a [ChatMessage],
}

impl Serialize for ChatRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("messages", &self.messages)?;
        for (k, v) in &self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ChatRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Self::from_json_value(Value::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// Token usage of a Chat Completions response.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ChatUsage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Sum of both.
    #[serde(default)]
    pub total_tokens: u64,
    /// Detail objects, kept as written.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: JsonMap,
}

/// One choice of a response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChatChoice {
    /// Choice index.
    #[serde(default)]
    pub index: u32,
    /// The assistant message.
    pub message: ChatMessage,
    /// Why generation stopped (`stop`, `tool_calls`, `length`, …).
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Other fields (`logprobs`, …), kept as written.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: JsonMap,
}

/// A Chat Completions response (and the final message a stream accumulates to).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChatResponse {
    /// Completion id.
    #[serde(default)]
    pub id: String,
    /// The model that answered.
    #[serde(default)]
    pub model: String,
    /// The choices.
    pub choices: Vec<ChatChoice>,
    /// Token usage, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ChatUsage>,
    /// Other fields (`object`, `created`, `system_fingerprint`, …), kept as written.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: JsonMap,
}
