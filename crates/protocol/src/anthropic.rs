//! Anthropic Messages API wire types: request conversation, messages, responses.

use schemars::JsonSchema;
use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::content::{Content, ContentBlock, JsonMap, kind_of};
use crate::error::{ProtocolError, Result};
use crate::fields::Fields;
use crate::message::{Message, Role};

/// One message of a Messages request: `user` or `assistant`, content as a string or blocks.
#[derive(Debug, Clone, PartialEq, JsonSchema)]
pub struct AnthropicMessage {
    /// `user` or `assistant`.
    pub role: Role,
    /// A string, or blocks.
    pub content: Content,
    /// Other fields, kept as written (Claude Code records carry `id`, `model`, `usage`, …).
    #[schemars(skip)]
    pub extra: JsonMap,
}

impl AnthropicMessage {
    /// A message with the given role and content.
    pub fn new(role: Role, content: impl Into<Content>) -> Self {
        Self {
            role,
            content: content.into(),
            extra: JsonMap::new(),
        }
    }

    /// The normalised message (blocks only), without the extras.
    pub fn to_message(&self) -> Message {
        Message::new(self.role, self.content.clone().into_blocks())
    }

    pub(crate) fn from_value<E: serde::de::Error>(value: Value) -> std::result::Result<Self, E> {
        let mut f = Fields::from_value::<E>(value, "message")?;
        let role: Role = f.opt("role")?.ok_or_else(|| f.missing("role"))?;
        let content = match f.remove("content") {
            Some(value) => Content::from_value::<E>(value)
                .map_err(|e| E::custom(format_args!("field `content`: {e}")))?,
            None => return Err(f.missing("content")),
        };
        Ok(Self {
            role,
            content,
            extra: f.rest(),
        })
    }
}

impl From<Message> for AnthropicMessage {
    fn from(message: Message) -> Self {
        Self {
            role: message.role,
            content: Content::Blocks(message.content),
            extra: JsonMap::new(),
        }
    }
}

impl Serialize for AnthropicMessage {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("role", &self.role)?;
        map.serialize_entry("content", &self.content)?;
        for (k, v) in &self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for AnthropicMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Self::from_value(Value::deserialize(d)?)
    }
}

/// A Messages request body, or just its conversation (`{"system":…, "messages":[…]}`).
#[derive(Debug, Clone, PartialEq, Default, JsonSchema)]
pub struct AnthropicRequest {
    /// The system prompt: a string or text blocks.
    pub system: Option<Content>,
    /// The conversation.
    pub messages: Vec<AnthropicMessage>,
    /// Other request fields (`model`, `max_tokens`, `tools`, `stream`, …), kept as written.
    #[schemars(skip)]
    pub extra: JsonMap,
}

impl AnthropicRequest {
    /// Reads a request body; errors name the message index and field.
    pub fn from_json(text: &str) -> Result<Self> {
        crate::validate::check_size("Anthropic request", text, crate::validate::MAX_INPUT_BYTES)?;
        let value: Value =
            serde_json::from_str(text).map_err(|e| ProtocolError::json("Anthropic request", &e))?;
        Self::from_json_value(value)
    }

    /// Reads a request from parsed JSON.
    pub fn from_json_value(value: Value) -> Result<Self> {
        let invalid =
            |path: String, e: serde_json::Error| ProtocolError::invalid(path, e.to_string());
        let mut f = Fields::from_value::<serde_json::Error>(value, "Anthropic request")
            .map_err(|e| invalid("$".to_owned(), e))?;
        let system = match f.remove("system") {
            None | Some(Value::Null) => None,
            Some(v) => Some(Content::from_value(v).map_err(|e| invalid("system".to_owned(), e))?),
        };
        let messages = match f.remove("messages") {
            Some(Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    out.push(
                        AnthropicMessage::from_value(item)
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
            system,
            messages,
            extra: f.rest(),
        })
    }

    /// The conversation part of the request, serialisable as `{"system":…, "messages":[…]}`
    /// in that key order (no `system` key when there is none).
    pub fn conversation(&self) -> AnthropicConversation<'_> {
        AnthropicConversation {
            system: self.system.as_ref(),
            messages: &self.messages,
        }
    }

    /// The conversation as `{"system":…, "messages":[…]}` (no `system` key when there is none),
    /// without the other request fields.
    pub fn conversation_json(&self) -> Value {
        let mut map = JsonMap::new();
        if let Some(system) = &self.system {
            map.insert(
                "system".to_owned(),
                serde_json::to_value(system).unwrap_or(Value::Null),
            );
        }
        map.insert(
            "messages".to_owned(),
            serde_json::to_value(&self.messages).unwrap_or(Value::Array(Vec::new())),
        );
        Value::Object(map)
    }
}

/// A borrowed view of a request's conversation: `system` (when set) and `messages`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct AnthropicConversation<'a> {
    /// The system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<&'a Content>,
    /// The messages.
    pub messages: &'a [AnthropicMessage],
}

impl Serialize for AnthropicRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(system) = &self.system {
            map.serialize_entry("system", system)?;
        }
        map.serialize_entry("messages", &self.messages)?;
        for (k, v) in &self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for AnthropicRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Self::from_json_value(Value::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// Token usage reported by the Messages API.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct AnthropicUsage {
    /// Input tokens billed.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens billed.
    #[serde(default)]
    pub output_tokens: u64,
    /// Tokens written to the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
    /// Tokens read from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u64>,
    /// Other usage fields, kept as written.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: JsonMap,
}

/// A Messages API response (and the final message a stream accumulates to).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AnthropicResponse {
    /// Message id (`msg_…`).
    pub id: String,
    /// Always `message`.
    #[serde(rename = "type", default = "message_type")]
    pub kind: String,
    /// Always `assistant`.
    pub role: Role,
    /// The model that answered.
    #[serde(default)]
    pub model: String,
    /// The blocks.
    pub content: Vec<ContentBlock>,
    /// Why generation stopped (`end_turn`, `tool_use`, `max_tokens`, `refusal`, …).
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// The stop sequence that matched.
    #[serde(default)]
    pub stop_sequence: Option<String>,
    /// Token usage.
    #[serde(default)]
    pub usage: AnthropicUsage,
    /// Other fields (`stop_details`, `container`, …), kept as written.
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: JsonMap,
}

fn message_type() -> String {
    "message".to_owned()
}

impl AnthropicResponse {
    /// The response as a normalised assistant message.
    pub fn to_message(&self) -> Message {
        Message::new(Role::Assistant, self.content.clone()).with_id(self.id.clone())
    }

    /// The response as a request message (`role` + `content` blocks).
    pub fn to_request_message(&self) -> AnthropicMessage {
        AnthropicMessage::new(Role::Assistant, Content::Blocks(self.content.clone()))
    }
}
